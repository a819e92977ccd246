"""The Ray engine gives the local engine's records byte for byte, loses nothing when an actor dies, and a killed stage
resumes from the batches it had finished."""

import json
import os
import signal
from pathlib import Path

import pytest
import ray

from foilforge.errors import ConfigError
from foilforge.pipeline import engine
from foilforge.pipeline import scoring as score
from foilforge.pipeline.engine import jobs, ray_data
from foilforge.schema import EngineBlock


@pytest.fixture(scope="module")
def local_ray():
    # idle workers are kept for the next test's read tasks: by default Ray keeps num_cpus of them and stops the
    # rest, and each one started anew imports Ray again (seconds of CPU on 2 cores)
    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False,
             _system_config={"num_workers_soft_limit": 8})
    yield
    ray.shutdown()


@pytest.fixture
def real_pairs(shared):
    """Caption/foil pairs from VALSE's released relations file, as foil records."""
    released = json.loads(shared("data", "valse-dev", "relations.json").read_text())
    return [{"id": f"relations:{key}", "caption": r["caption"], "foil": r["foil"]}
            for key, r in sorted(released.items())[:30]]



def E(settings: dict) -> EngineBlock:
    """An engine block as params.yaml's `engine` would give it (foilforge/schema.py)."""
    return EngineBlock.model_validate(settings)

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
    assert _shard_lines(tmp_path / f"{name}.parquet") == out.read_bytes()   # the same records as Parquet shards
    return out.read_bytes()


def _shard_lines(directory) -> bytes:
    from foilforge.io import dumps
    from foilforge.pipeline.shards import read_shards

    return "".join(dumps(record) + "\n" for record in read_shards(directory)).encode("utf-8")


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


def _dies_once(worker_class, sentinel):
    """worker_class, but the first batch any actor runs kills its own process (SIGKILL, as the OOM killer would)."""
    class DiesOnce(worker_class):
        def __call__(self, batch):
            try:
                fd = os.open(sentinel, os.O_CREAT | os.O_EXCL)
            except FileExistsError:
                return super().__call__(batch)
            os.close(fd)
            os.kill(os.getpid(), signal.SIGKILL)

    return DiesOnce


def test_an_actor_killed_mid_run_is_restarted_and_nothing_is_lost(tmp_path, local_ray):
    """The pool's one actor dies on its first batch (SIGKILL): Ray must bring it back for any batch to finish."""
    sentinel = tmp_path / "killed-once"
    DiesOnce = _dies_once(_doubler(), sentinel)
    records = [{"id": f"r{k}", "value": k} for k in range(40)]
    settings = {"name": "ray", "batch_size": 6, "ray": {"address": None, "num_cpus": 2, "workers": 1,
                                                           "cpus_per_worker": 1.0, "gpus_per_worker": 0.0}}
    out = engine.map_batches(records, DiesOnce, (1,), E(settings))
    assert sentinel.exists()  # an actor did die
    assert out == [{"id": f"r{k}", "value": 2 * k + 1} for k in range(40)]   # every record once, in order


class _Threads:
    """Reports the torch threads its process scores with and the threads a fast tokenizer of it would encode on."""

    def __init__(self):
        pass

    def __call__(self, batch):
        import torch

        return [(torch.get_num_threads(), os.environ.get("RAYON_NUM_THREADS")) for _ in batch]


