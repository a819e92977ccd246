"""docs/params.md from the params.yaml schema (foilforge/schema.py): every block, key, type, default, description.

The schema's docstrings and `Field(description=...)` are the one place params.yaml is explained;
`foilforge params-doc` writes this reference from them, and a test checks the committed file is current.
"""

from __future__ import annotations

import json
import re
import types
import typing
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel

DEFAULT_PATH = "docs/params.md"

HEADER = """# params.yaml reference

Generated from `foilforge/schema.py` by `foilforge params-doc` (do not edit by hand; a test checks it is current).
`foilforge check-params` validates a params file against this schema and every plug-in's signature.
Types: `null` is YAML's null; `<name>` in a path stands for a key you choose.
"""


def render() -> str:
    """The whole reference as Markdown."""
    from foilforge.schema import Params

    lines = [HEADER, _markdown(_text(Params.__doc__)), ""]
    for name, field in Params.model_fields.items():
        lines += _section(name, field, 2)
    return "\n".join(lines).rstrip() + "\n"


def write(path=DEFAULT_PATH) -> str:
    from foilforge.io import atomic_write

    text = render()
    with atomic_write(path) as handle:
        handle.write(text)
    return text


# ---------------------------------------------------------------- sections and tables

def _section(path: str, field, level: int) -> list[str]:
    lines = [f"{'#' * level} `{path}`", ""]
    lines += [f"Type {_cell(type_text(field.annotation, field.metadata))}, default {_cell(_default(field))}.", ""]
    if field.description:
        lines += [_markdown(field.description), ""]
    model, key_path = _model_in(field.annotation, path)
    if model is None:
        return lines
    if _own_doc(model):
        lines += [_markdown(_text(model.__doc__)), ""]
    if key_path != path:
        lines += [f"Each `{key_path}`:", ""]
    lines += _table(model, key_path)
    for name, field in model.model_fields.items():
        if _model_in(field.annotation, "")[0] is not None:
            lines += _section(f"{key_path}.{name}", field, min(level + 1, 4))
    return lines


def _table(model: type[BaseModel], path: str) -> list[str]:
    lines = ["| key | type | default | description |", "| --- | --- | --- | --- |"]
    for name, field in model.model_fields.items():
        default = _default(field)
        description = _markdown((field.description or "").replace("\n", " "))
        lines.append(f"| `{name}` | {_cell(type_text(field.annotation, field.metadata))} | {_cell(default)} | "
                     f"{_cell(description, code=False)} |")
    return lines + [""]


def _cell(text: str, code: bool = True) -> str:
    text = text.replace("|", "\\|")
    return f"`{text}`" if code and text and text not in ("required", "see below") else text


def _markdown(text: str) -> str:
    """`<name>` placeholders outside code spans escaped, so Markdown does not read them as HTML tags."""
    parts = text.split("`")
    parts[0::2] = [re.sub(r"<(\w+)>", r"&lt;\1&gt;", part) for part in parts[0::2]]
    return "`".join(parts)


def _own_doc(model) -> bool:
    """A docstring the model writes itself (not one inherited from a base model)."""
    return "__doc__" in vars(model) and bool(vars(model)["__doc__"])


def _text(doc: str | None) -> str:
    import inspect

    return inspect.cleandoc(doc or "")


def _default(field) -> str:
    if field.is_required():
        return "required"
    value = field.default_factory() if field.default_factory is not None else field.default
    if isinstance(value, BaseModel):
        value = value.model_dump()
        return "see below" if value else "{}"
    return _yaml(value)


def _yaml(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, tuple):
        value = list(value)
    return json.dumps(value, separators=(", ", ": ")).replace('"', "")


def _model_in(annotation, path: str):
    """The block model an annotation holds (itself, in a union, or as a mapping's values) and its key path."""
    origin = typing.get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, path
    if origin is Annotated:
        return _model_in(typing.get_args(annotation)[0], path)
    if origin is Union or isinstance(annotation, types.UnionType):
        for option in typing.get_args(annotation):
            model, key_path = _model_in(option, path)
            if model is not None:
                return model, key_path
    if origin is dict:
        return _model_in(typing.get_args(annotation)[1], f"{path}.<name>")
    return None, path


# ---------------------------------------------------------------- types as a reader writes them

def type_text(annotation, metadata=()) -> str:
    """`int >= 1`, `float in [0, 1] | null`, `'fail' | 'warn'`, `list[str]`, `dict[str, SourceBlock]`."""
    text = _type(annotation)
    bounds = _bounds(metadata)
    return f"{text} {bounds}".strip() if bounds else text


def _type(annotation) -> str:
    if annotation is None or annotation is type(None):
        return "null"
    if annotation is Any:
        return "any"
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Annotated:
        inner, metadata = args[0], args[1:]
        flat = []
        for item in metadata:
            flat += list(getattr(item, "metadata", [])) or [item]
        bounds = _bounds(flat)
        return f"{_type(inner)} {bounds}".strip() if bounds else _type(inner)
    if origin is Union or isinstance(annotation, types.UnionType):
        return " | ".join(_type(option) for option in args)
    if origin is Literal:
        return " | ".join(repr(option) for option in args)
    if origin in (list, tuple, set):
        return f"list[{', '.join(_type(a) for a in args if a is not Ellipsis)}]" if args else "list"
    if origin is dict:
        return f"dict[{_type(args[0])}, {_type(args[1])}]" if args else "dict"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "mapping"
    return getattr(annotation, "__name__", str(annotation).replace("typing.", ""))


def _bounds(metadata) -> str:
    parts = []
    for item in metadata:
        for attribute, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            if getattr(item, attribute, None) is not None:
                parts.append(f"{sign} {_number(getattr(item, attribute))}")
        if getattr(item, "min_length", None):
            parts.append(f"length >= {item.min_length}")
        pattern = getattr(item, "pattern", None)
        if isinstance(pattern, str):
            parts.append(f"matching {pattern}")
    return ", ".join(parts)


def _number(value):
    return int(value) if isinstance(value, float) and value.is_integer() else value
