"""SWiG frames: another image annotated with the foil's verb and the caption's role fillers (matched by noun id).

* action replacement ("A man shouts at a woman." -> "A man cheers at a woman."): a partner whose verb is the
  foil's verb and whose subject and object are the caption's nouns (the WordNet noun ids SWiG annotates). One
  verb per SWiG image, so the caption's verb is not the partner's;
* actant swap ("A man shouts at a woman." -> "A woman shouts at a man."): a partner with the caption's verb and the
  two fillers exchanged; a partner of which any frame states the caption's order is refused.

Subject and object are read as the foilers read them (foilers/lang/realise.py `action_from_sample`: the frame
agreeing most with the majority of the three annotators, its subject role and first other filled role).

The evidence is read from the partner's frame: the verb and the two fillers in their roles, each a claim stated by
that annotation, so a partner is fully supported by construction (`basis: annotation`).
"""

from __future__ import annotations

from collections import defaultdict

from foilforge.foilers.lang.realise import frame_parts
from foilforge.groups import ANNOTATION, Claim
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
        swap = method == "actant_swap"
        for other, other_parts in self._by_action.get(key, []):
            if swap and _states(other, other_parts.subject_role, other_parts.object_role,
                                parts.subject_id, parts.object_id):
                continue
            frame = (f"swig {other['id']}",)
            claims = (
                Claim("verb", other_parts.verb, frame, edited=not swap, basis=ANNOTATION),
                Claim("role", f"{other_parts.subject_role}: {self._gloss(other, other_parts.subject_id)}", frame,
                      edited=swap, basis=ANNOTATION),
                Claim("role", f"{other_parts.object_role}: {self._gloss(other, other_parts.object_id)}", frame,
                      edited=swap, basis=ANNOTATION))
            absent = ((f"the caption's order ({parts.subject_id} {parts.object_id}) in any frame",) if swap
                      else (f"the caption's verb {parts.verb} (one verb an image)",))
            partners.append(Partner(
                sample_id=str(other["id"]), image_file=other["image_file"], dataset_idx=str(other.get("dataset_idx")),
                rule=rule, annotations=(f"swig {sample['id']} {parts.verb} {parts.subject_id} {parts.object_id}",
                                        f"swig {other['id']} {other_parts.verb} {other_parts.subject_id} {other_parts.object_id}"),
                claims=claims, absent=absent))
        return partners

    @staticmethod
    def _gloss(sample: dict, noun_id: str) -> str:
        """A noun id with its first gloss ("n10287213 man")."""
        glosses = (sample.get("nouns") or {}).get(noun_id) or []
        return f"{noun_id} {glosses[0]}" if glosses else str(noun_id)
