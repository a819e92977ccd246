"""Batching and padding for every model of the models layer, in one place.

Length-sorted batches of token ids, padded on the right by the tokenizer itself, with an attention
mask. Sorting by length keeps padding (wasted compute) small; the mask keeps a padded position from
changing any real position's output, so a text scores the same alone or in a batch. Right padding
also keeps position ids 0..n-1 for causal and BERT-style models alike. Users: foilforge.lm (causal
and masked LMs), foilforge.scorers (span scoring), filters/gruen.py, filters/nli.py.
"""

from __future__ import annotations

from typing import Iterator


def length_sorted_batches(lengths: list[int], batch_size: int) -> Iterator[list[int]]:
    """Indices into `lengths`, grouped into batches of similar length (stable for ties)."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    for start in range(0, len(order), max(1, batch_size)):
        yield order[start : start + batch_size]


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
