#!/usr/bin/env bash
# One time-boxed call of the GPU pass that produces results/TAG (see results/h200x2/NOTES.md).
#
#   benchmarks/gpu_pass.sh RESULTS_IN OUT_DIR BUDGET_S [PHASES]
#
# Copies RESULTS_IN (the committed results/TAG) to OUT_DIR/TAG, then runs PHASES in order, each
# resuming from what OUT_DIR/TAG already holds, and starts no phase (nor task) after BUDGET_S
# seconds. Phases (default: suite,retry,l4x,examples,vendor,l4v,compile):
#   suite     every runnable task at world size 2: full-size check, eager + null timing, roofline
#   retry     the failed ones again
#   vendor    symmetric-memory fused baselines where PyTorch ships one
#   compile   torch.compile of every bf16 reference
#   l4x       level 4 (L4 folder, default .l4): gloo-vs-NCCL fingerprints (scrape crosscheck)
#   l4v       level 4: full-size validation on NCCL
#   examples  examples/solutions/run_gpu.py
# Copy OUT_DIR/TAG back over results/TAG after each call; a re-run goes on where it stopped.
set -u
IN=$1 OUT=$2 BUDGET=$3 PHASES=${4:-suite,retry,l4x,examples,vendor,l4v,compile}
TAG=${TAG:-h200x2} L4=${L4:-.l4} TIMEOUT=${TIMEOUT:-60} L4_TIMEOUT=${L4_TIMEOUT:-30}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONPATH=.
T0=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
R=$OUT/$TAG
mkdir -p "$R/level4"
[ -f "$R/hardware.json" ] || cp -r "$IN/." "$R/"     # a kept OUT_DIR/TAG is newer than RESULTS_IN
[ -f mgbench-out/manifest.jsonl ] || python3 -m mgbench.cli generate --out mgbench-out | tail -1
# validate phases stop starting tasks at the budget; `timeout` also ends one that runs far past it
V=(python3 -m mgbench.cli validate --out mgbench-out --backend nccl --size full --timing
   --hardware-tag "$TAG" --results-dir "$R" --timeout "$TIMEOUT")
v() { timeout "$(( $1 + 2 * TIMEOUT + 60 ))" "${V[@]}" --max-seconds "$1" "${@:2}"; }
for ph in ${PHASES//,/ }; do
  L=$(left)
  if [ "$L" -lt 30 ]; then echo "== $ph: not started ($L s left)"; continue; fi
  echo "== $ph ($L s left)"
  case $ph in
    suite)   v "$L" ;;
    retry)   v "$L" --retry-failed ;;
    vendor)  v "$L" --baselines vendor ;;
    compile) v "$L" --baselines compile --dtype bf16 ;;
    l4x)     timeout "$L" python3 -m mgbench.cli scrape crosscheck --out "$L4" --backend nccl \
               --timeout "$L4_TIMEOUT" --results "$R/level4/l4-crosscheck-nccl.jsonl" | tail -40 ;;
    l4v)     timeout "$L" python3 -m mgbench.cli validate --out "$L4" --backend nccl --size full \
               --timeout "$L4_TIMEOUT" --results "$R/level4/l4-validation-nccl.jsonl" | tail -40 ;;
    examples) E=$(mktemp -d)   # its generated tasks stay there: $OUT gets back a limited file count
              timeout "$L" python3 examples/solutions/run_gpu.py --out "$E" --timeout 120 \
                --resume "$R/examples-eval.jsonl" | tail -60
              cat "$E/results.jsonl" >> "$R/examples-eval.jsonl" 2>/dev/null; cp "$E/solved.png" "$OUT/" ;;
    *) echo "unknown phase $ph" ;;
  esac
done
echo "== done in $(( $(date +%s) - T0 )) s"
