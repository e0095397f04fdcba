#!/usr/bin/env bash
# One time-boxed call of the full-size CUDA correctness pass with ranks sharing one GPU (issue #45),
# resuming from the records already in results/cuda-shared-*/ and in OUT_DIR.
#
#   benchmarks/cuda_shared_pass.sh OUT_DIR BUDGET_S [PHASES]
#
# Runs PHASES in order from the repository root; each appends to OUT_DIR/<phase>.jsonl and starts
# no item after the call's BUDGET_S seconds (an item in flight may run its timeout past it); a phase whose
# reserve (its items' timeout) leaves less than 30 s is not started. Exits 1 if a phase's command failed.
# After the call, before the next one, file what came back (the next call counts the filed records as done;
# publish reads the passes, failures stay apart; suites outcomes and the log go to suites/ and logs/):
#   python3 benchmarks/file_call.py CALL_DIR results/cuda-shared-TAG --tag callN
# Every phase's output goes to the one log,
# OUT_DIR/call.log. A lent machine's call returns eight files at most: a records file per records phase (ws2, big,
# l4, ws4, ws8), two of heldout's (verdicts and triggers), one of suites, and the log; PHASES that would leave
# more than eight are refused before anything runs (exit 2): run suites in a call of its own.
# Phases (default: gputests,ws2,big,heldout,l4,ws4,ws8):
#   gputests tests/test_shared_gpu.py and test_eval_snapshot.py on the machine (their CUDA tests: the pool on
#            one GPU, the oracle parts by CUDA IPC, the judge's output snapshot allocating nothing on the
#            device); if it fails, the rest of the call hands oracle parts through host memory
#            (MGBENCH_ORACLE_HANDOFF=host) and says so. The log has its outcome; no records file
#   ws2      world size 2: what is left (unchecked or failed), two pools, long timeout
#   big      the attention tasks (BIG below), world sizes 2, 4 and 8, one at a time: their float64 oracles, run
#            in parts on a GPU (validation/oracle_parts.py), still peak at ~22 GiB a rank at ws 4
#   heldout  benchmarks/heldout_eval.py on shared-gpu, world size 2, size HELDOUT_SIZE (default smoke; resumes
#            from OUT_DIR/heldout.jsonl, which HELDOUT_SEED, an earlier call's filed heldout.jsonl on the same
#            judge, starts if given, with heldout-fired.jsonl beside it, whose conditional cheats' triggers fired;
#            file_call appends only the lines the folder lacks)
#   l4       the level-4 tasks (L4, default .gpul4), world sizes 2 and 4
#   ws4      the templated tasks at world size 4
#   ws8      the other templated tasks at world size 8 (those that do not fit fail out of memory, alone)
#   suites   the adversarial test suites judged on BACKEND (tests/test_eval_cheats.py, test_eval_judge_separation.py;
#            MGBENCH_TEST_EVAL_BACKEND): the CUDA-only cheats run where a GPU is. Each test's outcome and a
#            failure's reason go to OUT_DIR/suites.jsonl as it ends (benchmarks/pytest_outcomes.py); tests that
#            passed or skipped in results/cuda-shared-*/suites/*.jsonl on the same judge and backend are not run
#            again. SUITE_SHARDS (default 3) pytest processes run side by side, each every N-th test left
#            (MGBENCH_SHARD); on an H100 one test takes 10 to 19 s, so the suites would take two calls one by one
# Environment: TASKS (templated tasks, default the repository's .gpuout), L4 (default .gpul4), HELDOUT_SIZE,
# HELDOUT_JOBS (held-out evals side by side, heldout_eval.py --jobs; default 1),
# GPUTESTS (the gputests phase's test files, default the two above), SUITES (the suites phase's),
# SUITE_SHARDS, JOBS4 (ws4's pools, default 4), JOBS8 (ws8's, default 2), GUESS_GIB (default 5);
# BACKEND=gloo SIZE=smoke make a CPU dry run of the phases (not a GPU cost).
set -u -f
OUT=$(realpath -m "$1") BUDGET=$2 PHASES=${3:-gputests,ws2,big,heldout,l4,ws4,ws8}
declare -A FILES_OF=([ws2]=1 [big]=1 [l4]=1 [ws4]=1 [ws8]=1 [heldout]=2 [suites]=1)  # files a phase leaves in OUT
files=1  # call.log
for ph in $(tr , '\n' <<< "$PHASES" | sort -u); do files=$(( files + ${FILES_OF[$ph]:-0} )); done  # a phase once
if [ "$files" -gt 8 ]; then
  echo "PHASES $PHASES leave $files files, more than the 8 a lent machine's call returns: split them over two calls" >&2
  exit 2
