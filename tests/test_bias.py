import json
import math
from collections import Counter

import pytest

from foilforge.errors import InputError
from foilforge.pipeline import bias
from foilforge.records import changed_items, frequencies
from tests.conftest import shared_path


def test_js_divergence_hand_computed():
    # c = (1/2, 1/2, 0), f = (0, 1/2, 1/2), m = (1/4, 1/2, 1/4)
    # KL(c||m) = 1/2 log2(2) + 1/2 log2(1) = 0.5 ; KL(f||m) = 0.5 -> JS = sqrt(0.5)
    c = Counter({"a": 1, "b": 1})
    f = Counter({"b": 3, "c": 3})
    assert bias.js_divergence(c, f) == pytest.approx(math.sqrt(0.5))
    # natural log: KL = 0.5 ln 2 each
    assert bias.js_divergence(c, f, log_base=math.e) == pytest.approx(math.sqrt(0.5 * math.log(2)))


def test_js_divergence_extremes():
    assert bias.js_divergence(Counter(a=2), Counter(b=5)) == pytest.approx(1.0)
    assert bias.js_divergence(Counter(a=2, b=1), Counter(a=4, b=2)) == 0.0
    assert bias.js_divergence(Counter(), Counter(a=1)) is None


def test_changed_items_flattens_lists_and_unifies_numbers():
    record = {"classes": 0, "classes_foil": [1, "2", 3]}
    assert changed_items(record, "direct") == (["0"], ["1", "2", "3"])
    assert changed_items({"classes": 4, "classes_foil": []}, "direct") == (["4"], [])


def test_swap_mode_counts_both_fillers_on_both_sides():
    records = [("r1", {"classes": "man", "classes_foil": "torso"}), ("r2", {"classes": "dog", "classes_foil": "ball"})]
    c, f = frequencies(records, "swap")
    assert c == f == Counter(man=1, torso=1, dog=1, ball=1)
    assert bias.js_divergence(c, f) == 0.0
    c, f = frequencies(records, "direct")
    assert bias.js_divergence(c, f) == pytest.approx(1.0)


def test_bad_class_value_names_file_record_and_field():
    with pytest.raises(InputError) as err:
        changed_items({"classes": "a", "classes_foil": None}, "direct", "f.jsonl", "plurals:7")
    assert str(err.value) == "f.jsonl, record plurals:7, field 'classes_foil': expected a word, number or list of them, got null"
    with pytest.raises(InputError, match=r"record x, field 'classes': missing field"):
        changed_items({"classes_foil": "b"}, "direct", "f.jsonl", "x")


def _records(pairs, votes=None):
    out = []
    for i, (c, f) in enumerate(pairs):
        record = {"id": f"inst:{i}", "classes": c, "classes_foil": f, "caption": "x", "foil": "y"}
        if votes is not None:
            record["mturk"] = {"caption": votes[i], "foil": 3 - votes[i], "other": 0}
        out.append((record["id"], record))
    return out


def test_report_counts_balance_and_valid_subset():
    records = _records([("on", "under"), ("under", "on"), ("on", "near"), ("on", "under")], votes=[3, 2, 1, 0])
    settings = bias.instrument_settings({}, "relations").bias
    report, _, _ = bias.bias_report(records, "relations", settings)
    assert report["n_records"] == 4
    assert report["n_lexical_items"] == 3
    assert report["class_balance"]["caption_majority"] == {"item": "on", "share": 0.75}
    assert report["class_balance"]["foil_majority"] == {"item": "under", "share": 0.5}
    assert report["n_valid"] == 2
    # valid subset: on->under, under->on: identical distributions
    assert report["js_valid"] == 0.0
    assert report["status"] == "ok" and report["violations"] == []


def test_no_votes_means_no_valid_subset():
    report, _, _ = bias.bias_report(_records([("a", "b")]), "x", bias.instrument_settings({}, "x").bias)
    assert report["n_valid"] is None and report["js_valid"] is None


def test_thresholds_fail_or_warn():
    records = _records([("a", "b"), ("a", "c")])
    params = {"bias": {"defaults": {"js_max": 0.5}},
              "instruments": {"x": {"bias": {"max_majority_share": 0.9, "min_lexical_items": 5}}}}
    report, _, _ = bias.bias_report(records, "x", bias.instrument_settings(params, "x").bias)
    assert report["violations"] == ["js 1.000 > 0.5", "caption_majority share 1.000 > 0.9", "n_lexical_items 3 < 5"]
    assert report["status"] == "fail"
    params["bias"]["on_exceed"] = "warn"
    report, _, _ = bias.bias_report(records, "x", bias.instrument_settings(params, "x").bias)
    assert report["status"] == "warn"


def test_an_instrument_overrides_the_defaults_and_items_default_to_direct():
    params = {"bias": {"defaults": {"js_max": 0.5, "items": "swap"}}, "instruments": {"x": {"bias": {"js_max": 0.9}}}}
    assert bias.instrument_settings(params, "x").bias.js_max == 0.9
    assert bias.instrument_settings(params, "x").bias.items == "swap"
    assert bias.instrument_settings({}, "x").bias.items == "direct"


