"""Build a compressed site-packages bundle of Inspect AI for the lent GPU machines (no network, no pip
registry there), so that one scripted Inspect run of mgbench can run on them (benchmarks/inspect_gpu_run.sh).

    python benchmarks/inspect_bundle.py                          # -> .gpuinspect/site312.tar.xz (CPython 3.12)
    python benchmarks/inspect_bundle.py --python-version 3.11    # -> .gpuinspect/site311.tar.xz (a local dry run)

What goes in: inspect_ai==0.3.285, libcst==1.9.0 (mgbench eval's static checks) and datasets==5.2.0 (the
Inspect task reads its samples from a dataset folder; `mgbench build` writes one), with every dependency the
GPU image lacks (GPU_HAS: the package list the lent machines' image 'cuda' published, read 2026-11-17).
The dependency walk stops at packages the image has (their own needs are met there). Left out, as a scripted
eval needs none of them: debugpy, inspect_ai's web viewer assets (_view/dist) and sandbox-tool binaries
(binaries/), and botocore's AWS service models (inspect_ai imports botocore, aiobotocore and s3fs at module
level, so their code stays; only an S3 client would load the models). Pure-Python packages the image has but
whose version there is unknown (anyio, rich, click, ...) ride along under _fallback/<name>/; the run script
puts one on PYTHONPATH only when the machine's own version misses what the bundle requires.

Resolution uses `pip install --dry-run --report` for the target Python and manylinux x86_64 wheels only;
/tmp/whl312 (if present) serves as --find-links. Prints the bundle's size.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]
TOP = ["inspect_ai==0.3.285", "libcst==1.9.0", "datasets==5.2.0"]
PLATFORMS = [
    "manylinux2014_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_24_x86_64",
    "manylinux_2_12_x86_64",
    "manylinux2010_x86_64",
    "manylinux1_x86_64",
    "manylinux_2_5_x86_64",
]
# what a scripted eval needs none of: the debugger (inspect_ai imports botocore, aiobotocore and s3fs at module
# level, so the S3 stack stays, less botocore's AWS service models, which only an S3 client loads)
STRIP_DISTS = {"debugpy"}
# web viewer assets; sandbox-tool executables; botocore's per-service models (data/<service>/, the JSON
# files at data/ itself stay)
STRIP_PATHS = ["inspect_ai/_view/dist", "inspect_ai/binaries", "botocore/data/*/"]
FALLBACK_MAX_BYTES = 1_500_000  # pure-Python wheels of GPU-image packages carried as fallbacks
# the GPU image's packages (as the lent machines' documentation listed them, read 2026-11-17)
GPU_HAS = set(
    map(
        canonicalize_name,
        """absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build
