"""`dvc plots show` draws caption and foil side by side, and the filter funnel per instrument."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from foilforge.pipeline import selection as select

ROOT = Path(__file__).resolve().parents[1]


def test_funnel_csv_keeps_the_run_order(tmp_path):
    path = tmp_path / "relations.funnel.csv"
    select.write_funnel_csv(path, {"input": 12, "after_length": 12, "after_grammaticality": 7, "after_nli": 3})
    assert path.read_text().splitlines() == ["step,records", "0 input,12", "1 length,12", "2 grammaticality,7", "3 nli,3"]


def test_dvc_plots_show_renders_both_sides_and_the_funnel(tmp_path):
    dvc = shutil.which("dvc", path=str(Path(sys.executable).parent)) or shutil.which("dvc")
    if dvc is None:
        pytest.fail("dvc is not installed: run make setup")
    for name in ("dvc.yaml", "params.yaml"):
        shutil.copy(ROOT / name, tmp_path / name)
    subprocess.run([dvc, "init", "--no-scm", "-q"], cwd=tmp_path, check=True)
    shutil.copytree(ROOT / ".dvc" / "plots", tmp_path / ".dvc" / "plots")
    (tmp_path / "data/bias/relations").mkdir(parents=True)
    (tmp_path / "data/metrics/select").mkdir(parents=True)
    (tmp_path / "data/bias/relations/frequencies.csv").write_text("item,side,frequency\non,caption,0.6\non,foil,0.3\n")
    select.write_funnel_csv(tmp_path / "data/metrics/select/relations.funnel.csv", {"input": 5, "after_length": 4})
    out = subprocess.run([dvc, "plots", "show", "--json", "data/bias/relations/frequencies.csv",
                          "data/metrics/select/relations.funnel.csv"], cwd=tmp_path, capture_output=True, text=True,
                         check=True).stdout
    plots = {name: next(p["content"] for p in entries if p.get("type") == "vega")
             for name, entries in json.loads(out)["data"].items()}
    bias = plots["data/bias/relations/frequencies.csv"]
    assert bias["encoding"]["x"]["field"] == "frequency" and bias["encoding"]["y"]["field"] == "item"
    assert bias["encoding"]["yOffset"]["field"] == "side" and bias["encoding"]["color"]["field"] == "side"
    assert [(r["side"], r["frequency"]) for r in bias["data"]["values"]] == [("caption", "0.6"), ("foil", "0.3")]
    funnel = plots["data/metrics/select/relations.funnel.csv"]
    assert (funnel["encoding"]["x"]["field"], funnel["encoding"]["y"]["field"]) == ("records", "step")
    assert [(r["step"], r["records"]) for r in funnel["data"]["values"]] == [("0 input", "5"), ("1 length", "4")]
