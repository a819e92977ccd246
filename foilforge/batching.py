"""Batching and padding for every model of the models layer, in one place.

Length-sorted batches of token ids, padded on the right by the tokenizer itself, with an attention
mask. Sorting by length keeps padding (wasted compute) small; the mask keeps a padded position from
changing any real position's output, so a text scores the same alone or in a batch. Right padding
also keeps position ids 0..n-1 for causal and BERT-style models alike. Users: foilforge.lm (causal
and masked LMs), foilforge.span_ranking (span scoring), filters/gruen.py, filters/nli.py.

A mask keeps the padding out of a text's numbers, but not out of their last bits: a matrix product sums in an
order that depends on the shape it is given and on the threads that share it, so a padded text's scores depend on
the texts batched with it. `same_length_batches` is the canonical way foilforge.lm computes a text's pass instead:
texts of one token length together, no padding, one torch thread on the CPU, and a row count `batch_rows` sets:

* on a CPU without AMX, up to the caller's batch size, every batch at least `MIN_BATCH_TOKENS` tokens (a product
  of a few rows takes another path in the BLAS: SmolLM2's texts of 2 and 3 tokens alone differed from the same
  texts in a batch); more rows do not change a row's sums there;
* on a CPU with AMX, in bfloat16, exactly ceil(`AMX_BATCH_TOKENS` / length) rows: oneDNN picks its AMX or
  AVX-512 kernel by the product's shape (for SmolLM2's 12-token texts, 1 and 2 rows summed otherwise than 3 to
  32), so the shape must be a function of the length alone;
* on an accelerator, whose libraries also choose kernels by shape, `ACCELERATOR_ROWS` rows.

A text then gets the same bits alone, in any batch of its length, at any place in it (tests/test_pass_store.py;
docs/performance.md, "One pass per text"). Rows are made up by repeating the last one (`fill_rows`), and their
outputs are dropped.
"""

from __future__ import annotations

from typing import Iterator


def length_sorted_batches(lengths: list[int], batch_size: int) -> Iterator[list[int]]:
    """Indices into `lengths`, grouped into batches of similar length (stable for ties)."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    for start in range(0, len(order), max(1, batch_size)):
        yield order[start : start + batch_size]


#: rows of every canonical batch on an accelerator (CUDA, MPS): the shape does not depend on the other texts
ACCELERATOR_ROWS = 64
#: tokens (rows x length) of every canonical batch on a CPU without AMX at least
MIN_BATCH_TOKENS = 32
#: tokens (rows x length) of every canonical bfloat16 batch on a CPU with AMX, rounded up to whole rows: larger
#: batches serve a stage's many texts faster, and slow a few texts alone with their filler rows. 128 keeps the bits
#: SmolLM2's texts had at 64 (oneDNN keeps its kernel there; a larger budget changes it, and the bits) and serves a
#: stage's calls faster (docs/performance.md, "Hosts of one CPU name"; benchmarks/bench_amx_batch_tokens.py)
AMX_BATCH_TOKENS = 128


def batch_rows(length: int, shapes: str, most: int) -> tuple[int, int]:
    """(rows a canonical batch of texts of `length` tokens takes at most, rows it is filled up to), by the
    `shapes` rule of the device that runs it: "accelerator", "amx" (a bfloat16 pass on a CPU with AMX) or "cpu"
    (any other CPU pass, whose batches hold up to `most` texts; module docstring)."""
    if shapes == "accelerator":
        return ACCELERATOR_ROWS, ACCELERATOR_ROWS
    if shapes == "amx":
        rows = -(-AMX_BATCH_TOKENS // max(1, length))
        return rows, rows
    return max(1, most), -(-MIN_BATCH_TOKENS // max(1, length))


def same_length_batches(lengths: list[int], rows) -> Iterator[list[int]]:
    """Indices into `lengths` in batches of at most `rows` texts of one length (an int, or a function of the
    length), shortest first (ties in index order). With no padding a text's outputs do not depend on its
    companions (module docstring)."""
    by_length: dict[int, list[int]] = {}
    for i, length in enumerate(lengths):
        by_length.setdefault(length, []).append(i)
    for length in sorted(by_length):
        same = by_length[length]
        most = max(1, rows(length) if callable(rows) else rows)
        for start in range(0, len(same), most):
            yield same[start : start + most]


def fill_rows(ids, rows: int):
    """A (batch, length) tensor of ids with its last row repeated up to `rows` rows (an accelerator's fixed
    shape); the caller reads the first `len(ids)` rows of the outputs."""
    import torch

    missing = rows - ids.shape[0]
    return ids if missing <= 0 else torch.cat([ids, ids[-1:].expand(missing, -1)], 0)


def token_budget_batches(lengths: list[int], batch_size: int, max_batch_tokens: int | None = None) -> Iterator[list[int]]:
    """Indices into `lengths` sorted by length (stable for ties), cut into batches of at most `batch_size` rows
    and, when `max_batch_tokens` is set, at most that many padded tokens (rows times the longest row); a row
    longer than the budget goes alone. Without a budget: `length_sorted_batches`.

    On a GPU the budget, not the row count, is what fills the device: short sentences go in wide batches and
    long ones in narrow batches of about the same size in tokens."""
    if max_batch_tokens is None:
        yield from length_sorted_batches(lengths, batch_size)
        return
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batch: list[int] = []
    for i in order:
        # sorted ascending: the row joining is the batch's longest
        if batch and (len(batch) >= batch_size or lengths[i] * (len(batch) + 1) > max_batch_tokens):
            yield batch
            batch = []
        batch.append(i)
    if batch:
        yield batch


def check_max_batch_tokens(value, param_key: str) -> None:
    """`max_batch_tokens` of a model block: null (batches of batch_size rows) or an integer >= 1."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        from foilforge.errors import ConfigError

        raise ConfigError(f"{param_key}.max_batch_tokens must be an integer >= 1 (padded tokens a batch) or null "
                          f"(batches of batch_size rows), got {value!r}")


def ensure_pad_token(tokenizer) -> None:
    """Give a tokenizer without a pad token its EOS (else UNK) token as one: padded positions are masked, so
    the id is never read."""
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None and tokenizer.unk_token is None:
            from foilforge.errors import ConfigError

            raise ConfigError(f"tokenizer {getattr(tokenizer, 'name_or_path', '')!r} has neither a pad nor an EOS "
                              "token, so batches cannot be padded; use a checkpoint whose tokenizer defines one")
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token


def pad_ids(tokenizer, sequences: list[list[int]]):
    """(input ids, attention mask) of token-id sequences as CPU tensors, padded on the right."""
    ensure_pad_token(tokenizer)
    batch = tokenizer.pad({"input_ids": sequences}, padding=True, padding_side="right", return_attention_mask=True,
                          return_tensors="pt")
    return batch["input_ids"], batch["attention_mask"]


def pad(tokenizer, encodings: list[dict], device) -> dict:
    """The tokenizer's own padding of its outputs into tensors with an attention mask, on `device`.

    Always on the right, whatever the tokenizer's `padding_side`: BERT-style models number positions from
    the left, so left padding would shift every real token's position and change its score.
    """
    ensure_pad_token(tokenizer)
    batch = tokenizer.pad([{k: e[k] for k in ("input_ids", "token_type_ids") if k in e} for e in encodings],
                          padding=True, padding_side="right", return_attention_mask=True, return_tensors="pt")
    return {k: v.to(device) for k, v in batch.items()}


def progress_bar(total: int, desc: str, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="text", disable=not enabled)
