"""benchmarks/profile_breakdown.py sums py-spy's raw samples by stage and kind of work, as its docstring says."""

import json

import pytest

from benchmarks import profile_breakdown

# py-spy `--format raw` lines, shaped as a foilforge repro worker's stacks are (paths as py-spy prints them)
WORKER = 'process 41:"";<module> (foilforge:6);main (pipeline/stages/cli.py:73);_main (pipeline/stages/cli.py:89)'
RAW = [
    f"{WORKER};main (pipeline/stages/foil.py:23);_score (foilforge/span_ranking.py:300);"
    "LlamaForCausalLM.forward (transformers/models/llama/modeling_llama.py:470);forward (torch/nn/modules/linear.py:125) 40\n",
    f"{WORKER};main (pipeline/stages/foil.py:23);parse (foilers/plurals.py:165);__call__ (spacy/language.py:1020) 6\n",
    f"{WORKER};main (pipeline/stages/baseline.py:25);liblinear_fit (filters/attackers/base.py:90) 10\n",
    f"{WORKER};main (pipeline/stages/select.py:27);solve (foilforge/refinement.py:80);milp (scipy/optimize/_milp.py:370) 4\n",
    f"{WORKER};main (pipeline/stages/select.py:27);write (foilforge/io.py:50) 2\n",
    'process 40:"";<module> (foilforge:6);wait (threading.py:320) 8\n',
    "\n",
]


def test_samples_are_summed_by_stage_and_by_the_first_kind_that_matches():
    result = profile_breakdown.breakdown(RAW, rate=2)
    assert result["total_s"] == 35.0
    assert result["by_stage"] == {
        "foil": {"all": 23.0, "smollm2_forward": 20.0, "spacy": 3.0},
        "baseline": {"all": 5.0, "attackers": 5.0},
        "select": {"all": 3.0, "highs": 2.0, "rest": 1.0},
        "other": {"all": 4.0, "rest": 4.0},
    }
    assert result["by_kind"] == {"smollm2_forward": 20.0, "attackers": 5.0, "rest": 5.0, "spacy": 3.0, "highs": 2.0}
    table = profile_breakdown.table(result)
    assert "| foil | 23 | 20 | - | 3 | - | - |" in table
    assert table.splitlines()[0] == "| stage | all (s) | smollm2_forward | highs | spacy | attackers | rest |"


def test_the_command_writes_the_breakdown_and_names_a_bad_line(tmp_path, capsys):
    raw = tmp_path / "build.raw"
    raw.write_text("".join(RAW))
    out = tmp_path / "profile.json"
    assert profile_breakdown.main([str(raw), "--rate", "2", "--output", str(out)]) == 0
    written = json.loads(out.read_text())
    assert written["rate"] == 2 and written["by_stage"]["baseline"] == {"all": 5.0, "attackers": 5.0}
    assert not list(tmp_path.glob("*.tmp"))

    raw.write_text(RAW[0] + "a stack without its count\n")
    assert profile_breakdown.main([str(raw), "--rate", "2"]) == 2
    assert "build.raw: line 2: expected 'frame;...;frame COUNT'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="rate must be positive"):
        profile_breakdown.breakdown(RAW, rate=0)
