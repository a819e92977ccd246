"""Strict versioned registries and params validation against signatures."""

import pytest

from pipeline.errors import ConfigError
from pipeline.registry import Registry


def make():
    reg = Registry("widget")

    @reg.register("blue.v1")
    class Blue:
        def __init__(self, depth: int = 2, names: list = (), ratio: float = 0.5, flag: bool = False):
            self.depth = depth

    return reg, Blue


def test_unknown_name_lists_registered():
    reg, _ = make()
    with pytest.raises(ConfigError, match=r"unknown widget 'red\.v1'; registered: blue\.v1"):
        reg.get("red.v1")


def test_name_needs_version():
    reg, _ = make()
    with pytest.raises(ValueError, match="must carry a version"):
        reg.register("red")


def test_other_object_under_taken_name_is_an_error():
    reg, _ = make()
    with pytest.raises(ValueError, match="already registered"):
        reg.register("blue.v1")(lambda: None)


def test_build_validates_args():
    reg, Blue = make()
    assert reg.build("blue.v1", {"depth": 3, "ratio": 1}).depth == 3
    with pytest.raises(ConfigError, match=r"unknown argument\(s\) dpeth; allowed: depth, flag, names, ratio"):
        reg.build("blue.v1", {"dpeth": 3})
    with pytest.raises(ConfigError, match=r"argument 'depth' should be int, got str \('3'\)"):
        reg.build("blue.v1", {"depth": "3"})
    with pytest.raises(ConfigError, match=r"argument 'flag' should be bool, got int"):
        reg.build("blue.v1", {"flag": 1})