def test_every_actor_sums_with_the_stages_torch_threads_and_tokenizes_on_its_share_of_the_cores(local_ray):
    """Ray starts an actor with one thread; a CPU model's float sums depend on the count, so the actors take the
    stage process's count (or engine.threads_per_worker, on both engines). A fast tokenizer starts one thread per
    core of the machine in every actor; each actor gets its cpus_per_worker instead (whole cores, at least one)."""
    import torch

    stage = torch.get_num_threads()
    records = [{"id": k} for k in range(4)]
    ray_settings = {"address": None, "num_cpus": 2, "workers": 1, "cpus_per_worker": 1.0, "gpus_per_worker": 0.0}
    ray_engine = {"name": "ray", "batch_size": 2, "threads_per_worker": None, "ray": ray_settings}
    assert engine.map_batches(records, _Threads, (), E(ray_engine)) == [(stage, "1")] * 4
    half = {**ray_engine, "threads_per_worker": 3, "ray": {**ray_settings, "cpus_per_worker": 0.5}}
    assert engine.map_batches(records, _Threads, (), E(half)) == [(3, "1")] * 4
    two = {**ray_engine, "threads_per_worker": 1, "ray": {**ray_settings, "workers": 1, "cpus_per_worker": 2.0}}
    assert engine.map_batches(records, _Threads, (), E(two)) == [(1, "2")] * 4
    try:
        local = {"name": "local", "batch_size": 2, "threads_per_worker": 3, "ray": ray_settings}
        assert [threads for threads, _ in engine.map_batches(records, _Threads, (), E(local))] == [3] * 4
    finally:
        torch.set_num_threads(stage)


def test_a_worker_that_drops_records_is_an_error(local_ray):
    class Drops(_doubler()):
        def __call__(self, batch):
            return super().__call__(batch)[1:]

    settings = {"name": "local", "batch_size": 4, "ray": {}}
    with pytest.raises(RuntimeError, match="Drops returned 3 results for a batch of 4"):
        engine.map_batches([{"id": k, "value": k} for k in range(8)], Drops, (0,), E(settings))


def test_the_engine_comes_from_params_and_the_environment(monkeypatch):
    monkeypatch.delenv(engine.ENGINE_ENV, raising=False)
    assert engine.engine_settings({}).name == "local"
    assert engine.engine_settings({"engine": {"name": "ray"}}).name == "ray"
    monkeypatch.setenv(engine.ENGINE_ENV, "ray")
    assert engine.engine_settings({}).name == "ray"
    monkeypatch.setenv(engine.ENGINE_ENV, "spark")
    with pytest.raises(ConfigError, match=r"\$FOILFORGE_ENGINE is 'spark'; expected one of local, ray"):
        engine.engine_settings({})


# ---------------------------------------------------------------- the foil stage on the engine

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def coco_sample(tmp_path, monkeypatch):
    """The repository's COCO sample (432 captions of val 2017), ingested as the pipeline does."""
    from foilforge.params import load_params
    from foilforge.pipeline.stages.ingest import ingest

    monkeypatch.chdir(ROOT)  # params.yaml's source roots are relative to the repository
    params = load_params(ROOT / "params.yaml")
    path = tmp_path / "coco.jsonl"
    ingest(params, "coco", path)
    return params, path


def _foil(params, instrument, samples, tmp_path, name):
    from foilforge.pipeline.foiling import foil_file

    out, metrics = tmp_path / f"{name}.jsonl", tmp_path / f"{name}.metrics.json"
    foil_file(params, instrument, samples, out, metrics_path=metrics, cache_dir=tmp_path / f"cache-{name}")
    assert not (tmp_path / f"cache-{name}" / "batches" / "foil" / f"{instrument}.pickle").exists()  # done: dropped
    assert _shard_lines(tmp_path / f"{name}.parquet") == out.read_bytes()   # the same records as Parquet shards
    return out.read_bytes(), json.loads(metrics.read_text())


def test_the_foil_stage_on_ray_writes_the_local_engines_bytes(coco_sample, tmp_path, monkeypatch, local_ray):
    """foil_it on 432 real captions in batches of 50: its corpus pass (the categories each image's captions name)
    spans the batches, the counts of the batches add up, and Ray's 2 actors write the local engine's bytes."""
    params, samples = coco_sample
    whole, whole_stats = _foil(params, "foil_it", samples, tmp_path, "whole")   # batch_size 4096: one batch
    params = {**params, "engine": {"batch_size": 50, "ray": {"num_cpus": 2, "workers": 2}}}
    local, local_stats = _foil(params, "foil_it", samples, tmp_path, "local")
    monkeypatch.setenv(engine.ENGINE_ENV, "ray")
    ray_out, ray_stats = _foil(params, "foil_it", samples, tmp_path, "ray")
    assert ray_out == local and ray_stats == local_stats
    # foil_it's candidates depend on the batch only through the corpus pass: 9 batches give the one batch's foils
    assert local == whole and local_stats == whole_stats
    assert local_stats["counts"]["samples"] == 432 and local_stats["counts"]["records"] > 100
    assert local_stats["skipped"]["no_mention"] > 0   # summed over 9 batches, equal to the one batch's count above


