"""The Ray engine gives the local engine's records byte for byte, and loses nothing when an actor dies."""

import json
import os
import signal

import pytest
import ray

from foilforge.errors import ConfigError
from pipeline import engine
from pipeline.stages import score


@pytest.fixture(scope="module")
def local_ray():
    engine.start_ray({"address": None, "num_cpus": 2})
    yield
    ray.shutdown()


@pytest.fixture
def real_pairs(shared):
    """Caption/foil pairs from VALSE's released relations file, as foil records."""
    released = json.loads(shared("data", "valse-dev", "relations.json").read_text())
    return [{"id": f"relations:{key}", "caption": r["caption"], "foil": r["foil"]}
            for key, r in sorted(released.items())[:30]]


def _params(tiny_models, batch_size):
    return {"models": {"grammar_lm": {"name_or_path": str(tiny_models.bert_mlm()), "batch_size": 4},
                       "cola": {"name_or_path": str(tiny_models.bert_classifier()), "batch_size": 4}},
            "instruments": {"relations": {"filters": {"run": ["grammaticality"]}}},
            "engine": {"batch_size": batch_size, "ray": {"num_cpus": 2, "workers": 2}}}


def _score(params, records, tmp_path, name):
    source = tmp_path / "foils.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / f"{name}.jsonl"
    score.run(params, "relations", source, out)
    return out.read_bytes()


def test_ray_engine_writes_the_local_engines_bytes(tiny_models, real_pairs, tmp_path, monkeypatch, local_ray):
    params = _params(tiny_models, batch_size=7)   # 30 records: 5 batches, the last one short
    local = _score(params, real_pairs, tmp_path, "local")
    monkeypatch.setenv(engine.ENGINE_ENV, "ray")
    assert _score(params, real_pairs, tmp_path, "ray") == local
    rows = [json.loads(line) for line in local.decode().splitlines()]
    assert [r["id"] for r in rows] == [r["id"] for r in real_pairs]
    assert all(isinstance(r["filters"]["grammaticality"]["score"], float) for r in rows)


def test_batches_are_the_same_for_both_engines():
    assert engine.batches(list(range(7)), 3) == [[0, 1, 2], [3, 4, 5], [6]]
    assert engine.batches([], 3) == []


def _doubler():
    # a class made in a function travels to the Ray workers by value: they need not import this test module
    class Doubler:
        def __init__(self, offset):
            self.offset = offset

        def __call__(self, batch):
            return [{"id": r["id"], "value": 2 * r["value"] + self.offset} for r in batch]

    return Doubler


def test_an_actor_killed_mid_run_is_restarted_and_nothing_is_lost(tmp_path, local_ray):
    sentinel = tmp_path / "killed-once"

    class DiesOnce(_doubler()):
        """Kills its own actor process (SIGKILL, as the OOM killer would) the first time any actor scores a batch."""

        def __call__(self, batch):
            try:
                fd = os.open(sentinel, os.O_CREAT | os.O_EXCL)
            except FileExistsError:
                return super().__call__(batch)
            os.close(fd)
            os.kill(os.getpid(), signal.SIGKILL)

    records = [{"id": f"r{k}", "value": k} for k in range(40)]
    settings = {"name": "ray", "batch_size": 6, "ray": {"address": None, "num_cpus": 2, "workers": 2,
                                                           "cpus_per_worker": 1.0, "gpus_per_worker": 0.0}}
    out = engine.map_batches(records, DiesOnce, (1,), settings)
    assert sentinel.exists()  # an actor did die
    assert out == [{"id": f"r{k}", "value": 2 * k + 1} for k in range(40)]   # every record once, in order


def test_a_worker_that_drops_records_is_an_error(local_ray):
    class Drops(_doubler()):
        def __call__(self, batch):
            return super().__call__(batch)[1:]

    settings = {"name": "local", "batch_size": 4, "ray": {}}
    with pytest.raises(RuntimeError, match="Drops returned 3 results for a batch of 4"):
        engine.map_batches([{"id": k, "value": k} for k in range(8)], Drops, (0,), settings)


def test_the_engine_comes_from_params_and_the_environment(monkeypatch):
    monkeypatch.delenv(engine.ENGINE_ENV, raising=False)
    assert engine.engine_settings({})["name"] == "local"
    assert engine.engine_settings({"engine": {"name": "ray"}})["name"] == "ray"
    monkeypatch.setenv(engine.ENGINE_ENV, "ray")
    assert engine.engine_settings({})["name"] == "ray"
    monkeypatch.setenv(engine.ENGINE_ENV, "spark")
    with pytest.raises(ConfigError, match=r"\$FOILFORGE_ENGINE is 'spark'; expected one of local, ray"):
        engine.engine_settings({})
