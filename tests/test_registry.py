"""Strict versioned registries and params validation against signatures."""

import pytest

from foilforge.errors import ConfigError
from foilforge.registry import Registry


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
    with pytest.raises(ConfigError, match=r"\.depth: expected int, got '3'"):
        reg.build("blue.v1", {"depth": "3"})
    with pytest.raises(ConfigError, match=r"\.flag: expected bool, got 1"):
        reg.build("blue.v1", {"flag": 1})


def make_typed():
    from typing import Literal

    reg = Registry("widget")

    @reg.register("typed.v1")
    class Typed:
        relative_messages = True

        def __init__(self, n_clusters: int | None = None, names: list[str] | None = None, mode: Literal["a", "b"] = "a",
                     table: dict[str, list[str]] | None = None, ratio: float = 0.5, pair: tuple = ("x", "y")):
            self.n_clusters = n_clusters

        def check(self):
            if self.n_clusters is not None and self.n_clusters < 1:
                raise ConfigError(f"n_clusters must be >= 1 or null, got {self.n_clusters}")

    return reg


def test_types_come_from_annotations_even_when_the_default_is_none():
    reg = make_typed()
    assert reg.build("typed.v1", {"n_clusters": 10, "names": ["a"], "mode": "b", "table": {"k": ["v"]},
                                  "ratio": 1, "pair": ["p", "q"]}).n_clusters == 10
    assert reg.build("typed.v1", {"n_clusters": None}).n_clusters is None
    with pytest.raises(ConfigError, match=r"\.n_clusters: expected int \| None, got 'ten'"):
        reg.build("typed.v1", {"n_clusters": "ten"})
    with pytest.raises(ConfigError, match=r"\.names: expected list\[str\] \| None, got \[1\]"):
        reg.build("typed.v1", {"names": [1]})
    with pytest.raises(ConfigError, match=r"\.mode: expected one of 'a', 'b', got 'c'"):
        reg.build("typed.v1", {"mode": "c"})
    with pytest.raises(ConfigError, match=r"\.table: expected dict\[str, list\[str\]\] \| None"):
        reg.build("typed.v1", {"table": {"k": "v"}})
    with pytest.raises(ConfigError, match=r"\.ratio: expected float, got True"):
        reg.build("typed.v1", {"ratio": True})


def test_build_calls_check_and_names_the_block():
    reg = make_typed()
    with pytest.raises(ConfigError, match=r"^params.yaml instruments.x.args \(widget typed.v1\): n_clusters must be >= 1 or null, got 0$"):
        reg.build("typed.v1", {"n_clusters": 0}, where="params.yaml instruments.x.args")


def test_a_plug_in_with_the_former_hook_names_is_refused_not_silently_unchecked():
    reg = Registry("widget")

    @reg.register("old.v1")
    class Old:
        def validate(self):
            raise ConfigError("never called")

    @reg.register("old_sample.v1")
    class OldSample:
        def check_sample(self, sample, path="<input>", index=None):
            pass

        def validate_sample(self, sample, path="<input>", index=None):
            pass

    with pytest.raises(ConfigError, match=r"^p \(widget old.v1\): .*Old defines validate\(\); the hook is named check\(\)"):
        reg.build("old.v1", {}, where="p")
    with pytest.raises(ConfigError, match=r"OldSample defines validate_sample\(\); the hook is named check_sample\(\)"):
        reg.build("old_sample.v1", {}, where="p")


def test_the_foiler_registry_holds_all_nine_built_in_foilers():
    from foilforge.foiler import FOILERS

    assert {"existence.v1", "counting.v1", "coreference.v1", "plurals.v1", "relations.v1", "actant_swap.v1",
            "action_replacement.v1", "predicate_noun.v1", "bd2bb_decoys.v1"} <= set(FOILERS.names())