def test_settings_reject_unknown_keys_and_values():
    from foilforge.schema import problems

    instrument = {"foiler": "existence.v1", "source": "s"}
    assert problems({"instruments": {"x": {**instrument, "bias": {"js_maxx": 1}}}}) == [
        "params.yaml instruments.x.bias.js_maxx: unknown key; allowed: items, js_max, js_valid_max, max_majority_share, "
        "min_lexical_items"]
    assert problems({"bias": {"on_exceed": "maybe"}}) == ["params.yaml bias.on_exceed: expected 'fail' or 'warn', got 'maybe'"]
    assert problems({"bias": {"defaults": {"items": "pairs"}}}) == [
        "params.yaml bias.defaults.items: expected 'direct' or 'swap', got 'pairs'"]
    assert problems({"bias": {"instruments": {}}}) == [
        "params.yaml bias.instruments: unknown key; allowed: defaults, log_base, on_exceed, plot_top_k"]


def test_cli_writes_report_plot_data_and_fails_on_threshold(tmp_path):
    from foilforge.pipeline.stages.cli import main

    records = tmp_path / "relations.jsonl"
    records.write_text("\n".join(json.dumps(r) for _, r in _records([("on", "under"), ("under", "on"), ("on", "in")])) + "\n")
    params = tmp_path / "params.yaml"
    instrument = "instruments:\n  relations: {foiler: relations.v1, source: coco, bias: {js_max: %s}}\n"
    params.write_text("bias:\n  on_exceed: fail\n" + instrument % 0.9)
    out = tmp_path / "bias" / "relations"
    assert main(["bias", "relations", "--params", str(params), "--input", str(records), "--output-dir", str(out)]) == 0
    report = json.loads((out / "bias.json").read_text())
    # c = on 2/3, under 1/3; f = under 1/3, on 1/3, in 1/3
    c, f = Counter(on=2, under=1), Counter(under=1, on=1, **{"in": 1})
    assert report["js"] == pytest.approx(bias.js_divergence(c, f))
    assert (out / "frequencies.csv").read_text().splitlines() == [
        "item,side,frequency", "on,caption,0.666667", "on,foil,0.333333", "under,caption,0.333333",
        "under,foil,0.333333", "in,caption,0.000000", "in,foil,0.333333"]
    assert (out / "frequencies.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    params.write_text(instrument % 0.1)
    assert main(["bias", "relations", "--params", str(params), "--input", str(records), "--output-dir", str(out)]) == 1
    assert json.loads((out / "bias.json").read_text())["status"] == "fail"


# Table 5 (VALSE), "JS" column, all instances of the full release (docs/reference.md §4).
TABLE5_JS = {
    "existence": ("existence", 0.628),
    "plurals": ("plurality", 0.742),
    "counting-hard": ("counting", 0.070),
    "counting-small-quant": ("counting", 0.070),
    "counting-adversarial": ("counting", 0.070),
    "relations": ("relations", 0.083),
    "action-replacement": ("action replacement", 0.437),
    "actant-swap": ("actant swap", 0.000),
    "coreference-standard": ("coreference standard", 0.053),
    "coreference-hard": ("coreference clean", 0.126),
    "foil-it": ("Foil-it", 0.426),
}


def test_js_divergence_on_released_valse_dev_files(capsys):
    rows = []
    for name, (table_name, table_js) in TABLE5_JS.items():
        path = shared_path("data", "valse-dev", f"{name}.json")
        records = bias.read_records(path)
        settings = bias.instrument_settings({"instruments": {"actant-swap": {"bias": {"items": "swap"}}}}, name).bias
        report, _, _ = bias.bias_report(records, name, settings, path=path)
        rows.append((name, report["n_records"], report["n_lexical_items"], report["js"], report["js_valid"], table_name, table_js))
        assert 0.0 <= report["js"] <= 1.0
    with capsys.disabled():
        print("\nJS divergence on valse-dev (a quarter of the release) vs VALSE Table 5 (full release), log base 2")
        print(f"{'file':22s} {'n':>4s} {'#lex':>5s} {'JS':>6s} {'JS val':>6s}   Table 5")
        for name, n, lex, js, js_valid, table_name, table_js in rows:
            print(f"{name:22s} {n:4d} {lex:5d} {js:6.3f} {js_valid:6.3f}   {table_name} {table_js:.3f}")
    by_name = {r[0]: r for r in rows}
    # actant swap: both fillers on both sides -> exactly Table 5's 0.000
    assert by_name["actant-swap"][3] == 0.0
    # coreference: the changed items are yes/no only (Table 5: 2 lexical items)
    assert by_name["coreference-standard"][2] == by_name["coreference-hard"][2] == 2
    # existence flattens the candidate lists: within 0.03 of the full release's 0.628
    assert by_name["existence"][3] == pytest.approx(0.648, abs=0.001)
    assert abs(by_name["existence"][3] - 0.628) < 0.03
    # counting-adversarial: captions >= 4, foils in 0..3 -> disjoint vocabularies
    assert by_name["counting-adversarial"][3] == pytest.approx(1.0)
