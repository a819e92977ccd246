"""Tiny random models written to a temp dir and loaded back through `from_pretrained(path)`.

Their scores are meaningless; the code path (tokenizer, batching, heads,
label maps) is the one users run with real checkpoints.
"""

from __future__ import annotations

from pathlib import Path

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = (
    "a an the one two three four five six seven eight nine ten eleven twelve exactly single some number of "
    "there is are no man men woman women dog dogs cat cats table tables on in under near behind above below "
    "next to at by with from into onto out over inside outside front sitting standing holding playing riding "
    "eating is are was were it they he she his her their its this that yes no picture photo color shown "
    "field fields frisbee street car cars bus buses person people child children plate plates pizza . , ? !"
).split()


def write_vocab(directory: Path, extra_words=()) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    vocab = list(dict.fromkeys(SPECIAL + WORDS + [w.lower() for w in extra_words]))
    # single characters and ## pieces so every word tokenizes without [UNK]
    chars = [chr(c) for c in range(ord("a"), ord("z") + 1)] + list("0123456789'-")
    vocab += [c for c in chars if c not in vocab] + ["##" + c for c in chars]
    path = directory / "vocab.txt"
    path.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    return path


class TinyModels:
    def __init__(self, root: Path):
        self.root = Path(root)
        self._cache: dict[str, Path] = {}

    def _tokenizer(self, directory: Path, lowercase=True):
        from transformers import BertTokenizerFast

        vocab = write_vocab(directory)
        tok = BertTokenizerFast(vocab=str(vocab), do_lower_case=lowercase)  # transformers 5: `vocab_file=` is ignored
        tok.save_pretrained(directory)
        return tok

    def _bert_config(self, tok, **kw):
        from transformers import BertConfig

        return BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                          intermediate_size=37, max_position_embeddings=160, **kw)

    def bert_mlm(self, name="bert-mlm", seed=0) -> Path:
        """BertForMaskedLM with its MLM head saved (a head that loads, not a fresh one)."""
        if name in self._cache:
            return self._cache[name]
        import torch
        from transformers import BertForMaskedLM

        torch.manual_seed(seed)
        d = self.root / name
        tok = self._tokenizer(d)
        BertForMaskedLM(self._bert_config(tok)).save_pretrained(d)
        self._cache[name] = d
        return d

    def bert_encoder_only(self, name="bert-no-head", seed=0) -> Path:
        """A BertModel checkpoint without an MLM head, like the hub's SpanBERT files."""
        if name in self._cache:
            return self._cache[name]
        import torch
        from transformers import BertModel

        torch.manual_seed(seed)
        d = self.root / name
        tok = self._tokenizer(d)
        BertModel(self._bert_config(tok)).save_pretrained(d)
        self._cache[name] = d
        return d

    def bert_classifier(self, name="bert-cola", num_labels=2, id2label=None, seed=0) -> Path:
        if name in self._cache:
            return self._cache[name]
        import torch
        from transformers import BertForSequenceClassification

        torch.manual_seed(seed)
        d = self.root / name
        tok = self._tokenizer(d)
        kw = {"num_labels": num_labels}
        if id2label:
            kw.update(id2label=id2label, label2id={v: k for k, v in id2label.items()})
        BertForSequenceClassification(self._bert_config(tok, **kw)).save_pretrained(d)
        self._cache[name] = d
        return d

    def albert_nli(self, name="albert-nli", id2label=None, seed=0) -> Path:
        if name in self._cache:
            return self._cache[name]
        import torch
        from transformers import AlbertConfig, AlbertForSequenceClassification

        torch.manual_seed(seed)
        d = self.root / name
        tok = self._tokenizer(d)
        id2label = id2label or {0: "entailment", 1: "neutral", 2: "contradiction"}
        cfg = AlbertConfig(vocab_size=tok.vocab_size, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                           num_attention_heads=2, intermediate_size=37, max_position_embeddings=160, num_labels=3,
                           id2label=id2label, label2id={v: k for k, v in id2label.items()})
        AlbertForSequenceClassification(cfg).save_pretrained(d)
        self._cache[name] = d
        return d

    def gpt2_lm(self, name="gpt2-lm", seed=0) -> Path:
        """GPT2LMHeadModel with a WordPiece tokenizer (the tokenizer class does not matter to the code path)."""
        if name in self._cache:
            return self._cache[name]
        import torch
        from transformers import GPT2Config, GPT2LMHeadModel

        torch.manual_seed(seed)
        d = self.root / name
        tok = self._tokenizer(d)
        cfg = GPT2Config(vocab_size=tok.vocab_size, n_embd=32, n_layer=2, n_head=2, n_positions=160,
                         bos_token_id=tok.cls_token_id, eos_token_id=tok.sep_token_id, pad_token_id=tok.pad_token_id)
        GPT2LMHeadModel(cfg).save_pretrained(d)
        self._cache[name] = d
        return d

    def albert_nli_constant(self, name="albert-nli-constant", predict=0, id2label=None, seed=0) -> Path:
        """A tiny ALBERT NLI model that always predicts class `predict`: zero classifier weights, one large bias.

        A real checkpoint whose output is known in advance, for testing the label-order sanity check.
        """
        if name in self._cache:
            return self._cache[name]
        import torch
        from transformers import AlbertForSequenceClassification

        source = self.albert_nli(name=f"{name}-base", id2label=id2label, seed=seed)
        model = AlbertForSequenceClassification.from_pretrained(source)
        with torch.no_grad():
            model.classifier.weight.zero_()
            model.classifier.bias.fill_(-10.0)
            model.classifier.bias[predict] = 10.0
        d = self.root / name
        model.save_pretrained(d)
        self._tokenizer(d)
        self._cache[name] = d
        return d

    def llama_gguf(self, name="llama-gguf", seed=0) -> Path:
        """A directory holding `tiny-llama.gguf`: a 2-layer Llama (SmolLM2's architecture) with a byte-level BPE
        tokenizer in the GGUF's own metadata, its matrices quantised to Q4_1 as the packaged SmolLM2's are, so a
        load de-quantises them the same way. Written with the gguf package's writer, read by transformers'
        `from_pretrained(dir, gguf_file=...)`."""
        if name in self._cache:
            return self._cache[name]
        import gguf
        import numpy as np
        from transformers.convert_slow_tokenizer import bytes_to_unicode

        rng = np.random.default_rng(seed)
        hidden, layers, heads, feed_forward = 32, 2, 2, 64
        merges = ["Ġ a", "Ġ t", "h e", "Ġt he", "Ġ m", "a n"]
        byte_symbols = bytes_to_unicode()   # GPT-2's byte-level alphabet: the character standing for each byte
        tokens = ["<|endoftext|>", *(byte_symbols[b] for b in range(256)), *(merge.replace(" ", "") for merge in merges)]
        d = self.root / name
        d.mkdir(parents=True, exist_ok=True)
        writer = gguf.GGUFWriter(str(d / "tiny-llama.gguf"), "llama")
        writer.add_name("tiny-llama")
        writer.add_context_length(128)
        writer.add_embedding_length(hidden)
        writer.add_block_count(layers)
        writer.add_feed_forward_length(feed_forward)
        writer.add_head_count(heads)
        writer.add_head_count_kv(heads)
        writer.add_layer_norm_rms_eps(1e-5)
        writer.add_rope_freq_base(10000.0)
        writer.add_vocab_size(len(tokens))
        writer.add_tokenizer_model("gpt2")
        writer.add_token_list(tokens)
        writer.add_token_types([gguf.TokenType.CONTROL] + [gguf.TokenType.NORMAL] * (len(tokens) - 1))
        writer.add_token_merges(merges)
        for add_id in (writer.add_bos_token_id, writer.add_eos_token_id, writer.add_pad_token_id):
            add_id(0)

        def matrix(tensor_name, rows, columns):
            weights = (rng.standard_normal((rows, columns)) * 0.05).astype(np.float32)
            quantised = gguf.quants.quantize(weights, gguf.GGMLQuantizationType.Q4_1)
            writer.add_tensor(tensor_name, quantised, raw_dtype=gguf.GGMLQuantizationType.Q4_1)

        def norm(tensor_name):
            writer.add_tensor(tensor_name, (1 + 0.1 * rng.standard_normal(hidden)).astype(np.float32))

        matrix("token_embd.weight", len(tokens), hidden)
        for block in range(layers):
            norm(f"blk.{block}.attn_norm.weight")
            for part in ("attn_q", "attn_k", "attn_v", "attn_output"):
                matrix(f"blk.{block}.{part}.weight", hidden, hidden)
            norm(f"blk.{block}.ffn_norm.weight")
            matrix(f"blk.{block}.ffn_gate.weight", feed_forward, hidden)
            matrix(f"blk.{block}.ffn_up.weight", feed_forward, hidden)
            matrix(f"blk.{block}.ffn_down.weight", hidden, feed_forward)
        norm("output_norm.weight")
        matrix("output.weight", len(tokens), hidden)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        self._cache[name] = d
        return d

