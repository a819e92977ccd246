"""The export's harness formats load through the harnesses' own code (CLIP_benchmark, MTEB, lmms-eval), and
VLMEvalKit's TSV, which cannot be installed from PyPI, follows its documented multiple-choice layout."""

import json
import os
import shutil
from pathlib import Path

import datasets
import pytest
from PIL import Image

from foilforge.pipeline import loadable
from foilforge.pipeline import release as export
from foilforge.pipeline.emitters import EMITTERS

ROOT = Path(__file__).resolve().parents[1]
VALSE_DEV = ROOT.parent / "shared" / "data" / "valse-dev"
FORMATS = ["sugarcrepe", "lmms_eval", "vlmevalkit", "parquet"]


def _record(instrument, i, caption, foil, image_file):
    return {"id": f"{instrument}:{i}", "sample_id": f"src:{i}", "instrument": instrument,
            "linguistic_phenomena": instrument, "caption": caption, "foil": foil, "classes": None,
            "classes_foil": None, "dataset": "coco2017", "original_split": "val", "dataset_idx": i,
            "image_file": image_file, "mturk": None, "provenance": {"foiler": "relations.v1"},
            "filters": {"length": {"score": 5, "passed": True}}}


def _choice_record(i):
    record = _record("choices", i, "a man rides a horse", "a man feeds a horse", None)
    record.update(candidates=["a man rides a horse", "a man feeds a horse", "a man sells a horse"], label=0)
    return record


PAIRS = [("A dog on the sofa.", "A dog under the sofa."), ("Two cats sleep.", "Three cats sleep."),
         ("A man rides a horse.", "A horse rides a man."), ("A red bus.", "A blue bus."),
         ("A child behind a table.", "A child on a table."), ("A woman holds an umbrella.", "A woman holds a kite.")]


