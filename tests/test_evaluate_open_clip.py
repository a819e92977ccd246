"""The open_clip scorer against CLIP_benchmark's own SugarCrepe evaluation, the per-item scores file and the `config`
block of the results: a tiny random open_clip model saved in the `local-dir:` layout, loaded through params.yaml's
`models.open_clip` as a user's model is, on generated images."""

import argparse
import hashlib
import json

import pytest

from foilforge.errors import ConfigError
from foilforge.pipeline.stages import evaluate

MEAN = [0.48145466, 0.4578275, 0.40821073]
STD = [0.26862954, 0.26130258, 0.27577711]
MODEL_CFG = {
    "embed_dim": 16,
    # head_width: open_clip's default (64) leaves a 32-wide tower no head; pool_type avg: a random tower's class token
    # hardly depends on the image (cosine ~0.98 between any two images), the mean of its patch tokens does
    "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "head_width": 16, "patch_size": 16, "pool_type": "avg"},
    "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1},
}
# (image, caption, foil): a random model ranks them by chance, so some are right and some wrong
PAIRS = [
    ("a.jpg", "A cat on a table.", "A cat under a table."),
    ("b.png", "A dog in a car.", "A dog on a car."),
    ("c.jpg", "A man at a bus stop.", "A man behind a bus stop."),
    ("d.png", "Two horses in a field.", "Three horses in a field."),
    ("e.jpg", "A woman is riding a bike.", "A woman is pushing a bike."),
    ("f.png", "There are birds on the wire.", "There are no birds on the wire."),
    ("a.jpg", "A red kite in the sky.", "A green kite in the sky."),
    ("b.png", "The boy throws the ball.", "The ball throws the boy."),
    ("c.jpg", "A plate with one apple.", "A plate with four apples."),
    ("d.png", "A train leaves the station.", "A train enters the station."),
    ("e.jpg", "Children playing in the snow.", "Children sleeping in the snow."),
    ("f.png", "A lamp next to a bed.", "A bed next to a lamp."),
    ("a.jpg", "Some people are dancing.", "Nobody is dancing."),
    ("b.png", "A boat on a calm lake.", "A boat on a rough sea."),
]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """(model dir, image root, benchmark dir, SugarCrepe annotation file, VALSE records) in a temporary directory."""
    import numpy as np
    import open_clip
    import torch
    from PIL import Image
    from safetensors.torch import save_file

    root = tmp_path_factory.mktemp("open-clip")
    model_dir = root / "tiny-open-clip"
    model_dir.mkdir()
    (model_dir / "open_clip_config.json").write_text(json.dumps(
        {"model_cfg": MODEL_CFG, "preprocess_cfg": {"mean": MEAN, "std": STD}}))
    torch.manual_seed(0)
    model = open_clip.create_model(f"local-dir:{model_dir}")  # no weights there yet: random ones, seeded
    save_file(model.state_dict(), str(model_dir / "open_clip_model.safetensors"))

    image_root = root / "images"
    image_root.mkdir()
    rng = np.random.RandomState(0)
    for name in sorted({image for image, _, _ in PAIRS}):
        Image.fromarray(rng.randint(0, 256, (40, 40, 3), dtype=np.uint8), "RGB").save(image_root / name)

    bench = root / "benchmark"
    bench.mkdir()
    records = {str(k): {"image_file": image, "caption": caption, "foil": foil, "linguistic_phenomena": "relations"}
               for k, (image, caption, foil) in enumerate(PAIRS)}
    (bench / "relations.json").write_text(json.dumps(records))
    # a second instrument: a record whose image is absent, and a multiple-choice item
    (bench / "mixed.json").write_text(json.dumps({
        "m1": {"image_file": "missing.jpg", "caption": "A cat.", "foil": "A dog."},
        "m2": {"image_file": "c.jpg", "candidates": ["a kite", "a boat", "a train"], "label": 1},
    }))
    ann_file = root / "sugarcrepe_relations.json"
    ann_file.write_text(json.dumps({key: {"filename": r["image_file"], "caption": r["caption"],
                                          "negative_caption": r["foil"]} for key, r in records.items()}))
    return model_dir, image_root, bench, ann_file, records


def _params(model_dir, image_root, **block):
    block = {"name_or_path": f"local-dir:{model_dir}", "device": "cpu", "batch_size": 5, **block}
    return {"models": {"open_clip": block},
            "evaluate": {"scorers": ["open_clip"], "image_root": str(image_root)}}