def test_n_clusters_ten_fails_check_params():
    from foilforge.pipeline.params_check import check

    params = {"instruments": {"b": {"foiler": "bd2bb_decoys.v1", "source": "bd2bb", "args": {"n_clusters": "ten"}}},
              "sources": {"bd2bb": {"format": "bd2bb", "root": ".", "files": {"actions": "test.csv"}}}}
    assert ("params.yaml instruments.b.args.n_clusters: expected int | None, got 'ten' (foiler bd2bb_decoys.v1)"
            in check(params))


def test_temporarily_undoes_registrations_made_inside_it():
    reg, Blue = make()
    with reg.temporarily():
        reg.register("red.v1")(type("Red", (), {}))
        assert reg.names() == ["blue.v1", "red.v1"]
    assert reg.names() == ["blue.v1"]
    with pytest.raises(RuntimeError), reg.temporarily():
        reg.register("green.v1")(type("Green", (), {}))
        raise RuntimeError("a failing test")
    assert reg.names() == ["blue.v1"]


def make_signatures():
    from typing import Sequence

    reg = Registry("widget")

    @reg.register("signed.v1")
    class Signed:
        def __init__(self, size: int, pair: tuple[int, int] = (1, 2), names: Sequence[str] = (), model=None,
                     copy: bool = False, scale=1.5):
            self.size, self.pair = size, pair

    @reg.register("open.v1")
    def open_factory(size: int = 1, **settings):
        return settings

    return reg


def test_arguments_are_validated_by_a_pydantic_model_of_the_signature():
    from pydantic import BaseModel

    from foilforge.registry import signature_model

    reg = make_signatures()
    model = signature_model(reg.get("signed.v1"))
    assert issubclass(model, BaseModel) and model.allowed == ["copy", "model", "names", "pair", "scale", "size"]
    # YAML lists stand for tuples and sequences; the factory gets the values as given; any parameter name works
    built = reg.build("signed.v1", {"size": 2, "pair": [3, 4], "names": ["a"], "copy": True, "model": {"x": 1}})
    assert (built.size, built.pair) == (2, [3, 4])
    where = "params.yaml instruments.x.args"
    with pytest.raises(ConfigError, match=r"^params\.yaml instruments\.x\.args\.size: expected int, got '2' "
                                          r"\(widget signed\.v1\)$"):
        reg.build("signed.v1", {"size": "2"}, where=where)
    with pytest.raises(ConfigError, match=r"\.pair: expected tuple\[int, int\], got \[3, 4, 5\]"):
        reg.build("signed.v1", {"size": 2, "pair": [3, 4, 5]}, where=where)
    with pytest.raises(ConfigError, match=r"\.scale: expected float \| None, got 'big'"):  # the default's type
        reg.build("signed.v1", {"size": 2, "scale": "big"}, where=where)
    with pytest.raises(ConfigError, match=r"^params\.yaml instruments\.x\.args \(widget signed\.v1\): unknown "
                                          r"argument\(s\) colour, sise; allowed: copy, model, names, pair, scale, size$"):
        reg.build("signed.v1", {"sise": 2, "colour": "red"}, where=where)
    with pytest.raises(ConfigError, match=r"^params\.yaml instruments\.x\.args \(widget signed\.v1\): missing "
                                          r"required argument\(s\) size$"):
        reg.build("signed.v1", {"names": ["a"]}, where=where)
    # the first wrong value in the order params.yaml gives them; an unknown name before any type
    with pytest.raises(ConfigError, match=r"\.copy: expected bool"):
        reg.build("signed.v1", {"copy": 1, "size": "2"}, where=where)
    with pytest.raises(ConfigError, match=r"unknown argument\(s\) zz"):
        reg.build("signed.v1", {"size": "2", "zz": 1}, where=where)
    # a factory taking **kwargs takes anything
    assert signature_model(reg.get("open.v1")) is None and reg.build("open.v1", {"size": "x", "any": 1}) == {"any": 1}