def test_relations_on_ray_scores_in_the_local_engines_batches(coco_sample, tiny_models, tmp_path, monkeypatch,
                                                            local_ray):
    """A model-backed foiler: the Ray actor loads the span ranker once, scores the batches the local engine scores
    and its results are journalled into the shared journal."""
    params, samples = coco_sample
    relations = dict(params["instruments"]["relations"], max_samples=60)
    relations["args"] = dict(relations["args"], ranker={"kind": "causal_lm", "name_or_path": str(tiny_models.gpt2_lm()),
                                                        "device": "cpu", "batch_size": 8})
    params = {**params, "instruments": {**params["instruments"], "relations": relations},
              "engine": {"batch_size": 20, "ray": {"num_cpus": 2, "workers": 1}}}
    local, local_stats = _foil(params, "relations", samples, tmp_path, "local")
    monkeypatch.setenv(engine.ENGINE_ENV, "ray")
    ray_out, ray_stats = _foil(params, "relations", samples, tmp_path, "ray")
    assert ray_out == local and ray_stats == local_stats
    assert local_stats["counts"]["samples"] == 60 and local_stats["slots"] > 40 and local_stats["counts"]["records"]


def test_batch_stats_add_up_and_settings_must_agree():
    from foilforge.foiler import merge_stats

    total = merge_stats({}, {"kept": 2, "dropped": {"a": 1}, "resolver": "rules"})
    merge_stats(total, {"kept": 3, "dropped": {"a": 1, "b": 4}, "resolver": "rules"})
    assert total == {"kept": 5, "dropped": {"a": 2, "b": 4}, "resolver": "rules"}
    with pytest.raises(ValueError, match=r"stats\.resolver: batches disagree \('rules' vs 'neural'\)"):
        merge_stats(total, {"resolver": "neural"})


# ---------------------------------------------------------------- a killed stage resumes from its journal

def test_a_journal_keeps_the_finished_batches_and_cuts_a_torn_tail(tmp_path):
    path = tmp_path / "j.pickle"
    journal = engine.BatchJournal(path, "identity")
    key = journal.key([{"id": 1}])
    journal.put(key, [{"id": 1, "score": 0.5}])
    finished = path.read_bytes()
    journal.put(journal.key([{"id": 2}]), [{"id": 2, "score": 0.25}])
    path.write_bytes(path.read_bytes()[:-5])   # what a kill in the middle of the second entry's write leaves
    again = engine.BatchJournal(path, "identity")
    assert again.get(key) == (True, [{"id": 1, "score": 0.5}])
    assert again.get(again.key([{"id": 2}])) == (False, None)
    assert path.read_bytes() == finished   # the torn entry was cut off: the next one appends after a whole entry
    assert engine.BatchJournal(path, "other identity").get(engine.BatchJournal(path, "other identity").key(
        [{"id": 1}])) == (False, None)
    # a batch run with other torch threads has other bits: another key
    assert again.get(again.key([{"id": 1}], threads=3)) == (False, None)


