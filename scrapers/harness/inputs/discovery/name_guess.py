"""Name guesses: one argument's kind and shape from its name, annotation and docstring type, with no other
evidence (`guess_arg`; `guess_field` for an attribute or a namespace field), and the parameters a caller
supplies (`call_params`). The search's rules draw every argument they add this way; discovery/guess.py
starts a spec from these, corrected by whatever the repository says (evidence, captures, test cases)."""

from __future__ import annotations

import re
from typing import Any

from mgbench.scrapers.harness.make.specs import PARAM_GROUPS_RE, optim_arg

GROUP_RE = re.compile(r"(^|_)(group|pg|process_group|groups|mesh_group)$|^(tp|dp|pp|cp|ep|sp|mp|world)_?(pg|group)$")
COLLECTION_RE = re.compile(r"(^|_)(pg_collection|process_groups|pgs|grid)$")
NAMESPACE_RE = re.compile(r"^(config|cfg|args|opts|options|conf|hparams)$|_(config|cfg|args)$")
FN_RE = re.compile(r"(^|_)(fn|func|act|activation|act_fn|activation_func)$")
INT_RE = re.compile(
    r"(^|_)(size|sizes?|num|n|dim|len|length|count|numel|world_size|chunks?|k|bucket_size|"
    r"hidden|heads?|seq|batch|tokens|experts?|topk|top_k|block|offset|step)($|_)"
    r"|(^|_)(idx|index|warmup|trials|iters|iterations|repeat|steps|mb|bytes)$"
)
SPLIT_RE = re.compile(r"split|splits|_sizes$|counts$")
LIST_RE = re.compile(r"(tensors|_list|_lists|buffers|grads|params|parameters|chunks|shards|inputs|outputs)$")
REPLICATED_RE = re.compile(r"(^|_)(weight|weights|w|bias|table|embedding|emb|routing|scale)(_|$)")
PATH_RE = re.compile(r"^(tmp_?path|tmpdir)|(^|_)(path|dir|directory|file|filename|folder)$")
PARALLEL_SIZE_RE = re.compile(
    r"^(ep|tp|dp|pp|cp|sp|mp|etp|edp|expert_parallel|tensor_parallel|data_parallel)_"
    r"(size|world_size|degree)$|(^|_)(group_size|num_ranks|nranks|n_ranks)$"
)
NORM_RE = re.compile(r"^(norm_type|max_norm|max_grad_norm|clip_grad|clip_value|grad_clip|clip_norm)$")
OUTPUT_RE = re.compile(r"^(out|output|gathered|result|recv)(_|$)|_(out|output|buffer|buf)$")


def _doc_type(name: str, doc: str | None) -> str:
    """`name (type): ...` or `name: type` from a Google/NumPy style docstring, lowercased."""
    if not doc:
        return ""
    m = re.search(rf"^\s*{re.escape(name)}\s*(?:\(([^)]*)\)|:\s*([\w\[\]., ]+))", doc, re.M)
    return (m.group(1) or m.group(2) or "").lower() if m else ""