certifi charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core
cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock flatbuffers
flax fonttools formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize
hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib
kiwisolver lazy-loader lightning lightning-utilities linear-operator lineax llvmlite lxml markdown markdown-it-py
markupsafe matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind
narwhals networkx ninja numba numba-cuda numpy numpyro nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc
nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse
nvidia-cusparselt-cu13 nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir
onnxruntime onnxscript opencv-python-headless optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging
pandas pathspec patsy peft pillow pip pluggy portalocker prometheus-client propcache protobuf psutil pyarrow pybind11
py-cpuinfo pygments pyparsing pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock
pytest-timeout pytest-xdist python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu safetensors
scikit-build-core scikit-image scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools shellingham
simplejson six sortedcontainers statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore
threadpoolctl tifffile tiktoken timm tokenizers toolz torch torchaudio torchdiffeq torch-geometric torchmetrics
torchvision tqdm transformers treescope triton typer typing-extensions typing-inspect urllib3 uvloop wadler-lindig
werkzeug wheel wrapt xarray xxhash yarl zipp""".split(),
    )
)


def pip_target_args(pyver: str) -> list[str]:
    args = ["--only-binary=:all:", "--python-version", pyver, "--implementation", "cp"]
    for p in PLATFORMS:
        args += ["--platform", p]
    if Path("/tmp/whl312").is_dir() and pyver == "3.12":
        args += ["--find-links", "/tmp/whl312"]
    return args


def resolve(pyver: str, work: Path) -> list[dict]:
    """The full install set of TOP for `pyver` (pip's installation report)."""
    report = work / "report.json"
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--dry-run", "--ignore-installed", "--no-warn-script-location"]
    cmd += ["--target", str(work / "dry"), "--report", str(report), *pip_target_args(pyver), *TOP]
    subprocess.run(cmd, check=True, stderr=subprocess.DEVNULL)
    return json.loads(report.read_text())["install"]


def walk(items: list[dict], pyver: str) -> tuple[list[dict], list[dict]]:
    """(to bundle, fallbacks): the dependency closure of TOP that stops at the GPU image's packages and at
    STRIP_DISTS; fallbacks are the image's pure-Python packages that bundled ones require with a version."""
    env = default_environment()
    env.update(python_version=pyver, python_full_version=pyver + ".0", sys_platform="linux", platform_machine="x86_64")
    env.update(platform_system="Linux", implementation_name="cpython", platform_python_implementation="CPython")
    by_name = {canonicalize_name(i["metadata"]["name"]): i for i in items}
    todo = [canonicalize_name(Requirement(t).name) for t in TOP]
    seen: set[str] = set()
    fallback: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for r in by_name[name]["metadata"].get("requires_dist", []) or []:
            req = Requirement(r)
            if req.marker and not req.marker.evaluate({**env, "extra": ""}):
                continue
            dep = canonicalize_name(req.name)
            if dep in STRIP_DISTS:
                continue
            if dep in GPU_HAS:
                if str(req.specifier):
                    fallback.add(dep)
                continue
            todo.append(dep)
    fb = []
    for name in sorted(fallback):
        item = by_name.get(name)
        url = item["download_info"]["url"] if item else ""
        if url.endswith("-none-any.whl"):
            fb.append(item)
    return [by_name[n] for n in sorted(seen)], fb


def download(items: list[dict], pyver: str, dest: Path) -> list[Path]:
    pins = [f"{i['metadata']['name']}=={i['metadata']['version']}" for i in items]
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(dest), *pip_target_args(pyver), *pins]
    subprocess.run(cmd, check=True, stderr=subprocess.DEVNULL)
    files = {canonicalize_name(p.name.split("-")[0]): p for p in dest.glob("*.whl")}
    return [files[canonicalize_name(i["metadata"]["name"])] for i in items]


def install(wheels: list[Path], pyver: str, target: Path) -> None:
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--no-compile"]
    cmd += ["--no-warn-script-location", "--target", str(target), *pip_target_args(pyver), *map(str, wheels)]
    subprocess.run(cmd, check=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python-version", default="3.12")
    ap.add_argument("--out", help="bundle file (default: .gpuinspect/site<XY>.tar.xz)")
    args = ap.parse_args()
    pyver = args.python_version
    out = Path(args.out or REPO / ".gpuinspect" / f"site{pyver.replace('.', '')}.tar.xz")
    out.parent.mkdir(parents=True, exist_ok=True)
    exclude = REPO / ".git" / "info" / "exclude"
    if out.parent == REPO / ".gpuinspect" and "/.gpuinspect/" not in exclude.read_text().split():
        with exclude.open("a") as f:
            f.write("/.gpuinspect/\n")
    with tempfile.TemporaryDirectory(prefix="inspect-bundle-") as tmp:
        work = Path(tmp)
        bundle, fallback = walk(resolve(pyver, work), pyver)
        fallback = [i for i in download(fallback, pyver, work / "fbwhl") if i.stat().st_size <= FALLBACK_MAX_BYTES]
        site = work / "site"
        install(download(bundle, pyver, work / "whl"), pyver, site)
        for wheel in fallback:
            install([wheel], pyver, site / "_fallback" / canonicalize_name(wheel.name.split("-")[0]))
        for pattern in STRIP_PATHS:
            for path in site.glob(pattern.rstrip("/")):
                if path.is_dir():
                    shutil.rmtree(path)
        for junk in [*site.rglob("__pycache__"), site / "bin"]:
            shutil.rmtree(junk, ignore_errors=True)
        with tarfile.open(out, "w:xz", preset=9) as tar:
            tar.add(site, arcname=".")
        pins = " ".join(f"{i['metadata']['name']}=={i['metadata']['version']}" for i in bundle)
        print(f"bundled ({len(bundle)}): {pins}")
        print("fallbacks (" + str(len(fallback)) + "): " + " ".join(w.name.split("-")[0] for w in fallback))
        print(f"unpacked: {sum(p.stat().st_size for p in site.rglob('*') if p.is_file()) / 2**20:.1f} MiB")
    print(f"{out}: {out.stat().st_size / 2**20:.1f} MiB ({out.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
