"""One error type for bad input, so every stage reports file, record and field the same way."""

from __future__ import annotations


class InputError(Exception):
    """Bad input: names the file, the record (index or id) and the field."""

    def __init__(self, path, problem: str, record=None, field: str | None = None):
        self.path = str(path)
        self.record = record
        self.field = field
        self.problem = problem
        parts = [f"{self.path}"]
        if record is not None:
            parts.append(f"record {record}")
        if field is not None:
            parts.append(f"field '{field}'")
        super().__init__(": ".join([", ".join(parts), problem]))


class ConfigError(Exception):
    """Bad params.yaml content or a model that cannot be loaded; says what to set."""


class GateError(Exception):
    """An instrument a trained text-only attacker still solves: export refuses it (params.yaml `gate`)."""


def config_errors(checks) -> list[str]:
    """Run each check (a callable without arguments); the message of every ConfigError they raise, each once, in
    order: how `foilforge check-params` reports every problem instead of the first."""
    found: list[str] = []
    for check in checks:
        try:
            check()
        except ConfigError as err:
            if str(err) not in found:
                found.append(str(err))
    return found