def guess_arg(name: str, annotation: str | None, doc: str | None) -> dict[str, Any]:
    """One argument's kind (tensor, tensors, int, splits, float, bool, group, dtype...) and shape."""
    ann = (annotation or "").replace("torch.", "").replace("typing.", "").lower() or _doc_type(name, doc)
    low = name.lower()
    rep = bool(REPLICATED_RE.search(low))
    if PARAM_GROUPS_RE.search(low):  # an optimizer's groups, not process groups
        return optim_arg(name, "param_groups")
    if COLLECTION_RE.search(low) or "processgroupcollection" in ann:
        return {"name": name, "kind": "group", "value": "collection"}
    if NAMESPACE_RE.search(low) or ann.endswith("config") or ann in ("namespace", "argparse.namespace"):
        return {"name": name, "kind": "namespace", "fields": []}
    if (
        (low == "stream" or low.endswith("_stream") or "stream" in ann)
        and ann != "bool"
        and not low.startswith(("use_", "is_", "enable"))
    ):  # the rank's current CUDA stream
        return {"name": name, "kind": "stream"}
    if (
        (low == "device" or low.endswith("_device"))
        and (not ann or "device" in ann or ann == "str")
        and "tensor" not in ann
    ):
        return {"name": name, "kind": "device", **({"value": "str"} if ann == "str" else {})}
    if FN_RE.search(low) or "callable" in ann:
        return {"name": name, "kind": "fn", "value": "gelu"}
    if (low == "event" or low.endswith("_event")) and (not ann or "event" in ann):
        return {"name": name, "kind": "event"}
    if "reduceop" in ann or low in ("op", "reduce_op", "reduction_op", "red_op") and not ann:
        return {"name": name, "kind": "reduce_op", "value": "SUM"}
    if (
        low.endswith("ranks")
        and not PARALLEL_SIZE_RE.search(low)
        and not re.match(r"(num|total|n)_", low)
        and ann in ("", "list[int]", "sequence[int]", "tuple[int, ...]", "optional[list[int]]", "iterable[int]")
    ):
        return {"name": name, "kind": "ranks"}
    if low in ("mpu", "parallel_state") or low.endswith("_mpu"):  # Megatron/DeepSpeed's parallel-state module
        return {"name": name, "kind": "group", "value": "state"}
    if "processgroup" in ann or GROUP_RE.search(low):
        return {"name": name, "kind": "group", "value": "world"}
    if re.search(r"(module|model)\b", ann) and not re.search(r"str|tensor|basemodel", ann):  # `List[nn.Module]`
        chunks = {"chunks": 2} if re.match(r"(list|tuple|sequence|iterable)\b", ann) else {}
        return {"name": name, "kind": "module", "shape": ["n"], "count": "2", "dtype": "float32", **chunks}
    if ("list" in ann or "tuple" in ann or "sequence" in ann or "iterable" in ann) and "tensor" in ann:
        return {"name": name, "kind": "tensors", "count": "ws", "shape": ["n"], "replicated": rep}
    if ("list" in ann or "tuple" in ann) and "int" in ann or SPLIT_RE.search(low):
        return {"name": name, "kind": "splits", "expr": "n"}
    if PATH_RE.search(low) and ("str" in ann or "path" in ann or not ann):
        return {"name": name, "kind": "path", "value": "pathlib" if low.startswith("tmp") or "path" in ann else "str"}
    if "tensor" in ann or "parameter" in ann:
        shape = ["n*ws"] if OUTPUT_RE.search(low) else ["n"]
        return {"name": name, "kind": "tensor", "shape": shape, "dtype": "float32", "replicated": rep}
    if NORM_RE.search(low) and (not ann or "float" in ann or "int" in ann) and "tensor" not in ann:
        return {"name": name, "kind": "float", "value": 2.0 if "type" in low else 1.0}
    if PARALLEL_SIZE_RE.search(low) and ann in ("", "int", "optional[int]"):
        return {"name": name, "kind": "int", "expr": "ws"}
    if ann in ("int", "optional[int]") or (not ann and INT_RE.search(low)):
        if low in ("dim", "axis") or low.endswith("_dim") and "hidden" not in low:
            return {"name": name, "kind": "int", "expr": "0"}
        if "rank" in low or low in ("src", "dst") or re.search(r"(^|_)(idx|index)$", low):
            return {"name": name, "kind": "int", "expr": "0"}
        return {"name": name, "kind": "int", "expr": "ws" if "world" in low else "n"}
    if low in ("src", "dst", "root", "src_rank", "dst_rank", "rank") or low.endswith("_rank"):
        return {"name": name, "kind": "int", "expr": "0"}
    if ann == "float" or low in ("eps", "alpha", "beta", "scale", "epsilon", "p", "lr", "momentum"):
        return {"name": name, "kind": "float", "value": 1e-5 if "eps" in low else 0.5}
    if ann == "bool" or low.startswith(("is_", "use_", "async", "enable", "skip", "return_")):
        return {"name": name, "kind": "bool", "value": False}
    if "dtype" in low or ann == "dtype" or low in ("datatype", "data_type"):
        return {"name": name, "kind": "dtype", "value": "float32"}
    if LIST_RE.search(low):
        return {"name": name, "kind": "tensors", "count": "ws", "shape": ["n"], "replicated": rep}
    return {
        "name": name,
        "kind": "tensor",
        "shape": ["n*ws"] if OUTPUT_RE.search(low) else ["n"],
        "dtype": "float32",
        "replicated": rep,
    }


def guess_field(name: str) -> dict[str, Any]:
    """A guessed attribute/field; tensors of objects are replicated (weights, tables, constants). A config
    entry named by one capital (`config["M"]`, GEMM and attention sizes) is an int."""
    if re.fullmatch(r"[MNKBSHDLE]", name):
        return {"name": name, "kind": "int", "expr": "n"}
    a = guess_arg(name.lstrip("_"), None, None)
    a["name"] = name
    if a["kind"] in ("tensor", "tensors"):
        a["replicated"] = True
    return a


def call_params(cand: dict[str, Any]) -> list[dict[str, Any]]:
    """The parameters a caller supplies (without self/cls/ctx)."""
    ps = list(cand.get("params") or [])
    if cand["kind"] in ("method", "autograd_function") and ps and ps[0]["name"] in ("self", "cls", "ctx"):
        ps = ps[1:]
    return ps


def param_named(cand: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((p for p in call_params(cand) if p["name"] == name), None)