@pytest.fixture
def built(tmp_path, monkeypatch):
    """An export of two pair instruments (images on disk) and a multiple-choice one, with every format on."""
    monkeypatch.setattr(export, "write_native_files", lambda *a, **k: [])
    images = tmp_path / "images"
    images.mkdir()
    for k in range(len(PAIRS)):
        Image.new("RGB", (24 + k, 20), (40 * k, 255 - 30 * k, 7 * k)).save(images / f"{k:012d}.jpg")
    filtered = tmp_path / "filtered"
    filtered.mkdir()
    records = {"relations": [_record("relations", k, c, f, f"{k:012d}.jpg") for k, (c, f) in enumerate(PAIRS)],
               "counting": [_record("counting", k, c, f, f"{k:012d}.jpg") for k, (c, f) in enumerate(PAIRS[:3])],
               "choices": [_choice_record(k) for k in range(2)]}
    for instrument, rows in records.items():
        (filtered / f"{instrument}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "benchmark"
    params = {"sources": {}, "instruments": {}, "export": {"formats": FORMATS, "image_root": str(images)}}
    manifest = export.export(params, filtered, None, None, out)
    return {"out": out, "images": images, "records": records, "manifest": manifest, "params": params}


def test_sugarcrepe_json_loads_through_clip_benchmark(built):
    from clip_benchmark.datasets.sugar_crepe import SugarCrepe

    out, images = built["out"], built["images"]
    path = out / "sugarcrepe" / "relations.json"
    annotations = json.loads(path.read_text())
    assert list(annotations) == [str(k) for k in range(len(PAIRS))]   # keys "0".."n-1", in that order
    dataset = SugarCrepe(root=str(images), ann_file=str(path))
    assert len(dataset) == len(PAIRS)
    by_id = {r["id"]: r for r in built["records"]["relations"]}
    for k in range(len(dataset)):
        image, texts = dataset[k]
        record = by_id[annotations[str(k)]["id"]]
        assert texts == [record["caption"], record["foil"]]
        assert image.size == Image.open(images / record["image_file"]).size
    # the multiple-choice instrument has no SugarCrepe file, and the manifest says why
    assert not (out / "sugarcrepe" / "choices.json").exists()
    entry = built["manifest"]["instruments"]["choices"]["formats"]["sugarcrepe"]
    assert entry == {"files": [], "records": 0, "left_out": {"multiple-choice item (no single foil)": 2}}
    card = (out / "DATACARD.md").read_text()
    assert "| choices | sugarcrepe | 0 | none | 2 multiple-choice item (no single foil) |" in card
    assert "| relations | sugarcrepe | 6 | sugarcrepe/relations.json | none |" in card


def test_mteb_columns_load_through_mtebs_sugarcrepe_task(built, tmp_path):
    from mteb.tasks.image_text_pair_classification.eng.sugar_crepe import SugarCrepe

    ds = datasets.load_dataset(str(built["out"]), "relations", cache_dir=str(tmp_path / "cache"))["test"]
    ds = ds.cast_column("images", datasets.Image())
    task = SugarCrepe()
    assert set(task._get_content_columns()) <= set(ds.column_names)   # images, caption, negative_caption
    task.dataset = datasets.DatasetDict({"test": ds})
    task.data_loaded = True
    stats = task._calculate_descriptive_statistics_from_split("test")
    assert stats["num_samples"] == len(PAIRS)
    assert stats["image_statistics"]["min_image_width"] == 24
    assert stats["image_statistics"]["max_image_width"] == 24 + len(PAIRS) - 1
    row = next(r for r in ds if r["id"] == "relations:2")
    assert (row["caption"], row["negative_caption"]) == PAIRS[2]
    assert row["images"].size == (26, 20)


def test_lmms_eval_task_loads_and_scores_the_two_option_question(built, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    from lmms_eval.tasks import TaskManager, get_task_dict

    manager = TaskManager(include_path=str(built["out"] / "lmms_eval"), include_defaults=False)
    assert "foilforge_relations" in manager.all_tasks and "foilforge_choices" not in manager.all_tasks
    task = get_task_dict(["foilforge_relations"], manager)["foilforge_relations"]
    docs = list(task.test_docs())
    assert len(docs) == len(PAIRS)
    doc = next(d for d in docs if d["id"] == "relations:0")
    caption, foil = PAIRS[0]
    letter = task.doc_to_target(doc)
    assert {doc["option_a"], doc["option_b"]} == {caption, foil} and doc[f"option_{letter.lower()}"] == caption
    text = task.doc_to_text(doc)
    assert f"A. {doc['option_a']}\nB. {doc['option_b']}" in text
    wrong = "B" if letter == "A" else "A"
    assert task.process_results(doc, [f"({letter})"]) == {"accuracy": 1.0}
    assert task.process_results(doc, [f"{wrong}. {foil}"]) == {"accuracy": 0.0}
    (image,) = task.doc_to_visual(doc)
    assert image.mode == "RGB" and image.size == (24, 20)
    # the caption is option A for some records and B for others: a model that always answers A is at chance
    assert {d["correct_option"] for d in docs} == {"A", "B"}


def test_vlmevalkit_tsv_follows_the_documented_mcq_layout(built):
    # VLMEvalKit is not on PyPI: the columns of its custom multiple-choice TSV (index, image_path when no
    # base64 image, question, options A/B, answer letter, category), read the way it reads them (tab-separated)
    import pandas as pd

    table = pd.read_csv(built["out"] / "vlmevalkit" / "foilforge_relations.tsv", sep="\t")
    assert list(table.columns) == ["index", "id", "image_path", "question", "A", "B", "answer", "category"]
    assert table["index"].tolist() == list(range(len(PAIRS)))
    by_id = {r["id"]: r for r in built["records"]["relations"]}
    for row in table.to_dict("records"):
        record = by_id[row["id"]]
        assert row[row["answer"]] == record["caption"] and {row["A"], row["B"]} == {record["caption"], record["foil"]}
        assert Path(row["image_path"]) == built["images"] / record["image_file"]
        assert Path(row["image_path"]).is_file()


def test_parquet_holds_the_canonical_rows(built):
    import pyarrow.parquet as pq

    out = built["out"]
    for instrument in ("relations", "choices"):
        table = pq.read_table(out / "parquet" / f"{instrument}.parquet")
        rows = [json.loads(line) for line in (out / loadable.rows_path(instrument)).read_text().splitlines()]
        assert table.column_names == list(loadable.COLUMNS)
        assert table.to_pylist() == rows


def test_export_format_writes_one_format_again(built):
    from foilforge.pipeline.stages.cli import main

    out = built["out"]
    before = (out / "sugarcrepe" / "relations.json").read_bytes()
    tsv = out / "vlmevalkit" / "foilforge_relations.tsv"
    tsv_stamp = tsv.stat().st_mtime_ns
    shutil.rmtree(out / "sugarcrepe")
    params_file = out.parent / "params.yaml"
    params_file.write_text(json.dumps(built["params"]))
    cwd = os.getcwd()
    try:
        assert main(["export", "--params", str(params_file), "--format", "sugarcrepe", "--output-dir", str(out)]) == 0
    finally:
        os.chdir(cwd)
    assert (out / "sugarcrepe" / "relations.json").read_bytes() == before
    assert tsv.stat().st_mtime_ns == tsv_stamp   # the other formats are not written again
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["instruments"]["relations"]["formats"]["sugarcrepe"]["records"] == len(PAIRS)


def test_export_format_refuses_an_unknown_format(built, capsys):
    from foilforge.pipeline.stages.cli import main

    params_file = built["out"].parent / "params.yaml"
    params_file.write_text(json.dumps(built["params"]))
    assert main(["export", "--params", str(params_file), "--format", "sugarcrep", "--output-dir", str(built["out"])]) != 0
    err = capsys.readouterr().err
    assert "--format: unknown format(s) sugarcrep; known: lmms_eval, parquet, sugarcrepe, vlmevalkit" in err


def test_the_params_formats_are_the_registered_ones():
    from foilforge.schema import EXPORT_FORMATS

    assert sorted(EXPORT_FORMATS) == sorted(EMITTERS.unversioned())


@pytest.mark.skipif(not VALSE_DEV.is_dir(), reason="../shared/data/valse-dev (VALSE's released files) is absent")
def test_valse_released_files_convert_to_sugarcrepe(tmp_path):
    """VALSE's own released files, written again as SugarCrepe JSON, load through CLIP_benchmark's class."""
    from clip_benchmark.datasets.sugar_crepe import SugarCrepe

    for path in sorted(VALSE_DEV.glob("*.json")):
        shutil.copy(path, tmp_path / path.name)
    written = export.emit_again({"export": {"image_root": "images"}}, tmp_path, ["sugarcrepe"])
    assert written
    for instrument, formats in written.items():
        released = json.loads((tmp_path / f"{instrument}.json").read_text())
        expected = {k for k, r in released.items() if isinstance(r.get("caption"), str)
                    and isinstance(r.get("foil"), str) and r.get("image_file") and "candidates" not in r}
        entry = formats["sugarcrepe"]
        assert entry["records"] == len(expected), instrument
        if not expected:
            continue
        dataset = SugarCrepe(root="images", ann_file=str(tmp_path / entry["files"][0]))
        assert len(dataset) == len(expected)
        assert {a["id"] for a in dataset.ann.values()} == expected
        assert all([a["caption"], a["negative_caption"]] == [released[a["id"]]["caption"], released[a["id"]]["foil"]]
                   for a in dataset.ann.values())
