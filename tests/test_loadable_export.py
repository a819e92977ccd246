"""The exported benchmark loads with `datasets.load_dataset` (the rows/ files and the dataset card)."""

import json

import datasets
import yaml

from foilforge.pipeline import loadable
from foilforge.pipeline import release as export
from foilforge.records import is_valid


def _record(instrument, i, classes, classes_foil, dataset_idx):
    return {"id": f"{instrument}:{i}", "sample_id": f"src:{i}", "instrument": instrument,
            "linguistic_phenomena": instrument, "caption": f"caption {i}", "foil": f"foil {i}",
            "classes": classes, "classes_foil": classes_foil, "dataset": "coco2017", "original_split": "val",
            "dataset_idx": dataset_idx, "image_file": f"{i:012d}.jpg", "mturk": None,
            "provenance": {"foiler": "counting.v1"}, "filters": {"length": {"score": 5, "passed": True}}}


def _export(tmp_path, records_by_instrument, params=None):
    filtered = tmp_path / "filtered"
    filtered.mkdir()
    for instrument, records in records_by_instrument.items():
        (filtered / f"{instrument}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "benchmark"
    export.export(params or {"sources": {}, "instruments": {}}, filtered, None, None, out)
    return out


def _load(path, *args, cache):
    return datasets.load_dataset(str(path), *args, cache_dir=str(cache))


def test_mixed_type_fields_load_per_config_and_all(tmp_path, monkeypatch):
    monkeypatch.setattr(export, "write_native_files", lambda *a, **k: [])
    records = {
        # classes: an int, a string and a list within one instrument (VALSE's counting/plurals/relations shapes)
        "counting": [_record("counting", 1, 3, 5, 17), _record("counting", 2, "three", "five", "v7w_17"),
                     _record("counting", 3, ["a", "b"], None, None)],
        "relations": [{**_record("relations", 4, "on", "under", 99), "mturk": {"caption": 4, "foil": 1, "other": 0}}],
        "empty": [],
    }
    out = _export(tmp_path, records)
    card = (out / "README.md").read_text()
    header = yaml.safe_load(card.split("---")[1])
    configs = {c["config_name"]: c for c in header["configs"]}
    assert set(configs) == {"all", "counting", "relations"}  # an instrument with no record has no config
    assert configs["all"]["default"] is True
    assert configs["relations"]["data_files"] == [{"split": "test", "path": "rows/relations.jsonl"}]
    assert header["task_categories"] and header["license"] == "other"

    counting = _load(out, "counting", cache=tmp_path / "cache")["test"]
    assert sorted(counting.column_names) == sorted(loadable.COLUMNS)
    by_id = {row["id"]: row for row in counting}
    # classes: a list of strings whatever the record held (a number as its JSON text), null where absent
    assert [by_id[f"counting:{i}"]["classes"] for i in (1, 2, 3)] == [["3"], ["three"], ["a", "b"]]
    assert [by_id[f"counting:{i}"]["classes_foil"] for i in (1, 2, 3)] == [["5"], ["five"], None]
    assert by_id["counting:1"]["mturk"] is None
    assert [by_id[f"counting:{i}"]["dataset_idx"] for i in (1, 2, 3)] == ["17", "v7w_17", None]
    assert json.loads(by_id["counting:1"]["extras"])["foilforge"]["provenance"] == {"foiler": "counting.v1"}

    typed = {"classes", "classes_foil", "mturk"}
    assert all(counting.features[c] == datasets.Value("string") for c in loadable.COLUMNS if c not in typed)
    assert counting.features["classes"] == counting.features["classes_foil"] == datasets.List(datasets.Value("string"))
    assert counting.features["mturk"] == {v: datasets.Value("int64") for v in ("caption", "foil", "other")}
    everything = _load(out, cache=tmp_path / "cache")["test"]
    assert everything.num_rows == 4
    assert sorted(set(everything["instrument"])) == ["counting", "relations"]
    assert [row["mturk"] for row in everything if row["instrument"] == "relations"] == [{"caption": 4, "foil": 1, "other": 0}]
    # the VALSE-format file is still written, with the original types
    assert json.loads((out / "counting.json").read_text())["counting:1"]["classes"] == 3


def test_every_released_valse_instrument_loads(tmp_path, monkeypatch, shared):
    """The released VALSE files (every phenomenon's field shapes) go through export and load, one config each."""
    monkeypatch.setattr(export, "write_native_files", lambda *a, **k: [])
    valse = shared("data", "valse-dev")
    records = {}
    for path in sorted(valse.glob("*.json")):
        name = path.stem.replace("-", "_")
        released = json.loads(path.read_text())
        records[name] = [{**rec, "id": f"{name}:{key}"} for key, rec in released.items()]
    out = _export(tmp_path, records)
    # the released records carry VALSE's votes: export keeps the valid ones (validation.export: valid)
    expected = {name: sum(bool(is_valid(r)) for r in recs) for name, recs in records.items()}
    assert expected["actant_swap"] == 235 and expected["relations"] < 156
    for name, recs in records.items():
        ds = _load(out, name, cache=tmp_path / "cache")["test"]
        assert ds.num_rows == expected[name], name
        assert sorted(ds.column_names) == sorted(loadable.COLUMNS), name
    assert _load(out, cache=tmp_path / "cache")["test"].num_rows == sum(expected.values())


def test_votes_of_another_shape_are_refused_with_the_record_named(tmp_path, monkeypatch):
    import pytest

    from foilforge.errors import InputError

    monkeypatch.setattr(export, "write_native_files", lambda *a, **k: [])
    record = {**_record("counting", 1, 3, 5, 17), "mturk": {"caption": 4, "foil": "one"}}
    with pytest.raises(InputError) as error:
        _export(tmp_path, {"counting": [record]})
    assert str(error.value).startswith("counting.json")
    assert "counting:1" in str(error.value) and "mturk" in str(error.value)
    assert 'got {"caption": 4, "foil": "one"}' in str(error.value)