def test_a_damaged_journal_entry_is_run_again_not_an_error(tmp_path, caplog):
    path = tmp_path / "j.pickle"
    journal = engine.BatchJournal(path, "identity")
    for k in range(3):
        journal.put(journal.key([{"id": k}]), [{"id": k, "score": k / 4}])
    data = bytearray(path.read_bytes())
    first_entry = 8 + int.from_bytes(data[:8], "big")
    data[first_entry + 8 : first_entry + 16] = b"\xff" * 8   # the second entry's pickle, garbled on disk
    path.write_bytes(bytes(data))
    again = engine.BatchJournal(path, "identity")
    assert again.get(again.key([{"id": 0}])) == (True, [{"id": 0, "score": 0.0}])
    assert [again.get(again.key([{"id": k}]))[0] for k in (1, 2)] == [False, False]
    assert path.stat().st_size == first_entry   # cut after the last readable entry: appends follow a whole one
    assert "entry at byte %d unreadable" % first_entry in caplog.text


def test_a_journal_written_under_other_torch_threads_is_not_reused(tmp_path):
    records = [{"id": f"r{k}", "value": k} for k in range(6)]
    path = tmp_path / "j.pickle"
    settings = {"name": "local", "batch_size": 3, "ray": {}}
    calls = []

    class Counted(_doubler()):
        def __call__(self, batch):
            calls.append(len(batch))
            return super().__call__(batch)

    def run(threads):
        journal = engine.BatchJournal(path, "identity")
        return engine.map_batches(records, Counted, (0,), E({**settings, "threads_per_worker": threads}), journal=journal)

    import torch

    stage = torch.get_num_threads()
    try:
        first = run(1)
        assert run(1) == first and calls == [3, 3]   # the second run read both batches from the journal
        assert run(2) == first and calls == [3, 3, 3, 3]   # two threads: both batches scored again
    finally:
        torch.set_num_threads(stage)


RUNNER = '''
import os, signal, sys
from pathlib import Path

from foilforge.filters.grammaticality import Grammaticality

calls, kill_at = Path(os.environ["CALLS"]), int(os.environ.get("KILL_AT", "0"))
score = Grammaticality.score


def counted(self, records, progress=False):
    """Count every model call (one a batch); die, as a preempted node would, at call KILL_AT."""
    with calls.open("a") as handle:
        handle.write(records[0]["id"] + "\\n")
    if kill_at and len(calls.read_text().splitlines()) == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)
    return score(self, records, progress=progress)


Grammaticality.score = counted
from foilforge.pipeline.stages.cli import main

sys.exit(main(sys.argv[1:]))
'''


def test_a_killed_score_stage_rerun_scores_only_what_it_had_not_finished(tiny_models, real_pairs, tmp_path):
    import subprocess
    import sys

    import yaml

    from foilforge.params import load_params

    params = _params(tiny_models, batch_size=5)   # 30 records: 6 batches
    full = load_params(ROOT / "params.yaml")      # the CLI checks the whole file: the repository's, these changed
    full["models"].update(params["models"])
    full["instruments"]["relations"]["filters"]["run"] = ["grammaticality"]
    full["engine"] = params["engine"]
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(full))
    source = tmp_path / "foils.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in real_pairs))
    (tmp_path / "runner.py").write_text(RUNNER)
    calls, out = tmp_path / "calls.txt", tmp_path / "out" / "scored.jsonl"
    command = [sys.executable, str(tmp_path / "runner.py"), "score", "relations", "--params", str(tmp_path / "params.yaml"),
               "--input", str(source), "--output", str(out), "--cache-dir", str(tmp_path / "cache"), "--no-progress"]
    env = {**os.environ, "CALLS": str(calls), "PYTHONPATH": str(ROOT)}

    killed = subprocess.run(command, env={**env, "KILL_AT": "4"}, cwd=tmp_path, capture_output=True)
    assert killed.returncode == -signal.SIGKILL
    # no output where one belongs: the stage streams into `.scored.jsonl.partial` (and the shards' `.partial`
    # directory), which only a finished run renames into place
    assert not out.exists() and not (tmp_path / "out" / "scored.parquet").exists()
    assert {p.name for p in (tmp_path / "out").iterdir()} <= {".scored.jsonl.partial", ".scored.parquet.partial"}
    firsts = [r["id"] for r in real_pairs[::5]]
    assert calls.read_text().splitlines() == firsts[:4]

    subprocess.run(command, env=env, cwd=tmp_path, check=True, capture_output=True)
    # the rerun scored the batch that was in flight and the two never started: 4 + 3 calls for 6 batches
    assert calls.read_text().splitlines() == firsts[:4] + firsts[3:]
    assert not (tmp_path / "cache" / "batches" / "score" / "relations.pickle").exists()
    # the rerun removed what the killed run had left: the outputs and nothing else
    assert {p.name for p in (tmp_path / "out").iterdir()} == {"scored.jsonl", "scored.parquet"}
    assert out.read_bytes() == _score(full, real_pairs, tmp_path, "uninterrupted")


