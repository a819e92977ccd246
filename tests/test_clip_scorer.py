"""The image-text scorer end to end: a tiny random CLIP saved to a temp dir, loaded by path, on generated images."""

import json

import pytest

from foilforge.pipeline.evaluate_scorers.image_text import ImageTextScorer
from foilforge.pipeline.stages import evaluate


def _byte_chars() -> list[str]:
    # the printable stand-ins byte-level BPE uses for the 256 byte values
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars, extra = [], 0
    for b in range(256):
        if b in printable:
            chars.append(chr(b))
        else:
            chars.append(chr(256 + extra))
            extra += 1
    return chars


def build_tiny_clip(directory):
    """CLIPModel with tiny text/vision towers + a character-level CLIP tokenizer + CLIPImageProcessor."""
    import torch
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor, CLIPTokenizer

    directory.mkdir(parents=True, exist_ok=True)
    chars = _byte_chars()
    vocab = {}
    for token in chars + [c + "</w>" for c in chars] + ["<|startoftext|>", "<|endoftext|>"]:
        vocab.setdefault(token, len(vocab))
    (directory / "vocab.json").write_text(json.dumps(vocab))
    (directory / "merges.txt").write_text("#version: 0.2\n")
    tokenizer = CLIPTokenizer(str(directory / "vocab.json"), str(directory / "merges.txt"))
    images = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    CLIPProcessor(image_processor=images, tokenizer=tokenizer).save_pretrained(directory)
    config = CLIPConfig(
        text_config={"vocab_size": len(vocab), "hidden_size": 32, "intermediate_size": 37, "num_hidden_layers": 2,
                     "num_attention_heads": 2, "max_position_embeddings": 77,
                     "bos_token_id": vocab["<|startoftext|>"], "eos_token_id": vocab["<|endoftext|>"],
                     "pad_token_id": vocab["<|endoftext|>"]},
        vision_config={"hidden_size": 32, "intermediate_size": 37, "num_hidden_layers": 2, "num_attention_heads": 2,
                       "image_size": 32, "patch_size": 8},
        projection_dim=16,
    )
    torch.manual_seed(0)
    CLIPModel(config).save_pretrained(directory)
    return directory


def _images(root, names):
    from PIL import Image

    root.mkdir(parents=True, exist_ok=True)
    colours = [(255, 0, 0), (0, 160, 0), (0, 0, 255), (200, 200, 0)]
    for k, name in enumerate(names):
        image = Image.new("RGB", (48 + 8 * k, 40), colours[k % len(colours)])
        image.paste((255, 255, 255), (4, 4, 20, 20))
        image.save(root / name)


def test_image_text_scorer_end_to_end(tmp_path):
    model_dir = build_tiny_clip(tmp_path / "tiny-clip")
    image_root = tmp_path / "images"
    _images(image_root, ["1.jpg", "2.png", "3.jpg"])
    bench = tmp_path / "benchmark"
    bench.mkdir()
    records = {
        "r1": {"caption": "a red square.", "foil": "a blue square.", "image_file": "1.jpg"},
        "r2": {"caption": "two dogs on grass.", "foil": "one dog on grass.", "image_file": "2.png"},
        "r3": {"caption": "a cat on a mat.", "foil": "a mat on a cat.", "image_file": "3.jpg"},
        "r4": {"caption": "no image here.", "foil": "an image here.", "image_file": "missing.jpg"},
    }
    (bench / "relations.json").write_text(json.dumps(records))
    params = {
        "models": {"image_text": {"name_or_path": str(model_dir), "device": "cpu", "batch_size": 2}},
        "evaluate": {"scorers": ["image_text"], "image_root": str(image_root)},
    }
    out = evaluate.run(params, bench, tmp_path / "metrics.json", [])
    got = out["image_text"]["instruments"]["relations"]
    assert out["image_text"]["model"] == str(model_dir)
    assert got["n_records"] == 4 and got["n_scored"] == 3  # r4's image is absent

    # the scores are the model's own logits_per_image for (image, caption) and (image, foil)
    import torch
    from PIL import Image
    from transformers import CLIPModel, CLIPProcessor

    model = CLIPModel.from_pretrained(model_dir).eval()
    processor = CLIPProcessor.from_pretrained(model_dir)
    wins = []
    for key in ("r1", "r2", "r3"):
        record = records[key]
        image = Image.open(image_root / record["image_file"]).convert("RGB")
        inputs = processor(text=[record["caption"], record["foil"]], images=[image], return_tensors="pt", padding=True)
        with torch.inference_mode():
            logits = model(**inputs).logits_per_image[0]
        wins.append(bool(logits[0] > logits[1]))
    assert got["acc_r"] == pytest.approx(sum(wins) / 3)
    assert got["auroc"] is not None and 0.0 <= got["auroc"] <= 1.0
    assert got["p_c"] is None  # CLIP only ranks: no threshold metrics


def test_image_text_model_that_cannot_load_names_the_param(tmp_path):
    from foilforge.errors import ConfigError
    from foilforge.models import ModelSpec

    (tmp_path / "images").mkdir()
    spec = ModelSpec.from_params({"name_or_path": str(tmp_path / "no-such-model")}, "models.image_text")
    with pytest.raises(ConfigError, match=r"Set models.image_text.name_or_path"):
        ImageTextScorer(spec, tmp_path / "images")
