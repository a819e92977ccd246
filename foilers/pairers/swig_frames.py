"""SWiG frames: another image annotated with the foil's verb and the caption's role fillers (matched by noun id).

* action replacement ("A man shouts at a woman." -> "A man cheers at a woman."): a partner whose verb is the
  foil's verb and whose subject and object are the caption's nouns (the WordNet noun ids SWiG annotates). One
  verb per SWiG image, so the caption's verb is not the partner's;
* actant swap ("A man shouts at a woman." -> "A woman shouts at a man."): a partner with the caption's verb and the
  two fillers exchanged; a partner of which any frame states the caption's order is refused.

Subject and object are read as the foilers read them (foilers/lang/realise.py `action_from_sample`: the frame
agreeing most with the majority of the three annotators, its subject role and first other filled role).
"""

from __future__ import annotations

from collections import defaultdict

from foilforge.foilers.lang.realise import frame_parts
from foilforge.pairing import PAIRERS, Pairer, Partner


def _parts(sample: dict):
    if "frames" not in sample or "verb" not in sample:
        return None
    return frame_parts(sample["verb"], sample["frames"], sample.get("verb_abstract"), sample.get("verb_order") or [])


def _states(sample: dict, subject_role: str, object_role: str | None, subject_id: str, object_id: str | None) -> bool:
    """Whether any annotator's frame of `sample` has these fillers in these roles."""
    return any(frame.get(subject_role) == subject_id and (object_role is None or frame.get(object_role) == object_id)
               for frame in sample.get("frames") or [])


@PAIRERS.register("swig_frames.v1")
class SwigFrames(Pairer):
    evidence = "another SWiG image annotated with the foil's verb and role fillers (noun ids)"

    def __init__(self):
        pass  # no arguments: params.yaml `args: {}`

    def index(self, samples, records) -> None:
        from foilforge.foilers.lang.wordnet_constraints import verb_lemma

        self._lemma = verb_lemma
        self._by_action: dict[tuple, list[tuple[dict, object]]] = defaultdict(list)
        for sample in sorted(samples, key=lambda s: str(s.get("id"))):
            parts = _parts(sample)
            if parts is not None and parts.object_id:
                self._by_action[(parts.verb, parts.subject_id, parts.object_id)].append((sample, parts))

    def candidates(self, record: dict, sample: dict | None) -> list[Partner]:
        parts = _parts(sample) if sample is not None else None
        if parts is None or not parts.object_id:
            return []
        method = record.get("foiling_method")
        if method == "change_action" and record.get("foil_verb"):
            key, rule = (self._lemma(record["foil_verb"]), parts.subject_id, parts.object_id), "swig: foil's verb, same fillers"
        elif method == "actant_swap":
            key, rule = (parts.verb, parts.object_id, parts.subject_id), "swig: same verb, fillers exchanged"
        else:
            return []
        partners = []
        for other, other_parts in self._by_action.get(key, []):
            if method == "actant_swap" and _states(other, other_parts.subject_role, other_parts.object_role,
                                                   parts.subject_id, parts.object_id):
                continue
            partners.append(Partner(
                sample_id=str(other["id"]), image_file=other["image_file"], dataset_idx=str(other.get("dataset_idx")),
                rule=rule, annotations=(f"swig {sample['id']} {parts.verb} {parts.subject_id} {parts.object_id}",
                                        f"swig {other['id']} {other_parts.verb} {other_parts.subject_id} {other_parts.object_id}")))
        return partners
