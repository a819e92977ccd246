"""Attackers from params.yaml blocks (`build_attacker`), and the grid search a block with `grid` builds."""

from __future__ import annotations

import functools
import inspect

from foilforge.attacker import (
    ATTACKERS,
    Attacker,
    Pair,
    captions_first,
    correctness,
    out_of_fold_margins,
    shared_differences,
)
from foilforge.errors import ConfigError


class GridSearchAttacker(Attacker):
    """An attacker at the strongest setting of a small declared grid, chosen by nested cross-validation.

    `make(setting)` builds the attacker of one setting (a dict of the grid's arguments). `fit(pairs)` runs every
    setting out of fold on grouped `inner_folds` of `pairs` alone, keeps the one whose accuracy is furthest
    from chance (either side: the gate is two-sided), and refits it on all of `pairs`. The caller's held-out
    pairs never reach `fit`, so the choice never sees the fold it is scored on. `chosen_` is the setting of
    the fit.
    """

    def __init__(self, make, settings: list[dict], inner_folds: int = 3, random_state: int = 0):
        self.make = make
        self.settings = settings
        self.inner_folds = inner_folds
        self.random_state = random_state

    @property
    def family(self) -> str:
        return self.make(self.settings[0]).family

    @property
    def registry_name(self) -> str:
        return self.make(self.settings[0]).registry_name

    def describe(self) -> str:
        options = "; ".join(", ".join(f"{k}={v}" for k, v in setting.items()) for setting in self.settings)
        return (f"{self.make(self.settings[0]).describe()} at the strongest of [{options}] "
                f"(nested {self.inner_folds}-fold CV)")

    def choose(self, pairs: list[Pair]) -> dict:
        """The setting whose out-of-fold accuracy on `pairs` (grouped inner folds, seed random_state) is furthest
        from chance."""
        if len(self.settings) == 1 or len({p.group for p in pairs}) < 2:
            return self.settings[0]
        distance = []
        # settings that differ only in what the classifier fit reads (C) share one feature map of these pairs
        shared: dict = {}
        for setting in self.settings:
            make = lambda setting=setting: self.make(setting)  # noqa: E731
            key = self.features_key(setting)
            if key not in shared:
                shared[key] = shared_differences(make, pairs)
            margins, _ = out_of_fold_margins(make, pairs, self.inner_folds, self.random_state, shared=shared[key])
            distance.append(abs(float(correctness(margins).mean()) - 0.5))
        return self.settings[max(range(len(self.settings)), key=lambda k: (distance[k], -k))]

    def features_key(self, setting: dict) -> tuple:
        """The part of `setting` its feature map depends on: all but the attacker's `fit_only_params`."""
        fit_only = getattr(self.make(setting), "fit_only_params", ())
        return tuple((name, repr(value)) for name, value in sorted(setting.items()) if name not in fit_only)

    def fit(self, pairs: list[Pair], y=None) -> "GridSearchAttacker":
        pairs = captions_first(pairs, y)
        self.chosen_ = self.choose(pairs)
        self.best_ = self.make(self.chosen_).set_params(random_state=self.random_state).fit(pairs)
        return self

    def margins(self, pairs: list[Pair]):
        return self.best_.margins(pairs)


def grid_settings(grid: dict, param_key: str) -> list[dict]:
    """Every combination of a grid `{argument: [values]}`, in the order the values are listed."""
    import itertools

    if not isinstance(grid, dict) or not grid or not all(isinstance(v, list) and v for v in grid.values()):
        raise ConfigError(f"{param_key} must map argument names to non-empty lists of values, got {grid!r:.80}")
    names = list(grid)
    return [dict(zip(names, values)) for values in itertools.product(*(grid[n] for n in names))]


#: constructor arguments a params block does not set: the stage's seed sets random_state for each fit
#: (adversarial.seed, gate.seed), and build_attacker passes the block's own key as param_key
RUN_ARGUMENTS = ("random_state", "param_key")


@functools.lru_cache(maxsize=None)
def takes_param_key(cls) -> bool:
    """Whether an attacker class's constructor takes `param_key` (asked once a class: a gate builds an attacker a fit)."""
    return "param_key" in inspect.signature(cls.__init__).parameters


def at_setting(block: dict, setting: dict) -> dict:
    """The attacker block of one grid setting: its attacker, its args with the setting's values, no grid."""
    return {"attacker": block["attacker"], "args": {**(block.get("args") or {}), **setting}}


def build_attacker(block, param_key: str) -> Attacker:
    """An attacker from a params block `{attacker: word_ngram.v1, args: {...}}` (args checked against __init__).

    With `grid: {argument: [values], ...}` (the release gate's `gate.grid`), a GridSearchAttacker over the
    combinations, each built (and checked) as `args` with the grid's values. An attacker whose constructor
    takes `param_key` gets `param_key`, so its messages name the block's keys."""
    if not isinstance(block, dict) or "attacker" not in block:
        raise ConfigError(f"{param_key} must be a mapping with attacker (one of {', '.join(ATTACKERS.names())}) "
                          f"and optional args, got {block!r:.80}")
    unknown = sorted(set(block) - {"attacker", "args", "grid"})
    if unknown:
        raise ConfigError(f"{param_key}: unknown key(s) {', '.join(unknown)}; allowed: attacker, args, grid")
    if block.get("grid"):
        settings = grid_settings(block["grid"], f"{param_key}.grid")

        def make(setting, block=block):
            return build_attacker(at_setting(block, setting), param_key)

        for setting in settings:
            make(setting)  # every combination's arguments checked before any fitting
        return GridSearchAttacker(make, settings)
    name = ATTACKERS.newest(block["attacker"])
    args = dict(block.get("args") or {})
    reserved = [k for k in RUN_ARGUMENTS if k in args]
    if reserved:
        raise ConfigError(f"{param_key}.args: {', '.join(reserved)} is set by the run (the stage's seed, the "
                          f"block's key), not in params.yaml")
    if takes_param_key(ATTACKERS.get(name)):
        args["param_key"] = param_key
    return ATTACKERS.build(name, args, where=param_key)
