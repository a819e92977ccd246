"""pydantic's validation errors as the lines foilforge prints, one a problem: `<prefix><path>: <what>, got <value>`.

The schema (foilforge/schema.py) renders params.yaml's problems with it, the models layer (foilforge/models.py) a
model block's; neither imports the other for it.
"""

from __future__ import annotations

import types
import typing
from typing import Annotated, Any, Union

from pydantic import BaseModel, ValidationError


def error_lines(err: ValidationError, prefix: str, root=None) -> list[str]:
    """A ValidationError of a block at `prefix` (a params key) as `<prefix>.<key>: <what>, got <value>` lines; `root`:
    the block's model, whose keys an 'unknown key' line lists."""
    return messages(err, f"{prefix}.", root=root)


def messages(err: ValidationError, prefix: str, root=None, model_names: frozenset = frozenset()) -> list[str]:
    """One line per problem, `<prefix><path>: ...`. A value that fits no member of a union is reported by every
    member: one report is kept, the deepest (`[3]` for `str | list[str]`: "image_file_template.0: expected a
    string", not "image_file_template: expected a string")."""
    errors = err.errors(include_url=False)
    locs = [[part for part in error["loc"] if not _is_union_tag(part, model_names)] for error in errors]
    paths = [".".join(map(str, loc)) for loc in locs]
    found, reported = [], set()
    for error, loc, path in zip(errors, locs, paths):
        if path not in reported and not any(other.startswith(path + ".") for other in paths):
            reported.add(path)
            found.append(f"{prefix}{path}: {_problem(error, loc, root)}")
    return found


def _problem(error: dict, loc: list, root) -> str:
    kind, value = error["type"], error.get("input")
    if kind == "value_error":  # a model validator's own message (a rule across keys of one block)
        return str(error.get("ctx", {}).get("error", error["msg"]))
    if kind == "extra_forbidden":
        allowed = _allowed_keys(loc[:-1], root)
        return "unknown key" + (f"; allowed: {', '.join(allowed)}" if allowed else "")
    if kind == "missing":
        return "missing (required)"
    return f"{expected_text(error)}, got {value!r:.60}"


def expected_text(error: dict) -> str:
    kind, ctx = error["type"], error.get("ctx") or {}
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return "expected an integer"
    if kind in ("float_type", "float_parsing"):
        return "expected a number"
    if kind in ("string_type",):
        return "expected a string"
    if kind in ("bool_type", "bool_parsing"):
        return "expected true or false"
    if kind in ("list_type",):
        return "expected a list"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return "expected a mapping"
    if kind == "literal_error":
        return f"expected {ctx.get('expected', error['msg'])}"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        sign = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}[kind]
        bound = next(iter(ctx.values()), "")
        if isinstance(bound, float) and bound.is_integer():
            bound = int(bound)
        return f"expected a value {sign} {bound}"
    if kind == "too_short":
        return "expected a non-empty list"
    if kind == "string_pattern_mismatch":
        return "expected cpu, cuda, cuda:N, mps or auto"
    return error["msg"].lower()


def _is_union_tag(part, model_names: frozenset) -> bool:
    """Union members appear in pydantic's error locations ('int', "literal['fail','warn']"): not keys of the file."""
    return isinstance(part, str) and (part in ("int", "float", "str", "bool", "list[str]", "none")
                                      or part.startswith(("literal[", "constrained-", "list[", "dict[", "function-"))
                                      or part[:1].isupper() and part in model_names)




def _allowed_keys(loc: list, root) -> list[str]:
    """The keys `root` allows at a location (walking its annotations), for 'unknown key' messages; none without a
    root."""
    if root is None:
        return []
    node: Any = root
    for part in loc:
        node = _model_of(node)
        if node is None:
            return []
        if isinstance(node, type) and issubclass(node, BaseModel):
            field = node.model_fields.get(str(part))
            if field is None:
                return []
            node = field.annotation
        elif typing.get_origin(node) is dict:
            node = typing.get_args(node)[1]
    node = _model_of(node)
    return sorted(node.model_fields) if isinstance(node, type) and issubclass(node, BaseModel) else []


def _model_of(annotation):
    """The model (or dict type) inside Optional[...] / Union[...] / Annotated[...]."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _model_of(typing.get_args(annotation)[0])
    if origin is Union or isinstance(annotation, types.UnionType):
        for option in typing.get_args(annotation):
            found = _model_of(option)
            if found is not None and found is not type(None):
                return found
        return None
    return annotation