def _read_items(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_acc_r_is_clip_benchmarks_sugarcrepe_text_acc(setup, tmp_path):
    import open_clip
    from clip_benchmark.datasets.builder import image_captions_collate_fn
    from clip_benchmark.datasets.sugar_crepe import SugarCrepe
    from clip_benchmark.metrics import image_caption_selection
    from torch.utils.data import DataLoader, Subset

    model_dir, image_root, bench, ann_file, _ = setup
    out = evaluate.run(_params(model_dir, image_root), bench, tmp_path / "metrics.json",
                       items_output=tmp_path / "items.jsonl")
    ours = out["open_clip"]["instruments"]["relations"]
    assert ours["n_scored"] == len(PAIRS)
    items = {r["id"]: r for r in _read_items(tmp_path / "items.jsonl") if r["instrument"] == "relations"}
    # CLIP_benchmark's argmax gives a tie to the caption, ours counts it a miss: the two agree only without ties
    assert all(abs(r["scores"][0] - r["scores"][1]) > 1e-4 for r in items.values())

    # CLIP_benchmark's own evaluation of the same model (loaded as its CLI does) on the same files
    model, _, preprocess = open_clip.create_model_and_transforms(f"local-dir:{model_dir}", device="cpu")
    model.eval()
    tokenizer = open_clip.get_tokenizer(f"local-dir:{model_dir}")
    dataset = SugarCrepe(root=str(image_root), ann_file=str(ann_file), transform=preprocess)

    def text_acc(data) -> float:
        loader = DataLoader(data, batch_size=4, shuffle=False, collate_fn=image_captions_collate_fn)
        return image_caption_selection.evaluate(model, loader, tokenizer, device="cpu", amp=False)["text_acc"]

    expected = text_acc(dataset)
    assert ours["acc_r"] == pytest.approx(expected, abs=1e-6)
    assert 0.0 < ours["acc_r"] < 1.0  # the random model gets some right and some wrong: the comparison means something
    # item by item: CLIP_benchmark on each record alone, and our items file
    for index, key in enumerate(dataset.idx_strings):
        assert items[key]["correct"] == (text_acc(Subset(dataset, [index])) == 1.0), key
    assert sum(r["correct"] for r in items.values()) / len(items) == pytest.approx(ours["acc_r"])


def test_the_exported_sugarcrepe_file_gives_the_evaluate_stages_acc_r(setup, shared, tmp_path, monkeypatch):
    """The export's own SugarCrepe file (pipeline/emitters/sugarcrepe.py) of VALSE's released relations pairs,
    through CLIP_benchmark, equals the evaluate stage on the exported benchmark (images generated under the
    released file names: the real images are not shipped)."""
    import numpy as np
    import open_clip
    from clip_benchmark.datasets.builder import image_captions_collate_fn
    from clip_benchmark.datasets.sugar_crepe import SugarCrepe
    from clip_benchmark.metrics import image_caption_selection
    from PIL import Image
    from torch.utils.data import DataLoader

    from foilforge.pipeline import release as export

    released = json.loads(shared("data", "valse-dev", "relations.json").read_text())
    chosen = sorted(released.items())[:24]
    images = tmp_path / "images"
    images.mkdir()
    rng = np.random.RandomState(3)
    for _, record in chosen:
        Image.fromarray(rng.randint(0, 256, (36, 36, 3), dtype=np.uint8), "RGB").save(images / record["image_file"])
    filtered = tmp_path / "filtered"
    filtered.mkdir()
    (filtered / "relations.jsonl").write_text("".join(json.dumps(
        {"id": f"relations:{key}", "caption": r["caption"], "foil": r["foil"], "image_file": r["image_file"],
         "linguistic_phenomena": "relations", "filters": {"length": {"score": 5, "passed": True}}}) + "\n"
        for key, r in chosen))
    monkeypatch.setattr(export, "write_native_files", lambda *a, **k: [])
    bench = tmp_path / "benchmark"
    export.export({"sources": {}, "instruments": {}, "export": {"formats": ["sugarcrepe"], "image_root": str(images)}},
                  filtered, None, None, bench)

    model_dir = setup[0]
    ours = evaluate.run(_params(model_dir, images), bench, tmp_path / "metrics.json",
                        items_output=tmp_path / "items.jsonl")["open_clip"]["instruments"]["relations"]
    assert ours["n_scored"] == len(chosen)
    assert all(abs(r["scores"][0] - r["scores"][1]) > 1e-4 for r in _read_items(tmp_path / "items.jsonl"))
    model, _, preprocess = open_clip.create_model_and_transforms(f"local-dir:{model_dir}", device="cpu")
    model.eval()
    dataset = SugarCrepe(root=str(images), ann_file=str(bench / "sugarcrepe" / "relations.json"), transform=preprocess)
    loader = DataLoader(dataset, batch_size=8, shuffle=False, collate_fn=image_captions_collate_fn)
    theirs = image_caption_selection.evaluate(model, loader, open_clip.get_tokenizer(f"local-dir:{model_dir}"),
                                              device="cpu", amp=False)["text_acc"]
    assert len(dataset) == len(chosen) and 0.0 < ours["acc_r"] < 1.0
    assert ours["acc_r"] == pytest.approx(theirs, abs=1e-6)


def test_items_file_and_config(setup, tmp_path):
    import open_clip
    import torch

    model_dir, image_root, bench, _, records = setup
    scores_file = tmp_path / "elsewhere.jsonl"
    scores_file.write_text('{"id": "0", "caption_score": 0.9, "foil_score": 0.1}\n'
                           '{"id": "m2", "candidate_scores": [0.5, 0.2, 0.3]}\n')
    items_path = tmp_path / "out" / "items.jsonl"
    out = evaluate.run(_params(model_dir, image_root), bench, tmp_path / "metrics.json", [scores_file],
                       items_output=items_path)

    block = out["open_clip"]
    assert block["model"] == f"local-dir:{model_dir}"
    assert block["config"] == {
        "library": "open_clip",
        "name_or_path": f"local-dir:{model_dir}",
        "revision": None,
        "pretrained": None,
        "dtype": "float32",
        "preprocessing": {"size": [32, 32], "mode": "RGB", "mean": MEAN, "std": STD, "interpolation": "bicubic",
                          "resize_mode": "shortest", "fill_color": 0},
        "score": "cosine",
        "versions": {"open_clip": open_clip.__version__, "torch": torch.__version__},
    }
    assert out["scores_elsewhere"]["config"] == {
        "library": "scores file", "path": str(scores_file),
        "sha256": hashlib.sha256(scores_file.read_bytes()).hexdigest()}
    assert json.loads((tmp_path / "metrics.json").read_text()) == json.loads(json.dumps(out))

    rows = _read_items(items_path)
    keys = [(r["scorer"], r["instrument"], r["id"]) for r in rows]
    assert keys == sorted(keys)
    assert len(rows) == 2 * (len(records) + 2)  # every record of both instruments, for each scorer
    assert all(set(r) == {"scorer", "instrument", "id", "scores", "correct"} for r in rows)
    by_key = {(r["scorer"], r["instrument"], r["id"]): r for r in rows}
    no_image = by_key["open_clip", "mixed", "m1"]
    assert no_image["scores"] is None and no_image["correct"] is None
    choice = by_key["open_clip", "mixed", "m2"]
    assert len(choice["scores"]) == 3
    assert choice["correct"] == all(choice["scores"][1] > s for k, s in enumerate(choice["scores"]) if k != 1)
    assert out["open_clip"]["instruments"]["mixed"]["multiple_choice"] == {"n": 1, "accuracy": float(choice["correct"])}
    assert all(-1.0 <= s <= 1.0 for r in rows if r["scorer"] == "open_clip" and r["scores"] for s in r["scores"])
    assert by_key["scores_elsewhere", "relations", "0"] == {
        "scorer": "scores_elsewhere", "instrument": "relations", "id": "0", "scores": [0.9, 0.1], "correct": True}
    assert by_key["scores_elsewhere", "mixed", "m2"]["correct"] is False
    assert by_key["scores_elsewhere", "relations", "1"]["scores"] is None

    # the same score as computing it by hand: cosine of the normalised embeddings, the image as open_clip transforms it
    from PIL import Image

    model, _, preprocess = open_clip.create_model_and_transforms(f"local-dir:{model_dir}")
    tokenizer = open_clip.get_tokenizer(f"local-dir:{model_dir}")
    record = records["3"]
    with torch.no_grad():
        image = model.encode_image(preprocess(Image.open(image_root / record["image_file"])).unsqueeze(0))
        texts = model.encode_text(tokenizer([record["caption"], record["foil"]]))
        cosine = torch.nn.functional.normalize(texts, dim=-1) @ torch.nn.functional.normalize(image, dim=-1)[0]
    assert by_key["open_clip", "relations", "3"]["scores"] == pytest.approx(cosine.tolist(), abs=1e-5)

    parser = argparse.ArgumentParser()
    evaluate.add_arguments(parser)
    args = parser.parse_args(["--benchmark-dir", "b", "--output", "m.json", "--items-output", "items.jsonl"])
    assert args.items_output == "items.jsonl"


def test_open_clip_that_cannot_load_names_the_param(setup, tmp_path):
    model_dir, image_root, _, _, _ = setup

    def fails(block, *fragments):
        params = _params(model_dir, image_root)
        params["models"]["open_clip"] = {"device": "cpu", **block}
        with pytest.raises(ConfigError) as err:
            evaluate.build_scorers(params, [])
        for fragment in fragments:
            assert fragment in str(err.value), str(err.value)

    fails({"name_or_path": f"local-dir:{tmp_path / 'absent'}"},
          "could not load open_clip model", "for models.open_clip: FileNotFoundError",
          "Set models.open_clip.name_or_path and models.open_clip.pretrained to a model name and pretrained tag "
          "from open_clip.list_pretrained()", "hf-hub:org/repo", "local-dir:/path (a directory holding "
          "open_clip_config.json and the weights")
    fails({"name_or_path": "ViT-B-32", "pretrained": "no-such-tag"},
          "could not load open_clip model 'ViT-B-32' with pretrained 'no-such-tag' for models.open_clip: RuntimeError: "
          "Pretrained value 'no-such-tag' is not a known tag or valid file path",
          "(e.g. ViT-B-32 and openai; tags for ViT-B-32: openai, ")
    fails({"name_or_path": "ViT-Nope-1", "pretrained": "openai"},
          "RuntimeError: Model config for 'ViT-Nope-1' not found", "Set models.open_clip.name_or_path")
    # a load that would silently give random weights is refused too
    fails({"name_or_path": "ViT-B-32"}, "models.open_clip.pretrained is not set: open_clip would build ViT-B-32 "
                                        "with random weights", "for ViT-B-32 (openai, ")
    empty = tmp_path / "no-weights"
    empty.mkdir()
    (empty / "open_clip_config.json").write_text(json.dumps({"model_cfg": MODEL_CFG}))
    fails({"name_or_path": f"local-dir:{empty}"}, "holds no weights")
    fails({"name_or_path": f"local-dir:{model_dir}", "revision": "main"},
          "models.open_clip: open_clip takes no revision")

    # without images there is nothing to load: skipped, and says so
    params = _params(tmp_path / "absent", tmp_path / "no-images")
    scorers, skipped = evaluate.build_scorers(params, [])
    assert scorers == [] and "no image files under evaluate.image_root" in skipped["open_clip"]


def test_config_of_the_transformers_scorers(setup, tiny_models, tmp_path):
    import torch
    import transformers

    from tests.test_clip_scorer import build_tiny_clip

    _, image_root, bench, _, _ = setup
    clip_dir = build_tiny_clip(tmp_path / "tiny-clip")
    lm_dir = tiny_models.gpt2_lm()
    params = {"models": {"image_text": {"name_or_path": str(clip_dir), "device": "cpu"},
                         "text_baseline": {"name_or_path": str(lm_dir), "device": "cpu"}},
              "evaluate": {"scorers": ["image_text", "text_lm"], "image_root": str(image_root)}}
    out = evaluate.run(params, bench, tmp_path / "metrics.json", items_output=tmp_path / "items.jsonl")
    versions = {"transformers": transformers.__version__, "torch": torch.__version__}
    assert out["image_text"]["config"] == {
        "library": "transformers", "name_or_path": str(clip_dir), "revision": None, "dtype": "float32",
        "preprocessing": {"processor": "CLIPProcessor", "image_processor": "CLIPImageProcessor",
                          "size": {"shortest_edge": 32}, "crop_size": {"height": 32, "width": 32},
                          "image_mean": MEAN, "image_std": STD},
        "score": "logits_per_image", "versions": versions}
    assert out["text_lm"]["config"] == {"library": "transformers", "name_or_path": str(lm_dir), "revision": None,
                                        "dtype": "float32", "score": "-perplexity", "versions": versions}
    rows = _read_items(tmp_path / "items.jsonl")
    assert [r["scorer"] for r in rows] == ["image_text"] * (len(PAIRS) + 2) + ["text_lm"] * (len(PAIRS) + 2)
    # the text-only LM scores every record, the one without an image too
    assert all(r["scores"] is not None for r in rows if r["scorer"] == "text_lm")