def test_plausibility_language_models_score_on_the_engine(tiny_models, real_pairs, tmp_path, monkeypatch, local_ray):
    """A corpus-level filter's per-text part (plausibility's causal LM) runs batch by batch on the workers; its
    n-gram prior, fitted on all the captions, runs once; both engines write the same bytes."""
    from foilforge.filters.plausibility import Plausibility

    params = {"models": {}, "filters": {"plausibility": {"scorers": {
                  "lm": {"kind": "causal_lm", "name_or_path": str(tiny_models.gpt2_lm()), "device": "cpu", "batch_size": 4},
                  "prior": {"kind": "ngram", "unit": "word", "order": 2, "folds": 2}}}},
              "instruments": {"relations": {"filters": {"run": ["plausibility"]}}},
              "engine": {"batch_size": 7, "ray": {"num_cpus": 2, "workers": 1}}}
    calls = []
    score_batch = Plausibility.score_batch
    monkeypatch.setattr(Plausibility, "score_batch", lambda self, records: calls.append(len(records)) or
                        score_batch(self, records))
    local = _score(params, real_pairs, tmp_path, "local")
    assert calls == [7, 7, 7, 7, 2]   # the LM scored batch by batch, each text once
    monkeypatch.setenv(engine.ENGINE_ENV, "ray")
    assert _score(params, real_pairs, tmp_path, "ray") == local
    rows = [json.loads(line) for line in local.decode().splitlines()]
    scores = rows[0]["filters"]["plausibility"]["scores"]
    assert set(scores) == {"lm", "prior"} and all(isinstance(scores[n]["gap"], float) for n in scores)


def test_a_foil_journal_written_locally_resumes_on_ray(coco_sample, tmp_path, monkeypatch, local_ray):
    """The journal's identity is what decides the candidates, not the engine: a stage killed on one engine and
    rerun on the other takes every finished batch from the journal."""
    from foilforge.pipeline.foiling import foil_file

    params, samples = coco_sample
    # one batch: the local engine then shows the foiler's own progress bar, Ray does not
    params = {**params, "engine": {"batch_size": 500, "ray": {"num_cpus": 2, "workers": 2}}}
    kept = []
    monkeypatch.setattr(engine.BatchJournal, "finish", lambda self: kept.append(self))   # as if killed after the run
    foil_file(params, "foil_it", samples, tmp_path / "local.jsonl", cache_dir=tmp_path / "cache")
    monkeypatch.setenv(engine.ENGINE_ENV, "ray")
    foil_file(params, "foil_it", samples, tmp_path / "ray.jsonl", cache_dir=tmp_path / "cache")
    assert [(j.reused, j.written) for j in kept] == [(0, 1), (1, 0)]
    assert (tmp_path / "ray.jsonl").read_bytes() == (tmp_path / "local.jsonl").read_bytes()


# ------------------------------------------------------------------------------ trained attackers on the engine

ATTACKER_BLOCKS = {"word": {"attacker": "word_ngram.v1", "args": {"ngram_range": [1, 3]}},
                   "char": {"attacker": "char_ngram.v1"}, "edit": {"attacker": "edit_tokens.v1"},
                   "boosted": {"attacker": "boosted_features.v1"}, "bayes": {"attacker": "ngram_bayes.v1"}}
RAY_JOBS = {"name": "ray", "batch_size": 64, "threads_per_worker": None,
            "ray": {"address": None, "num_cpus": 2, "workers": 2, "cpus_per_worker": 1.0, "gpus_per_worker": 0.0}}