fi
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TASKS=$(realpath -m "${TASKS:-$ROOT/.gpuout}") L4=$(realpath -m "${L4:-$ROOT/.gpul4}")
JOBS4=${JOBS4:-4} JOBS8=${JOBS8:-2} GUESS_GIB=${GUESS_GIB:-5} GPUTESTS=${GPUTESTS:-tests/test_shared_gpu.py tests/test_eval_snapshot.py}
SUITE_SHARDS=${SUITE_SHARDS:-3} SUITES=${SUITES:-tests/test_eval_cheats.py tests/test_eval_judge_separation.py}
BACKEND=${BACKEND:-shared-gpu} SIZE=${SIZE:-full}
# the adversarial candidates at smoke size: each is judged over every phase (timing included), which at full
# size on host-staged gloo took more than 200 s for one honest candidate (pass 8)
HELDOUT_SIZE=${HELDOUT_SIZE:-smoke} HELDOUT_JOBS=${HELDOUT_JOBS:-1}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 PYTHONPATH=.
# The attention tasks, the globs of validation/oracle_parts.py's table: whole, their float64 oracles would need
# ~128 GiB (a 64 GiB score matrix and its softmax).
BIG=$(cd "$ROOT" && python3 -c 'from mgbench.validation.oracle_parts import SPLITS; print(" ".join(SPLITS))') || exit 1
T0=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
mkdir -p "$OUT"
LOG=$OUT/call.log
cd "$ROOT" || exit 1
failed=()
only=() skip=()
for g in $BIG; do only+=(--only "$g"); skip+=(--skip "$g"); done
echo "GPU: $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | head -1)"
declare -A RESERVE=([gputests]=10 [ws2]=130 [big]=70 [heldout]=10 [l4]=50 [ws4]=70 [ws8]=70 [suites]=10)  # s kept for items in flight
pass() {  # pass PHASE BUDGET_S ARGS...: one cuda_correctness_pass.py run of the phase
  local ph=$1 b=$2
  python3 benchmarks/cuda_correctness_pass.py --results "$OUT/$ph.jsonl" --done 'results/cuda-shared-*/*.jsonl' \
    --backend "$BACKEND" --size "$SIZE" --budget-s "$b" "${@:3}" >> "$LOG" 2>&1
  local rc=$?
  tail -3 "$LOG"
  return $rc
}
for ph in ${PHASES//,/ }; do
  L=$(( $(left) - ${RESERVE[$ph]:-0} ))
  if [ "$L" -lt 30 ]; then echo "== $ph: not started ($(left) s left)"; continue; fi
  echo "== $ph ($(left) s left)"
  echo "== $ph ($(left) s left)" >> "$LOG"
  case $ph in
    ws2)     pass "$ph" "$L" --out "$TASKS" "${skip[@]}" --world-size 2 --retry-failed --jobs 2 --timeout 120 ;;
    big)     pass "$ph" "$L" --out "$TASKS" "${only[@]}" --world-size 2 --world-size 4 --world-size 8 \
               --retry-failed --jobs 1 --timeout 60 ;;
    heldout) # an earlier call's verdicts (HELDOUT_SEED) are not judged again; its triggers file comes with them
             FIRED_SEED=
             if [ -n "${HELDOUT_SEED:-}" ]; then  # <stem>-fired.jsonl beside it, as heldout_eval.fired_path names it
               seed_name=$(basename "$HELDOUT_SEED")
               FIRED_SEED=$(dirname "$HELDOUT_SEED")/${seed_name%.*}-fired.jsonl
             fi
             if [ -n "$FIRED_SEED" ] && [ -e "$FIRED_SEED" ] && [ ! -e "$OUT/heldout-fired.jsonl" ]; then
               cp "$FIRED_SEED" "$OUT/heldout-fired.jsonl"
             fi
             if [ -n "${HELDOUT_SEED:-}" ] && [ ! -e "$OUT/heldout.jsonl" ] && ! cp "$HELDOUT_SEED" "$OUT/heldout.jsonl"; then
               echo "HELDOUT_SEED=$HELDOUT_SEED: cannot be read; the held-out candidates were not judged" | tee -a "$LOG"
               false
             else
               timeout "$L" python3 benchmarks/heldout_eval.py --backend "$BACKEND" --size "$HELDOUT_SIZE" --world-size 2 \
                 --tasks "$TASKS" --results "$OUT/heldout.jsonl" --jobs "$HELDOUT_JOBS" >> "$LOG" 2>&1; rc=$?; tail -3 "$LOG"
               (exit $(( rc == 124 ? 0 : rc )))
             fi ;;  # 124: cut off by the budget, resumed by the next call
    gputests) timeout "$L" python3 -m pytest -q -rfs -p no:cacheprovider $GPUTESTS >> "$LOG" 2>&1
             rc=$?; tail -3 "$LOG"
             if [ $rc -ne 0 ]; then
               export MGBENCH_ORACLE_HANDOFF=host
               echo "gputests failed: oracle parts go through host memory for the rest of this call" | tee -a "$LOG"
             fi
             (exit $rc) ;;
    suites)  rc=0 pids=()
             for ((k = 0; k < SUITE_SHARDS; k++)); do  # shards side by side, each its own log for a while
               MGBENCH_TEST_EVAL_BACKEND=$BACKEND MGBENCH_OUTCOMES="$OUT/suites.jsonl" MGBENCH_SHARD="$k/$SUITE_SHARDS" \
                 MGBENCH_OUTCOMES_DONE="results/cuda-shared-*/suites/*.jsonl" timeout "$L" python3 -m pytest -q -rfs \
                 -p no:cacheprovider -p benchmarks.pytest_outcomes $SUITES > "$OUT/.suites-$k.log" 2>&1 &
               pids+=($!)
             done
             for ((k = 0; k < SUITE_SHARDS; k++)); do
               wait "${pids[k]}"; r=$?
               { echo "-- shard $k/$SUITE_SHARDS (exit $r)"; cat "$OUT/.suites-$k.log"; } >> "$LOG"
               rm -f "$OUT/.suites-$k.log"
               [ $r -eq 0 ] || [ $r -eq 124 ] || [ $r -eq 5 ] || rc=$r  # 5: no test left for this shard
             done
             tail -3 "$LOG"
             (exit $rc) ;;
    l4)      pass "$ph" "$L" --out "$L4" --world-size 2 --world-size 4 --retry-failed --jobs 5 --timeout 45 ;;
    ws4)     pass "$ph" "$L" --out "$TASKS" "${skip[@]}" --world-size 4 --retry-failed --jobs "$JOBS4" \
               --timeout 60 --guess-gib "$GUESS_GIB" ;;
    ws8)     pass "$ph" "$L" --out "$TASKS" "${skip[@]}" --world-size 8 --retry-failed --jobs "$JOBS8" \
               --timeout 60 --guess-gib "$GUESS_GIB" ;;
    *)       echo "unknown phase $ph"; false ;;
  esac || failed+=("$ph")
done
echo "== done in $(( $(date +%s) - T0 )) s${failed[*]:+; failed: ${failed[*]}}"
[ ${#failed[@]} -eq 0 ]
