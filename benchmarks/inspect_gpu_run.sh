#!/usr/bin/env bash
# One scripted Inspect AI run of mgbench on a lent GPU machine (no network, no pip registry there):
# the task mgbench/mgbench, the offline model mgbench_scripted/reference, 2 samples (level-1 all_reduce,
# bf16), scored by `mgbench eval --backend shared-gpu` (2 ranks sharing one GPU, gloo on CUDA tensors).
#
#   python benchmarks/inspect_bundle.py                  # here, once: .gpuinspect/site312.tar.xz (~13 MiB)
#   benchmarks/inspect_gpu_run.sh OUT_DIR                # there, from the repository root (carry .gpuinspect)
#
# Inspect AI, libcst and datasets come from the bundle (unpacked to $SITE, on PYTHONPATH after the
# checkout); pure-Python packages of the image older than the bundle needs are taken from its _fallback/.
# The entry points of `pip install -e` are not registered there, so the driver imports the task and the
# provider (mgbench.inspect_eval._registry) and calls inspect_ai.eval() on the Task object.
# The dataset is built there with `mgbench build` (generate, validate on gloo at smoke size, publish).
#
# OUT_DIR gets 4 files: run.log (everything printed, verdicts last), results.jsonl (the run folder's
# mgbench eval records), inspect.eval (Inspect's log) and run-folder.tar.gz (solutions/, results.jsonl,
# the build log and the dataset's manifest).
# Knobs (environment): EVAL_BACKEND (shared-gpu; gloo for a CPU dry run), WORLD_SIZE (2), SIZE (smoke),
# TASK_IDS (l1-all_reduce-sum-bw-bf16,l1-all_reduce-max-bw-bf16), TRIALS (3), TIMING (1), BUDGET (0.25),
# MIN_ITERS (10), PYTHON (python3), BUNDLE (.gpuinspect/site312.tar.xz), SITE (/tmp/site312), WORK
# (/tmp/mgbench-inspect-gpu).
set -uo pipefail
OUT=${1:?usage: benchmarks/inspect_gpu_run.sh OUT_DIR}
PY=${PYTHON:-python3}
BUNDLE=${BUNDLE:-.gpuinspect/site312.tar.xz}
SITE=${SITE:-/tmp/site312}
WORK=${WORK:-/tmp/mgbench-inspect-gpu}
export EVAL_BACKEND=${EVAL_BACKEND:-shared-gpu} WORLD_SIZE=${WORLD_SIZE:-2} SIZE=${SIZE:-smoke}
export TASK_IDS=${TASK_IDS:-l1-all_reduce-sum-bw-bf16,l1-all_reduce-max-bw-bf16}
export TRIALS=${TRIALS:-3} TIMING=${TIMING:-1} BUDGET=${BUDGET:-0.25} MIN_ITERS=${MIN_ITERS:-10}
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_DATASETS_DISABLE_PROGRESS_BARS=1 INSPECT_NO_ANSI=1
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd) || exit 2
export OUT WORK

