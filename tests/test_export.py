import json

import pytest

from foilforge.errors import InputError
from foilforge.filter import filter_funnel
from foilforge.io import file_sha256
from foilforge.pipeline import release as export


def _record(i, grammar_passed=True, nli_passed=True):
    return {
        "id": f"plurals:coco2017:{i}",
        "sample_id": f"coco2017:{i}",
        "instrument": "plurals",
        "linguistic_phenomena": "plurals",
        "caption": "A dog on exactly one field.",
        "foil": "A dog on some fields.",
        "classes": "field",
        "classes_foil": "fields",
        "dataset": "coco2017",
        "original_split": "val",
        "dataset_idx": i,
        "image_file": f"{i:012d}.jpg",
        "mturk": None,
        "grammaticality_scores": [0.91],
        "nli_scores": {"entail": [0.1], "neutral": [0.1], "contradict": [0.8], "pred": ["contradict"]},
        "provenance": {"foiler": "plurals.v1", "resolver": "rule_based.v1", "caption_span": [9, 26], "foil_span": [9, 20]},
        "filters": {
            "grammaticality": {"model": "bert-base-cased", "variant": "gruen.v1", "score": 0.91, "passed": grammar_passed},
            "nli": {"model": "ynie/albert", "variant": "nli.v1", "score": 0.8, "passed": nli_passed},
        },
    }


def _write_jsonl(path, records):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_valse_record_keeps_released_fields_and_nests_ours():
    out = export.to_valse_record(_record(5))
    assert set(out) == {"linguistic_phenomena", "caption", "foil", "classes", "classes_foil", "dataset", "original_split",
                        "dataset_idx", "image_file", "mturk", "grammaticality_scores", "nli_scores", "foilforge"}
    assert out["foilforge"]["sample_id"] == "coco2017:5"
    assert out["foilforge"]["filters"]["nli"]["passed"] is True
    assert "id" not in out["foilforge"]


def test_filter_funnel_counts_in_order():
    records = [_record(1), _record(2, grammar_passed=False), _record(3, nli_passed=False), _record(4)]
    assert filter_funnel(records) == {"input": 4, "after_grammaticality": 3, "after_nli": 2}


def test_filter_funnel_follows_the_run_order_not_the_key_order():
    record = _record(1)
    record["filters"] = {"nli": {"passed": False}, "grammaticality": {"passed": True}, "length": {"passed": True},
                         "custom": {"passed": True}}
    funnel = filter_funnel([record])
    assert list(funnel) == ["input", "after_length", "after_grammaticality", "after_nli", "after_custom"]
    assert funnel == {"input": 1, "after_length": 1, "after_grammaticality": 1, "after_nli": 0, "after_custom": 0}


def test_export_writes_benchmark_manifest_and_datacard(tmp_path):
    sources = tmp_path / "src"
    sources.mkdir()
    (sources / "captions.json").write_text("{}")
    params = {"seed": 0, "sources": {"coco": {"root": str(sources), "files": {"captions": "captions.json", "other": "gone.json"}}}}
    _write_jsonl(tmp_path / "rejected" / "plurals.jsonl", [_record(2, grammar_passed=False)])
    # the filtered file still holds one failed record: export must drop it
    _write_jsonl(tmp_path / "filtered" / "plurals.jsonl", [_record(4), _record(1), _record(3, nli_passed=False)])
    (tmp_path / "bias" / "plurals").mkdir(parents=True)
    (tmp_path / "bias" / "plurals" / "bias.json").write_text(json.dumps({"js": 0.5, "n_lexical_items": 2}))
    (tmp_path / "baseline").mkdir()
    (tmp_path / "baseline" / "plurals.json").write_text(json.dumps({"acc_r": 0.5, "model": "tiny-gpt2"}))
    out = tmp_path / "benchmark"
    manifest = export.export(params, tmp_path / "filtered", tmp_path / "bias", tmp_path / "baseline", out,
                             rejected_dir=tmp_path / "rejected")

    benchmark = json.loads((out / "plurals.json").read_text())
    assert list(benchmark) == ["plurals:coco2017:1", "plurals:coco2017:4"]
    entry = manifest["instruments"]["plurals"]
    assert entry["counts"] == {"input": 4, "after_grammaticality": 3, "after_nli": 2, "exported": 2}
    assert entry["filters"] == {"grammaticality": {"model": ["bert-base-cased"], "variant": ["gruen.v1"]},
                                "nli": {"model": ["ynie/albert"], "variant": ["nli.v1"]}}
    assert entry["provenance"] == {"foiler": ["plurals.v1"], "resolver": ["rule_based.v1"]}
    assert entry["filters_not_run"] == ["length", "plausibility"]  # registered, not on these records
    assert entry["sha256"] == file_sha256(out / "plurals.json")
    assert manifest["sources"]["coco"]["captions"]["sha256"] == file_sha256(sources / "captions.json")
    assert manifest["sources"]["coco"]["other"]["sha256"] is None
    assert json.loads((out / "manifest.json").read_text())["params"] == params
    card = (out / "DATACARD.md").read_text()
    assert "| plurals | 2 | input 4 -> after_grammaticality 3 -> after_nli 2 -> exported 2 | 2 | 0.500 | 50.0% |" in card
    assert "filter nli: model ynie/albert, variant nli.v1" in card
    assert "text-only baseline: tiny-gpt2" in card
    assert "filters not run: length" in card


def test_export_is_deterministic(tmp_path):
    _write_jsonl(tmp_path / "filtered" / "plurals.jsonl", [_record(2), _record(1)])
    export.export({}, tmp_path / "filtered", None, None, tmp_path / "a")
    _write_jsonl(tmp_path / "filtered" / "plurals.jsonl", [_record(1), _record(2)])
    export.export({}, tmp_path / "filtered", None, None, tmp_path / "b")
    for name in ("plurals.json", "manifest.json", "DATACARD.md"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_export_errors_name_file_and_record(tmp_path):
    with pytest.raises(InputError, match="no filtered records"):
        export.export({}, tmp_path, None, None, tmp_path / "out")
    bad = _record(1)
    del bad["id"]
    _write_jsonl(tmp_path / "filtered" / "plurals.jsonl", [bad])
    with pytest.raises(InputError) as err:
        export.export({}, tmp_path / "filtered", None, None, tmp_path / "out")
    assert str(err.value) == f"{tmp_path / 'filtered' / 'plurals.jsonl'}, record line 1, field 'id': missing field"


def test_a_filter_scored_but_not_applied_is_no_funnel_step():
    records = [_record(1), _record(2, nli_passed=False)]
    for record in records:
        record["filters"]["grammaticality"].pop("passed")  # null keep rule: scored, recorded, not applied
    assert filter_funnel(records) == {"input": 2, "after_nli": 1}
