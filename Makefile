# The two commands of the README: `make repro` and `make test`. Both set up .venv first.
PYTHON ?= python3
# TORCH_INDEX=https://download.pytorch.org/whl/cpu: the CPU build of torch (PyPI's Linux wheel is the CUDA one)
TORCH_INDEX ?=
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.foilforge-installed
WORDNET := $(VENV)/nltk_data/corpora/wordnet/lexnames
LINKGRAMMAR := $(VENV)/.foilforge-linkgrammar
GGUF := $(VENV)/.foilforge-gguf
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: setup system-deps lock repro coco-val test benchmarks clean-venv

setup: system-deps $(STAMP) $(WORDNET) $(LINKGRAMMAR) $(GGUF)

system-deps:
	@bash scripts/install-system-deps.sh

# requirements.lock (make lock) is every distribution pip resolves from requirements.txt; uv installs it as it is,
# linking from its cache (docs/install.md). TORCH_INDEX: torch and torchvision from that index, no CUDA wheels
LOCKED_UV := $(shell grep -m1 '^uv==' requirements.lock)
TORCH_FREE := '^(torch|torchvision|triton|nvidia-[a-z0-9-]+|cuda-[a-z-]+)=='
UV_INSTALL := $(BIN)/uv pip install -q --python $(BIN)/python --no-deps
$(STAMP): requirements.txt requirements.lock requirements-nodeps.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q $(LOCKED_UV)
	$(if $(TORCH_INDEX),$(UV_INSTALL) torch==2.14.1 torchvision==0.29.1 --index-url $(TORCH_INDEX))
	$(if $(TORCH_INDEX),grep -Ev $(TORCH_FREE) requirements.lock,cat requirements.lock) > $(VENV)/requirements.lock
	$(UV_INSTALL) --compile-bytecode -r $(VENV)/requirements.lock
	$(UV_INSTALL) -r requirements-nodeps.txt
	$(UV_INSTALL) --no-build-isolation -e .
	touch $@

# requirements.lock from requirements.txt: pip resolves it in a fresh venv, scripts/lock_requirements.py pins the result
lock:
	rm -rf .venv-lock
	$(PYTHON) -m venv .venv-lock
	.venv-lock/bin/python -m pip install -q --upgrade pip
	.venv-lock/bin/python -m pip install -q -r requirements.txt
	$(PYTHON) scripts/lock_requirements.py .venv-lock/bin/python
	rm -rf .venv-lock

$(WORDNET): $(STAMP) scripts/setup_wordnet.py
	$(BIN)/python scripts/setup_wordnet.py $(VENV)/nltk_data

$(LINKGRAMMAR): $(STAMP) scripts/link_linkgrammar.py
	$(BIN)/python scripts/link_linkgrammar.py
	touch $@

# the packaged SmolLM2's GGUF file converted once here, so a build's first model load does not (scripts/convert_gguf.py)
$(GGUF): $(STAMP) scripts/convert_gguf.py
	$(BIN)/python scripts/convert_gguf.py
	touch $@

# ENGINE=ray: foil, score and the trained attackers on a local Ray (params.yaml engine.ray; same outputs, so DVC's cache holds)
ENGINE ?=
export FOILFORGE_ENGINE := $(ENGINE)
# foilforge repro runs stages side by side, one worker a core (at most 4); on Ray one at a time, Ray spreads its work
REPRO_JOBS := $(if $(filter ray,$(ENGINE)),--jobs 1,)

# each text's model pass, kept for every stage and run that asks for it (foilforge/pass_store.py); not a DVC output.
# FOILFORGE_SCORE_CACHE=off: none. Set for repro only: the tests score afresh
repro: export FOILFORGE_SCORE_CACHE ?= $(abspath .foilforge-cache/scores)

# PROFILE=paper: the paper's models (profiles/paper.yaml) as a DVC experiment (`dvc exp show`)
PROFILE ?=

repro: setup
ifeq ($(PROFILE),)
	$(BIN)/foilforge check-params
	$(BIN)/foilforge repro $(REPRO_JOBS)
else
	$(BIN)/foilforge check-params --profile $(PROFILE)
	$(BIN)/dvc exp run $$($(BIN)/foilforge profile $(PROFILE))
endif
	$(BIN)/foilforge summary

# COCO=<the folder holding captions_val2017.json>: every COCO instrument on the first caption of each of COCO val
# 2017's 5,000 images (profiles/coco-val.yaml, written into params.yaml). Killed, the same command goes on
COCO ?=
coco-val: export FOILFORGE_SCORE_CACHE ?= $(abspath .foilforge-cache/scores)
coco-val: setup
	$(BIN)/foilforge repro $(REPRO_JOBS) --profile coco-val $(if $(COCO),-S sources.coco.root=$(abspath $(COCO)))
	$(BIN)/foilforge summary

# worksteal: an idle worker takes queued tests from the other, so a few long ones (Ray, SmolLM2) do not end the run alone
test: setup
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -n auto --dist worksteal

benchmarks: setup
	$(BIN)/python -m benchmarks.suite

clean-venv:
	rm -rf $(VENV)