main() {
  local t0=$SECONDS
  echo "== bundle $BUNDLE -> $SITE"
  rm -rf "$SITE" "$WORK" && mkdir -p "$SITE" "$WORK" || return 2
  tar -xJf "$BUNDLE" -C "$SITE" 2>/dev/null \
    || "$PY" -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$BUNDLE" "$SITE" || return 2
  export PYTHONPATH=".:$SITE"
  local fb
  fb=$("$PY" - "$SITE" <<'PYEOF'
# the image's own version of a package the bundle requires, else the bundle's _fallback/<name>; other
# requirements the image's versions miss are printed (no fallback: e.g. pyarrow, numpy)
import importlib.metadata as md, sys
from pathlib import Path
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
site = Path(sys.argv[1])
need = {}
for d in md.distributions(path=[str(site)]):
    for r in d.requires or []:
        req = Requirement(r)
        if req.marker is None or req.marker.evaluate({"extra": ""}):
            need.setdefault(canonicalize_name(req.name), []).append((d.metadata["Name"], req.specifier))
use = []
root = site / "_fallback"
for fb in sorted(root.iterdir()) if root.is_dir() else []:
    try:
        have = md.version(fb.name)
    except md.PackageNotFoundError:
        have = None
    bad = [f"{who} needs {spec}" for who, spec in need.get(fb.name, []) if have is None or not spec.contains(have, True)]
    print(f"  {fb.name} {have}: " + ("; ".join(bad) + " -> bundled fallback" if bad else "ok"), file=sys.stderr)
    if bad:
        use.append(str(fb))
bundled = {canonicalize_name(d.metadata["Name"]) for d in md.distributions(path=[str(site)])}
for name, reqs in sorted(need.items()):
    if name in bundled or (root / name).is_dir() or name == "debugpy":  # debugpy: left out of the bundle
        continue
    try:
        have = md.version(name)
    except md.PackageNotFoundError:
        have = None
    bad = [f"{who} needs {spec}" for who, spec in reqs if have is None or not spec.contains(have, True)]
    if bad:
        print(f"  WARNING {name} {have}: " + "; ".join(bad) + " (no fallback)", file=sys.stderr)
print(":".join(use))
PYEOF
) || return 2
  [ -n "$fb" ] && export PYTHONPATH="$PYTHONPATH:$fb"
  echo "PYTHONPATH=$PYTHONPATH"
  "$PY" -c 'import sys, torch, inspect_ai, libcst, datasets; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.cuda.is_available(), torch.cuda.device_count(), "inspect_ai", inspect_ai.__version__, "libcst", __import__("importlib.metadata").metadata.version("libcst"), "datasets", datasets.__version__)' || return 2
  echo "== mgbench build (all_reduce bf16, gloo, smoke) [$((SECONDS - t0))s]"
  "$PY" -m mgbench.cli build --out "$WORK/out" --family all_reduce --dtype bf16 --level 1 >"$WORK/build.log" 2>&1
  local rc=$?
  tail -4 "$WORK/build.log"
  [ $rc -eq 0 ] || { tail -40 "$WORK/build.log"; return 2; }
  echo "== inspect eval: mgbench_scripted/reference, eval backend $EVAL_BACKEND, world size $WORLD_SIZE, size $SIZE [$((SECONDS - t0))s]"
  "$PY" - <<'PYEOF'
import json, os, shutil, sys
import mgbench.inspect_eval._registry  # noqa: F401  registers the task and the mgbench_scripted provider
from inspect_ai import eval as inspect_eval
from mgbench.inspect_eval.task import mgbench

env = os.environ
work, out = env["WORK"], env["OUT"]
task = mgbench(
    dataset=f"{work}/out/dataset",
    task_ids=env["TASK_IDS"],
    world_size=int(env["WORLD_SIZE"]),
    eval_backend=env["EVAL_BACKEND"],
    size=env["SIZE"] or None,
    trials=int(env["TRIALS"]),
    timing=env["TIMING"] not in ("0", "false", ""),
    timing_budget=float(env["BUDGET"]),
    min_iters=int(env["MIN_ITERS"]),
    max_evals=2,
    out=f"{work}/runs",
)
print("samples:", [s.id for s in task.dataset], "| eval backend:", task.metadata["eval_backend"], flush=True)
[log] = inspect_eval(task, model="mgbench_scripted/reference", log_dir=f"{work}/logs", display="plain",
                     max_samples=2, log_format="eval")
print("inspect status:", log.status, "| error:", log.error.message if log.error else None)
folder = task.metadata["run_folder"]
shutil.copy(log.location, f"{out}/inspect.eval")
if os.path.exists(f"{folder}/results.jsonl"):
    shutil.copy(f"{folder}/results.jsonl", f"{out}/results.jsonl")
shutil.copy(f"{work}/build.log", f"{folder}/build.log")
shutil.copy(f"{work}/out/manifest.jsonl", f"{folder}/manifest.jsonl")
shutil.make_archive(f"{out}/run-folder", "gztar", root_dir=os.path.dirname(folder), base_dir=os.path.basename(folder))
if log.results:
    for s in log.results.scores:
        if s.metrics:
            print("metrics", s.name, s.reducer, {k: round(m.value, 4) for k, m in s.metrics.items()})
print("== verdicts")
ok = True
for s in log.samples or []:
    sc = next(iter(s.scores.values()), None) if s.scores else None
    meta = sc.metadata if sc else {}
    print(json.dumps({
        "task": s.id, "pass": sc.value.get("pass") if sc else None, "explanation": sc.explanation if sc else None,
        "status": meta.get("status"), "backend": meta.get("backend"), "size": meta.get("size"),
        "world_size": meta.get("world_size"), "trials_passed": meta.get("trials_passed"),
        "speedup": meta.get("speedup"), "eval_wall_s": meta.get("eval_wall_s"),
        "error": s.error.message if s.error else None,
    }))
    ok = ok and bool(sc) and sc.value.get("pass") == 1.0
for line in open(f"{out}/results.jsonl") if os.path.exists(f"{out}/results.jsonl") else []:
    r = json.loads(line)
    print("record", r.get("task_id"), r.get("status"), "backend", r.get("backend"), "size", r.get("size"),
          "world_size", r.get("world_size"), "static", (r.get("static") or {}).get("message"),
          "sandbox", r.get("sandbox"), "hardware", r.get("hardware"))
sys.exit(0 if ok and log.status == "success" else 1)
PYEOF
  rc=$?
  echo "== done in $((SECONDS - t0))s, rc $rc; files in $OUT:"; ls -la "$OUT"
  return $rc
}
main 2>&1 | tee "$OUT/run.log"
exit "${PIPESTATUS[0]}"