@pytest.fixture
def released_pairs(shared):
    """Caption/foil records of VALSE's released relations and counting files (two instruments' worth of pairs)."""
    records = []
    for piece in ("relations", "counting-hard"):
        released = json.loads(shared("data", "valse-dev", f"{piece}.json").read_text())
        records += [{"id": f"{piece}:{key}", "sample_id": f"{piece}:{key}", "caption": r["caption"],
                     "foil": r["foil"]} for key, r in sorted(released.items())[:60]]
    return records


def test_attackers_fit_their_folds_on_ray_with_the_local_bits(released_pairs, local_ray):
    """Every (attacker, partition, fold) fit is one job of the pool; the margins are those of the local run."""
    import numpy as np

    from foilforge.filters.attackers import out_of_fold_margins, out_of_fold_runs, pairs_from_records, run_here

    pairs = pairs_from_records(released_pairs[::2])
    extra = pairs_from_records(released_pairs[1::2])
    local = out_of_fold_runs(ATTACKER_BLOCKS, pairs, 5, [3, 4], extra, runner=run_here)
    on_ray = out_of_fold_runs(ATTACKER_BLOCKS, pairs, 5, [3, 4], extra, runner=engine.job_runner(E(RAY_JOBS)))
    assert sorted(on_ray) == sorted(local) == sorted((name, s) for name in ATTACKER_BLOCKS for s in (3, 4))
    for key, (margins, extra_margins) in local.items():
        assert np.array_equal(on_ray[key][0], margins) and np.array_equal(on_ray[key][1], extra_margins), key
    # and the jobs are the single-attacker function's folds: one implementation of a fold's work
    from foilforge.filters.attackers import build_attacker

    alone = out_of_fold_margins(lambda: build_attacker(ATTACKER_BLOCKS["char"], "t"), pairs, 5, 4, extra)
    assert np.array_equal(alone[0], local["char", 4][0]) and np.array_equal(alone[1], local["char", 4][1])


class _Where:
    """Says which process and which built worker ran each job."""

    def __init__(self, tag):
        self.tag = tag

    def __call__(self, jobs):
        return [(job, self.tag, os.getpid(), id(self)) for job in jobs]


def test_a_job_runner_keeps_its_actors_from_call_to_call(local_ray):
    """The adversarial filter calls its runner once a round: the actors stay (no pool start-up a round), each
    builds the round's worker once from that call's args, and close() gives their CPUs back."""
    with engine.job_runner(E(RAY_JOBS)) as runner:
        first = runner(list(range(16)), _Where, ("a",))
        second = runner(list(range(16, 40)), _Where, ("b",))
        assert [job for job, *_ in first + second] == list(range(40))         # every job once, in order
        assert {tag for _, tag, _, _ in first} == {"a"} and {tag for _, tag, _, _ in second} == {"b"}
        pids = {pid for _, _, pid, _ in first + second}
        assert len(pids) <= 2 and pids != {os.getpid()}                      # the pool's two actors, both calls
        for calls in (first, second):                                          # one worker per actor and call
            assert len({(pid, built) for _, _, pid, built in calls}) == len({pid for _, _, pid, _ in calls})
        actors = list(jobs._live_pool.actors)
    assert jobs._live_pool is None
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(actors[0].run.remote(0, _Where, [ray.put(("c",))], [0]), timeout=60)
    # a Ray Data map after a runner left open: the pool is stopped first, so its CPUs are free for the map's
    runner = engine.job_runner(E(RAY_JOBS))
    runner([1, 2], _Where, ("d",))
    records = [{"id": f"r{k}", "value": k} for k in range(4)]
    assert engine.map_batches(records, _doubler(), (0,), E({**RAY_JOBS, "batch_size": 2})) == \
        [{"id": f"r{k}", "value": 2 * k} for k in range(4)]
    assert jobs._live_pool is None
    # more workers than the local Ray's 2 CPUs hold: 2 actors, and every job still runs
    with engine.job_runner(E({**RAY_JOBS, "ray": {**RAY_JOBS["ray"], "workers": 5}})) as runner:
        assert [job for job, *_ in runner(list(range(12)), _Where, ("e",))] == list(range(12))
        assert len(jobs._live_pool.actors) == 2


