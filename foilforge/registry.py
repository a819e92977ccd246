"""Strict, versioned registries (one per kind of plug-in), after spaCy's.

A plug-in registers under a versioned name ("counting.v1"). Lookups of unknown
names list what exists; registering a different object under a taken name is
an error; `build` validates keyword arguments against the constructor's
signature, as confection does for spaCy's factories: a pydantic model built
from `inspect.signature` (names, and types from the type annotations: `int |
None`, `list[str]`, `Literal[...]`, ...), then the plug-in's `check()`, so
a typo or an impossible value in params.yaml fails before anything runs (and
`foilforge check-params` reports it).

Plug-ins are found without a hand-kept list: every module of the registry's
package (`packages`, e.g. each module in foilers/) is imported on the
first lookup, and so is every Python entry point of the registry's group
(`entry_points`, e.g. `foilforge.foilers` in another package's pyproject.toml,
as spaCy's factories); importing a module runs its `@REGISTRY.register`.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import pkgutil
import types
import typing
from typing import Annotated, Any, Callable

import pydantic

from foilforge.config_errors import expected_text
from foilforge.errors import ConfigError


class Registry:
    def __init__(self, kind: str, modules: tuple[str, ...] = (), entry_points: str | None = None,
                 packages: tuple[str, ...] = (), skip: tuple[str, ...] = ()):
        self.kind = kind
        self._items: dict[str, Any] = {}
        # explicit imports (no dotted-path eval), and the packages whose modules are all imported
        self._modules = modules
        self._packages = packages
        self._skip = skip
        # entry-point group scanned on first lookup: third-party plug-ins register without editing this package
        self._entry_points = entry_points
        self._loaded = False

    def register(self, name: str) -> Callable:
        if "." not in name or not name.rsplit(".", 1)[1].startswith("v"):
            raise ValueError(f"{self.kind} name {name!r} must carry a version, like 'name.v1'")

        def decorator(obj):
            existing = self._items.get(name)
            if existing is not None and existing is not obj and getattr(existing, "__qualname__", None) != getattr(obj, "__qualname__", None):
                raise ValueError(f"{self.kind} {name!r} is already registered to {existing!r}")
            self._items[name] = obj
            try:
                obj.registry_name = name
            except (AttributeError, TypeError):
                pass
            return obj

        return decorator

    def _load(self) -> None:
        if not self._loaded:
            self._loaded = True
            for module in self._modules:
                importlib.import_module(module)
            for package in self._packages:
                path = importlib.import_module(package).__path__
                for info in sorted(pkgutil.iter_modules(path), key=lambda m: m.name):
                    if not info.ispkg and not info.name.startswith("_") and info.name not in self._skip:
                        importlib.import_module(f"{package}.{info.name}")
            if self._entry_points:
                from importlib.metadata import entry_points

                for entry in sorted(entry_points(group=self._entry_points), key=lambda e: e.name):
                    try:
                        entry.load()  # importing the module runs its @REGISTRY.register decorators
                    except Exception as err:
                        raise ConfigError(f"{self.kind} entry point {entry.name!r} ({entry.value}) of group "
                                          f"{self._entry_points!r} failed to load: {type(err).__name__}: {err}") from err

    @contextlib.contextmanager
    def temporarily(self):
        """Registrations made inside the block are undone after it (tests that register a class for one test)."""
        self._load()
        before = dict(self._items)
        try:
            yield self
        finally:
            self._items.clear()
            self._items.update(before)

    def names(self) -> list[str]:
        self._load()
        return sorted(self._items)

    def unversioned(self) -> list[str]:
        """The registered names without their versions ("coco", "counting"), as params.yaml may write them."""
        return sorted({n.rsplit(".", 1)[0] for n in self.names()})

    def newest(self, name: str) -> str:
        """The registered name `name` means: itself when registered, else the newest version of it ("coco" -> "coco.v1")."""
        if not isinstance(name, str):
            raise ConfigError(f"unknown {self.kind} {name!r}; registered: {', '.join(self.unversioned()) or '(none)'}")
        if name in self.names():
            return name
        versions = [n for n in self.names() if n.rsplit(".", 1)[0] == name]
        if not versions:
            raise ConfigError(f"unknown {self.kind} {name!r}; registered: {', '.join(self.unversioned()) or '(none)'}")
        return max(versions, key=lambda n: int("".join(c for c in n.rsplit(".", 1)[1] if c.isdigit()) or 0))

    def get(self, name: str):
        self._load()
        if name not in self._items:
            raise ConfigError(f"unknown {self.kind} {name!r}; registered: {', '.join(self.names()) or '(none)'}")
        return self._items[name]

    def build(self, name: str, args: dict | None = None, where: str = "params"):
        """Construct plug-in `name` from params: args checked against the signature, then its `check()`."""
        factory = self.get(name)
        args = dict(args or {})
        where = f"{where} ({self.kind} {name})"
        check_args(factory, args, where)
        built = factory(**args)
        _refuse_old_hooks(type(built), where)
        check = getattr(built, "check", None)
        if callable(check):
            try:
                check()
            except ConfigError as err:
                # a plug-in whose checks name their argument relative to its block ("top_k must be >= 1") gets the
                # block prepended; others (filters) name full params keys themselves
                if not getattr(built, "relative_messages", False):
                    raise
                raise ConfigError(f"{where}: {err}") from err
        return built


#: plug-in hooks under their former names: "validate" is the people's verdict on a foil (the validate stage), so the
#: argument check and the input check are `check` and `check_sample`
OLD_HOOKS = {"validate": "check", "validate_sample": "check_sample"}


def _refuse_old_hooks(cls: type, where: str) -> None:
    """A plug-in written against the former hook names would have its checks silently skipped: refuse it instead."""
    for klass in cls.__mro__:
        if klass.__module__.startswith(("pydantic", "builtins")):
            continue
        for old, new in OLD_HOOKS.items():
            if old in vars(klass):
                raise ConfigError(f"{where}: {klass.__qualname__} defines {old}(); the hook is named {new}() "
                                  f"(docs/add_a_foiler.md)")


#: plug-in arguments under their former names: a "scorer" gives a whole text (with or without an image) a number;
#: what ranks the fills of a gap in a sentence is a span ranker (foilforge/span_ranking.py)
RENAMED_ARGUMENTS = {"scorer": "ranker"}


def check_args(factory, args: dict, where: str) -> None:
    """Reject unknown keyword arguments, values of the wrong type, and missing required ones (in that order).

    The arguments are validated by a pydantic model of the signature (`signature_model`), strictly: no "3" -> 3,
    and a YAML list stands for a tuple or a set. The values the factory gets are the arguments as given.
    """
    model = signature_model(factory)
    if model is None:  # takes **kwargs: anything goes
        return
    try:
        model.model_validate(args)
    except pydantic.ValidationError as err:
        errors = err.errors(include_url=False)
    else:
        return
    unknown = sorted({e["loc"][0] for e in errors if e["type"] == "extra_forbidden"})
    if unknown:
        renamed = [f"{old} is now {RENAMED_ARGUMENTS[old]}" for old in unknown
                   if RENAMED_ARGUMENTS.get(old) in model.allowed]
        raise ConfigError(f"{where}: unknown argument(s) {', '.join(unknown)}"
                          + (f" ({'; '.join(renamed)})" if renamed else "") + f"; allowed: {', '.join(model.allowed)}")
    wrong = {e["loc"][0]: e for e in errors if e["type"] != "missing"}
    for key in (k for k in args if k in wrong):  # the first wrong one in the order params.yaml gives them
        # a bound the signature states (`Annotated[int, Field(ge=1)]`) is named as such; a wrong type by the type
        expected = (expected_text(wrong[key]) if wrong[key]["type"] in BOUND_ERRORS
                    else f"expected {type_name(model.hints[key])}")
        raise ConfigError(f"{key_path(where, key)}: {expected}, got {args[key]!r:.40}{_context(where)}")
    missing = [e["loc"][0] for e in errors if e["type"] == "missing"]
    raise ConfigError(f"{where}: missing required argument(s) {', '.join(missing)}")


#: the errors of a bound a signature states (`Annotated[int, Field(ge=1)]`), named by config_errors as the schema's are
BOUND_ERRORS = frozenset(("greater_than_equal", "greater_than", "less_than_equal", "less_than", "too_short"))

_STRICT = pydantic.ConfigDict(strict=True, extra="forbid", arbitrary_types_allowed=True, protected_namespaces=())
#: containers a YAML list stands for: validated without strictness of the container itself (its items stay strict)
_LIST_LIKE = (list, tuple, set, frozenset)


@functools.lru_cache(maxsize=None)
def signature_model(factory) -> type[pydantic.BaseModel] | None:
    """A pydantic model of a factory's keyword arguments (a class: its `__init__`), or None when it takes **kwargs.

    Each parameter's type is its annotation; an unannotated one with a default takes the default's type (or None),
    and anything else is unchecked. The model carries `hints` (parameter -> the type it checks) and `allowed`
    (the parameter names, sorted) for the messages.
    """
    target = factory.__init__ if inspect.isclass(factory) else factory
    params = {k: p for k, p in inspect.signature(target).parameters.items() if k != "self"}
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return None
    annotations = _type_hints(target)
    fields, hints = {}, {}
    for index, (name, param) in enumerate(params.items()):
        if param.kind is param.VAR_POSITIONAL:
            continue
        hint = annotations.get(name, inspect.Parameter.empty)
        if hint is inspect.Parameter.empty:
            default = param.default
            hint = (Any if default is inspect.Parameter.empty or default is None
                    else (list if isinstance(default, tuple) else type(default)) | None)
        hints[name] = hint
        default = param.default
        if default is inspect.Parameter.empty:  # required, unless positional-only (never given by keyword)
            default = None if param.kind is param.POSITIONAL_ONLY else ...
        # fields named by position, the parameter's name as the alias: any name works (`copy`, `model_x`, `_x`)
        fields[f"arg{index}"] = (_checkable(hint), pydantic.Field(default, alias=name))
    model = pydantic.create_model(f"{getattr(factory, '__name__', 'factory')}Args", __config__=_STRICT, **fields)
    model.hints, model.allowed = hints, sorted(hints)
    return model


def _checkable(hint):
    """The annotation pydantic validates: YAML lists accepted for tuples and sets; Any where pydantic has no
    validator for a type (an annotation that is not a type)."""
    origin = typing.get_origin(hint) or hint
    if origin is typing.Union or (hasattr(types, "UnionType") and isinstance(hint, types.UnionType)):
        return typing.Union[tuple(_checkable(option) for option in typing.get_args(hint))]
    if origin in _LIST_LIKE or origin in (typing.Sequence, typing.Collection, typing.Iterable):
        hint_args = typing.get_args(hint)
        if origin is not tuple:
            item = _checkable(hint_args[0]) if hint_args else Any
            return list[item] | tuple[item, ...]
        if len(hint_args) == 2 and hint_args[1] is Ellipsis:
            return Annotated[tuple[_checkable(hint_args[0]), ...], pydantic.Strict(False)]
        inner = tuple(_checkable(a) for a in hint_args) if hint_args else (Any, ...)
        return Annotated[tuple[inner], pydantic.Strict(False)]
    if origin in (dict, typing.Mapping) and len(typing.get_args(hint)) == 2:
        key, value = typing.get_args(hint)
        return dict[_checkable(key), _checkable(value)]
    try:
        pydantic.create_model("Probe", __config__=_STRICT, value=(hint, ...))
    except Exception:  # a type pydantic cannot build a validator for: not checked
        return Any
    return hint


def key_path(where: str, key: str) -> str:
    """`params.yaml instruments.b.args (foiler x.v1)` + `n` -> `params.yaml instruments.b.args.n` (the path of one key)."""
    return f"{where.split(' (', 1)[0]}.{key}"


def _context(where: str) -> str:
    return f" ({where.split(' (', 1)[1]}" if " (" in where else ""


def _type_hints(target) -> dict:
    try:
        return typing.get_type_hints(target, include_extras=True)  # `Annotated` bounds kept for the checks
    except Exception:  # an annotation that does not resolve: fall back to the defaults' types
        return {}


def type_name(hint) -> str:
    """`int`, `int | None`, `list[str]`, `one of 'a', 'b'` for an error message."""
    if hint is None or hint is type(None):
        return "None"
    if typing.get_origin(hint) is Annotated:
        return type_name(typing.get_args(hint)[0])
    origin = typing.get_origin(hint)
    hint_args = typing.get_args(hint)
    if origin is typing.Union or (hasattr(types, "UnionType") and isinstance(hint, types.UnionType)):
        return " | ".join(type_name(option) for option in hint_args)
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(option) for option in hint_args)
    if origin is not None:
        inner = ", ".join("..." if a is Ellipsis else type_name(a) for a in hint_args)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    return getattr(hint, "__name__", str(hint).replace("typing.", ""))
