"""benchmarks/bench_coco_build.py's params for another machine: every model where the run says, the LM swapped
for a local directory everywhere params.yaml names the wheel, a filter left out of run lists and keep rules."""

from pathlib import Path

from benchmarks.bench_coco_build import CUDA_TUNING, SMOLLM2, coco_instruments, coco_params


def _model_blocks(value, path=""):
    if isinstance(value, dict):
        if "name_or_path" in value:
            yield path, value
        for key, item in value.items():
            yield from _model_blocks(item, f"{path}.{key}")
    elif isinstance(value, list):
        for k, item in enumerate(value):
            yield from _model_blocks(item, f"{path}[{k}]")


def test_every_model_block_runs_on_the_device_asked_for():
    # `auto` would put a CPU run's plausibility LM on the GPU of a machine that has one
    params = coco_params(10, 5, "cpu", {}, Path("/nowhere"), 16, 1)
    blocks = dict(_model_blocks(params))
    assert ".filters.plausibility.scorers.smollm2" in blocks
    assert ".instruments.relations.args.ranker" in blocks
    assert {path: block["device"] for path, block in blocks.items() if block.get("device") != "cpu"} == {}


def test_the_lm_directory_replaces_the_wheel_everywhere():
    params = coco_params(10, 5, "cpu", {}, Path("/nowhere"), 16, 1, lm="/models/smollm2")
    paths = {path: block["name_or_path"] for path, block in _model_blocks(params)}
    assert SMOLLM2 not in paths.values()
    assert paths[".instruments.relations.args.ranker"] == "/models/smollm2"
    assert paths[".models.length_tokenizer"] == "/models/smollm2"
    assert paths[".filters.plausibility.scorers.smollm2"] == "/models/smollm2"


def test_a_filter_left_out_leaves_run_lists_and_keep_rules():
    params = coco_params(10, 5, "cpu", {}, Path("/nowhere"), 16, 1, without=("grammaticality",))
    for name in coco_instruments(params):
        filters = params["instruments"][name]["filters"]
        assert "grammaticality" not in filters["run"] and "grammaticality" not in filters["keep"]
        assert "plausibility" in filters["run"]
    untouched = coco_params(10, 5, "cpu", {}, Path("/nowhere"), 16, 1)
    assert "grammaticality" in untouched["instruments"]["relations"]["filters"]["run"]


def test_cuda_tuning_reaches_the_span_ranker_and_the_plausibility_lm_only():
    params = coco_params(10, 5, "cuda", {}, Path("/nowhere"), 16, 1, cuda_tuned=True)
    scorer = params["instruments"]["relations"]["args"]["ranker"]
    assert (scorer["dtype"], scorer["max_batch_tokens"]) == (CUDA_TUNING["dtype"], CUDA_TUNING["max_batch_tokens"])
    assert params["instruments"]["relations"]["args"]["score_chunk"] == CUDA_TUNING["score_chunk"]
    lm = params["filters"]["plausibility"]["scorers"]["smollm2"]
    assert (lm["dtype"], lm["batch_size"]) == (CUDA_TUNING["dtype"], CUDA_TUNING["batch_size"])
    assert "dtype" not in params["filters"]["plausibility"]["scorers"]["caption_ngram"]
    assert coco_instruments(params, ("relations",)) == ["relations"]


def test_warm_rates_leave_out_each_workers_first_batch(tmp_path):
    from benchmarks.bench_ray_scaling import steady_rates

    # worker 11: first batch 10 s (model loading), then 4 rows in 2 s and 4 in 2 s -> 2 rows/s once warm
    (tmp_path / "11.batches").write_text("ProposeWorker 0 10 4\nProposeWorker 10 12 4\nProposeWorker 12 14 4\n"
                                         "ScoreWorker 20 21 8\n")
    # worker 12: first batch, then 6 rows in 1 s -> 6 rows/s; listed out of order in its file
    (tmp_path / "12.batches").write_text("ProposeWorker 9 10 6\nProposeWorker 0 9 6\n")
    rates = steady_rates(tmp_path)
    assert rates["ProposeWorker"] == {"workers": 2, "batches": 5, "warm_rows": 14, "rows_per_s": 8.0}
    # one batch a worker: nothing warm to measure
    assert rates["ScoreWorker"] == {"workers": 1, "batches": 1, "warm_rows": 0, "rows_per_s": 0.0}