def test_a_job_actor_killed_mid_call_is_restarted_and_no_job_is_lost(tmp_path, local_ray):
    sentinel = tmp_path / "killed-once"
    with engine.job_runner(E(RAY_JOBS)) as runner:
        out = runner(list(range(30)), _dies_once(_Where, sentinel), ("x",))
    assert sentinel.exists()
    assert [job for job, *_ in out] == list(range(30))


def test_the_release_gate_and_the_adversarial_filter_give_the_same_figures_on_ray(released_pairs, local_ray):
    from foilforge.filters.adversarial import adversarial_filter
    from foilforge.filters.attackers import certify

    ray_runner = engine.job_runner(E(RAY_JOBS))
    gate = dict(blocks=ATTACKER_BLOCKS, folds=5, seed=101, repeats=2, max_accuracy=0.55)
    assert json.dumps(certify(released_pairs, **gate, runner=ray_runner)) == json.dumps(certify(released_pairs, **gate))
    # multiple choice (BD2BB's shape): each caption among its record's texts and two other captions
    captions = [r["caption"] for r in released_pairs]
    options = [{"id": r["id"], "caption": r["caption"],
                "candidates": [r["caption"], r["foil"], captions[(k + 7) % len(captions)]]}
               for k, r in enumerate(released_pairs)]
    assert json.dumps(certify(options, **gate, runner=ray_runner)) == json.dumps(certify(options, **gate))
    # the adversarial filter: its rounds' fold fits on the pool, the same kept set and report; a third of the
    # foils carry a planted word, so there is something to drop
    scored = [{**r, "foil": r["foil"] + " indeed" if k % 3 == 0 else r["foil"],
               "filters": {"plausibility": {"scores": {"lm": {"caption": float(k % 5) - 2, "foil": 0.0,
                                                               "gap": float(k % 5) - 2}}}}}
              for k, r in enumerate(released_pairs)]
    from foilforge.settings import instrument_settings

    settings = instrument_settings({"attackers": ATTACKER_BLOCKS, "adversarial": {
        "attackers": ["word", "boosted"], "rounds": 2, "slice": 0.1, "max_js_rise": None, "max_iterations": 3}},
        "x").adversarial
    refine_args = dict(scorers=["lm"], bins=1, choose=True, max_js_rise=None, item_mode="direct")
    kept, report = adversarial_filter(scored, settings, refine_args)
    kept_ray, report_ray = adversarial_filter(scored, settings, refine_args, runner=ray_runner)
    assert kept_ray == kept and json.dumps(report_ray, sort_keys=True) == json.dumps(report, sort_keys=True)
    assert len(report["history"]) >= 2   # the filter did fit and drop for more than one round


def test_the_local_engine_reads_the_next_batch_only_after_yielding_the_last():
    """What keeps a streaming stage's memory to one batch: map_stream pulls batch k+1 from its input only once
    batch k's result is out."""
    events = []

    def batches():
        for k in range(3):
            events.append(f"read {k}")
            yield [k, k]

    class Double:
        def __call__(self, part):
            events.append(f"ran {part[0]}")
            return [2 * x for x in part]

    settings = engine.engine_settings({}).model_copy(update={"batch_size": 2})
    for part, result in engine.map_stream(batches(), Double, (), settings):
        events.append(f"got {part[0]}: {result}")
    assert events == ["read 0", "ran 0", "got 0: [0, 0]", "read 1", "ran 1", "got 1: [2, 2]",
                      "read 2", "ran 2", "got 2: [4, 4]"]


