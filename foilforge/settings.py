"""An instrument's settings, resolved once from params.yaml into typed objects (shapes: foilforge/schema.py).

`instrument_settings(params, name)` gives every per-instrument part that a stage, filter or attacker reads: the
filters that score it and their keep rules, the bias checks, the adversarial filter, the release gate, human
validation and pairing. Each part is merged under one rule, the YAML merge key's own (`<<: *instrument`):

    a key the instrument's block writes wins, null included; a key it leaves out takes the top-level value
    (`bias.defaults`, `adversarial`, `pairing`, ...), and a key the file leaves out the schema's default.

So `bias: {js_max: null}` switches that check off for the instrument, and an instrument that says nothing about
`pairing.min_support` gets the top-level one. A null written for a key whose top-level value may not be null is
an error that says to leave the key out. Each part is read when first asked for, so a stage meets only the
problems of the blocks it reads; `foilforge check-params` asks for them all.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Literal, get_args

from pydantic import BaseModel, ValidationError

from foilforge.config_errors import error_lines
from foilforge.errors import ConfigError
from foilforge.params import typed_params
from foilforge.schema import (
    AdversarialBlock,
    AdversarialOverrides,
    BiasBlock,
    BiasSettings,
    Float,
    GateBlock,
    InstrumentBlock,
    InstrumentFilters,
    InstrumentPairing,
    InstrumentValidation,
    PairingBlock,
    PositiveInt,
    ValidationBlock,
)

ITEM_MODE_DEFAULT = "direct"


class InstrumentBias(BiasSettings):
    """`bias.defaults` with the instrument's `bias` over it (`items` null: direct), and the `bias` block's report
    settings."""

    log_base: Float
    on_exceed: Literal["fail", "warn"]
    plot_top_k: PositiveInt


class InstrumentAdversarial(AdversarialBlock):
    """The `adversarial` block with the instrument's overrides, and the blocks of its attackers as written
    (`attackers.<name>`: a plug-in's arguments)."""

    attacker_blocks: dict[str, dict]


class InstrumentGate(GateBlock):
    """The `gate` block, the instrument's mode and the blocks of the gate's attackers (with their grid)."""

    attacker_blocks: dict[str, dict]
    mode: Literal["fail", "report"]


class InstrumentValidationSettings(ValidationBlock):
    """The `validation` block and the instrument's gold items and votes file."""

    gold: list[str | int]
    votes: str | None


class InstrumentPairingSettings(PairingBlock):
    """The instrument's pairer over the top-level `pairing` block."""

    pairer: str | None
    args: dict
    why: str | None


def _validated(model: type[BaseModel], values: dict, where: str):
    try:
        return model.model_validate(values)
    except ValidationError as err:
        found = error_lines(err, where, root=model)
        raise ConfigError(f"{len(found)} problem(s) in {where}:\n" + "\n".join(found)) from None


def merged_over(top: BaseModel, own: BaseModel, into: type[BaseModel], where: str, **extra):
    """`top`'s values with every key `own` writes over them (null included), plus `extra`, checked as `into`.

    A null written where `top`'s field admits none is named as such: leaving the key out is how an instrument
    takes the top-level value."""
    written = {key: getattr(own, key) for key in own.model_fields_set if key in type(top).model_fields}
    for key, value in written.items():
        if value is None and not _admits_none(type(top), key):
            raise ConfigError(f"{where}.{key}: null is not a value here; leave the key out to take the top-level "
                              f"value ({getattr(top, key)!r})")
    return _validated(into, {**dict(top), **written, **extra}, where)


def _admits_none(model: type[BaseModel], key: str) -> bool:
    annotation = model.model_fields[key].annotation
    return annotation is None or type(None) in get_args(annotation)


@dataclass(frozen=True)
class InstrumentSettings:
    """One instrument's settings (module docstring). An instrument that params.yaml does not name (a stage run on a
    released file) gets the top-level values and the schema's defaults."""

    params: dict
    name: str

    def _own(self, key: str, model: type[BaseModel]):
        block = (self.params.get("instruments") or {}).get(self.name)
        if block is None:
            return model()
        if not isinstance(block, dict):
            raise ConfigError(f"params.yaml instruments.{self.name} must be a mapping, got {type(block).__name__}")
        value = block.get(key)
        return _validated(model, {} if value is None else value, f"params.yaml instruments.{self.name}.{key}")

    def _top(self, name: str):
        return getattr(typed_params(self.params), name)

    @cached_property
    def filters(self) -> InstrumentFilters:
        """`instruments.<I>.filters`: the filters that score it (`run`) and their keep rules (`keep`)."""
        return self._own("filters", InstrumentFilters)

    @cached_property
    def bias(self) -> InstrumentBias:
        block: BiasBlock = self._top("bias")
        settings = merged_over(block.defaults, self._own("bias", BiasSettings), InstrumentBias,
                               f"params.yaml instruments.{self.name}.bias", log_base=block.log_base,
                               on_exceed=block.on_exceed, plot_top_k=block.plot_top_k)
        return settings if settings.items is not None else settings.model_copy(update={"items": ITEM_MODE_DEFAULT})

    @cached_property
    def _adversarial_overrides(self) -> AdversarialOverrides:
        return self._own("adversarial", AdversarialOverrides)

    @cached_property
    def _adversarial_merged(self) -> AdversarialBlock:
        """The `adversarial` block (the schema's defaults without one) with the instrument's overrides."""
        return merged_over(self._top("adversarial") or AdversarialBlock(), self._adversarial_overrides,
                           AdversarialBlock, f"params.yaml instruments.{self.name}.adversarial")

    @cached_property
    def adversarial(self) -> InstrumentAdversarial | None:
        """None without an `adversarial` block, or when the instrument switches it off (`enabled: false`)."""
        if self._top("adversarial") is None or not self._adversarial_overrides.enabled:
            return None
        merged, where = self._adversarial_merged, f"params.yaml instruments.{self.name}.adversarial"
        return _validated(InstrumentAdversarial, {**dict(merged), "attacker_blocks": attacker_blocks(
            self.params, merged.attackers, where)}, where)

    @cached_property
    def transfer_pool(self) -> list[str]:
        """The released files of the instrument's phenomenon that transfer attackers learn from (`adversarial.pool`,
        the instrument's over it), whether or not its adversarial filter runs."""
        return list(self._adversarial_merged.pool)

    @cached_property
    def gate(self) -> InstrumentGate | None:
        """None without a `gate` block (that it keeps apart from the adversarial filter is the gate's own check:
        filters/adversarial.py `gate_apart`)."""
        return gate_settings(self.params, self.gate_mode)

    @cached_property
    def gate_mode(self) -> str:
        block = (self.params.get("instruments") or {}).get(self.name) or {}
        return block.get("gate") or InstrumentBlock.model_fields["gate"].default

    @cached_property
    def validation(self) -> InstrumentValidationSettings:
        own = self._own("validation", InstrumentValidation)
        return _validated(InstrumentValidationSettings, {**dict(self._top("validation")), "gold": own.gold,
                                                         "votes": own.votes}, "params.yaml validation")

    @cached_property
    def pairing(self) -> InstrumentPairingSettings:
        own = self._own("pairing", InstrumentPairing)
        return merged_over(self._top("pairing"), own, InstrumentPairingSettings,
                           f"params.yaml instruments.{self.name}.pairing", pairer=own.pairer, args=own.args,
                           why=own.why)


def instrument_settings(params: dict, name: str) -> InstrumentSettings:
    """The settings of instrument `name` (module docstring)."""
    return InstrumentSettings(params, name)


def attacker_blocks(params: dict, names: list[str], where: str) -> dict[str, dict]:
    """The blocks of the attackers `names` as params.yaml writes them (`attackers.<name>`)."""
    attackers = params.get("attackers") or {}
    missing = [name for name in names if name not in attackers]
    if missing:
        raise ConfigError(f"{where}.attackers: {', '.join(missing)} not defined under `attackers` "
                          f"(defined: {', '.join(sorted(attackers)) or 'none'})")
    return {name: attackers[name] for name in names}


def gate_settings(params: dict, mode: str | None = None) -> InstrumentGate | None:
    """The release gate's settings (params.yaml `gate`) with an instrument's mode (the schema's default without one)
    and the blocks of its attackers; None when there is no `gate` block."""
    block: GateBlock | None = typed_params(params).gate
    if block is None:
        return None
    where = "params.yaml gate"
    stray = sorted(set(block.grid) - set(block.attackers))
    if stray:
        raise ConfigError(f"{where}.grid: {', '.join(stray)} not among gate.attackers ({', '.join(block.attackers)})")
    written = attacker_blocks(params, block.attackers, where)
    # a gate attacker with a grid is certified at its strongest setting (nested CV inside the training folds)
    blocks = {name: {**written[name], **({"grid": block.grid[name]} if block.grid.get(name) else {})}
              for name in block.attackers}
    return _validated(InstrumentGate, {**dict(block), "attacker_blocks": blocks,
                                       "mode": mode or InstrumentBlock.model_fields["gate"].default}, where)
