"""Strict, versioned registries (one per kind of plug-in), after spaCy's.

A plug-in registers under a versioned name ("counting.v1"). Lookups of unknown
names list what exists; registering a different object under a taken name is
an error; `build` validates keyword arguments against the constructor's
signature so a typo in params.yaml fails before anything runs.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any, Callable

from pipeline.errors import ConfigError


class Registry:
    def __init__(self, kind: str, modules: tuple[str, ...] = ()):
        self.kind = kind
        self._items: dict[str, Any] = {}
        # explicit imports of the built-in plug-ins (no dotted-path eval)
        self._modules = modules
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

    def names(self) -> list[str]:
        self._load()
        return sorted(self._items)

    def get(self, name: str):
        self._load()
        if name not in self._items:
            raise ConfigError(f"unknown {self.kind} {name!r}; registered: {', '.join(self.names()) or '(none)'}")
        return self._items[name]

    def build(self, name: str, args: dict | None = None, where: str = "params"):
        factory = self.get(name)
        args = dict(args or {})
        check_args(factory, args, f"{where} ({self.kind} {name})")
        return factory(**args)


def check_args(factory, args: dict, where: str) -> None:
    """Reject unknown keyword arguments and obvious type mismatches against the signature."""
    target = factory.__init__ if inspect.isclass(factory) else factory
    sig = inspect.signature(target)
    params = {k: p for k, p in sig.parameters.items() if k != "self"}
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return
    unknown = sorted(set(args) - set(params))
    if unknown:
        allowed = ", ".join(sorted(k for k, p in params.items() if p.kind is not p.VAR_POSITIONAL))
        raise ConfigError(f"{where}: unknown argument(s) {', '.join(unknown)}; allowed: {allowed}")
    for key, value in args.items():
        default = params[key].default
        if default is inspect.Parameter.empty or default is None or value is None:
            continue
        expected = type(default)
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            continue
        if expected in (list, tuple) and isinstance(value, (list, tuple)):
            continue
        if not isinstance(value, expected) or (isinstance(value, bool) and expected is not bool):
            raise ConfigError(f"{where}: argument {key!r} should be {expected.__name__}, got {type(value).__name__} ({value!r:.40})")
    missing = [k for k, p in params.items()
               if p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and k not in args]
    if missing:
        raise ConfigError(f"{where}: missing required argument(s) {', '.join(missing)}")