def test_a_stage_whose_batches_are_all_in_the_journal_builds_no_worker(tmp_path):
    built = []

    class Worker:
        def __init__(self):
            built.append(1)

        def __call__(self, part):
            return [x + 1 for x in part]

    settings = engine.engine_settings({}).model_copy(update={"batch_size": 2, "threads_per_worker": 1})
    journal = engine.BatchJournal(tmp_path / "j.pickle", "identity")
    first = list(engine.map_stream(iter([[1, 2], [3]]), Worker, (), settings, journal=journal))
    again = list(engine.map_stream(iter([[1, 2], [3]]), Worker, (), settings,
                                   journal=engine.BatchJournal(tmp_path / "j.pickle", "identity")))
    assert first == again == [([1, 2], [2, 3]), ([3], [4])]
    assert built == [1]   # the rerun took both batches from the journal and loaded nothing


def test_the_byte_ranges_of_a_jsonl_files_batches_read_back_the_batches(tmp_path):
    """What Ray's read tasks read (`read_span` over `spans`) is what the stage iterates: blank lines skipped, and
    a record holding U+2028 (a line break to str.splitlines, not to a file read by lines) kept whole."""
    records = [{"id": f"r{k}", "caption": f"a dog{chr(0x2028) if k == 2 else ''} number {k}"} for k in range(7)]
    lines = [json.dumps(r, ensure_ascii=False) for r in records]
    path = tmp_path / "foils.jsonl"
    path.write_text("\n".join(lines[:3]) + "\n\n  \n" + "\n".join(lines[3:]) + "\n", encoding="utf-8")
    source = engine.JsonlBatches(path, 3)
    assert list(source) == [records[0:3], records[3:6], records[6:7]]
    assert [engine.read_span(str(path), start, end) for start, end in source.spans()] == list(source)
    assert engine.JsonlBatches(path, 10).spans() == [(0, path.stat().st_size)]
    (tmp_path / "empty.jsonl").write_text("")
    assert list(engine.JsonlBatches(tmp_path / "empty.jsonl", 3)) == [] == engine.JsonlBatches(tmp_path / "empty.jsonl", 3).spans()


def test_ray_writes_the_local_engines_bytes_resuming_a_local_journal_between_the_batches_it_holds(
        tiny_models, real_pairs, tmp_path, monkeypatch, local_ray):
    """A score stage killed after 2 of its 5 batches (the journal cut after its second entry), rerun on Ray: Ray's
    read tasks read only the 3 batches the journal lacks, from the file by byte range (nothing shipped by value),
    and the output interleaves both in batch order, the local engine's bytes."""
    params = _params(tiny_models, batch_size=7)   # 30 records: 5 batches, the last one short
    source = tmp_path / "foils.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in real_pairs))
    kept = []
    monkeypatch.setattr(engine.BatchJournal, "finish", lambda self: kept.append(self))
    score.run(params, "relations", source, tmp_path / "local.jsonl", cache_dir=tmp_path / "cache")
    journal = tmp_path / "cache" / "batches" / "score" / "relations.pickle"
    data = journal.read_bytes()
    end = 0
    for _ in range(2):
        end += 8 + int.from_bytes(data[end:end + 8], "big")
    journal.write_bytes(data[:end])
    monkeypatch.setenv(engine.ENGINE_ENV, "ray")

    def by_value(*args, **kwargs):
        raise AssertionError("the score stage shipped its batches by value: Ray's read tasks should read the file")

    monkeypatch.setattr(ray_data, "ray_stream", by_value)
    score.run(params, "relations", source, tmp_path / "ray.jsonl", cache_dir=tmp_path / "cache")
    assert [(j.reused, j.written) for j in kept] == [(0, 5), (2, 3)]
    local = (tmp_path / "local.jsonl").read_bytes()
    assert (tmp_path / "ray.jsonl").read_bytes() == local
    assert _shard_lines(tmp_path / "ray.parquet") == local   # the same records as Parquet shards
    rows = [json.loads(line) for line in local.decode().splitlines()]
    assert [r["id"] for r in rows] == [r["id"] for r in real_pairs]
    assert all(isinstance(r["filters"]["grammaticality"]["score"], float) for r in rows)
