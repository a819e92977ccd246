"""docs/params.md is what `foilforge params-doc` writes from the schema now, and it covers every key."""

from __future__ import annotations

from pathlib import Path

from foilforge.params_doc import render, type_text
from foilforge.pipeline.stages import cli
from foilforge.schema import Params

ROOT = Path(__file__).resolve().parents[1]


def test_the_committed_reference_is_what_the_command_writes(tmp_path):
    out = tmp_path / "params.md"
    assert cli.main(["params-doc", "--output", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == render()
    assert (ROOT / "docs" / "params.md").read_text(encoding="utf-8") == render(), \
        "docs/params.md is stale: run `foilforge params-doc`"


def test_every_block_and_key_is_documented_with_a_description():
    text = render()
    for name, field in Params.model_fields.items():
        assert f"## `{name}`" in text and field.description, name
    assert "### `instruments.<name>.bias`" in text and "#### `engine.ray`" not in text and "### `engine.ray`" in text
    assert ("| `max_js_rise` | `float >= 0, <= 1 \\| null` | `0.0` | how far the JS of the changed items may rise "
            "above the unrefined set's; null: no bound |") in text
    assert "| `foiler` | `str` | required | foil: a registered foiler (foilers/) |" in text


def test_types_read_as_a_user_writes_them():
    fields = Params.model_fields
    assert type_text(fields["seed"].annotation, fields["seed"].metadata) == "int >= 0"
    assert type_text(fields["gate"].annotation) == "mapping | null"
    from foilforge.schema import BiasBlock, GateBlock

    assert type_text(BiasBlock.model_fields["on_exceed"].annotation) == "'fail' | 'warn'"
    field = GateBlock.model_fields["max_accuracy"]
    assert type_text(field.annotation, field.metadata) == "float > 0, <= 1"
