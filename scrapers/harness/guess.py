"""First guess of a harness spec from a candidate's parameters: names, annotations, defaults, docstring."""

from __future__ import annotations

import re
from typing import Any

from mgbench.scrapers.harness.cases import case_arg, parametrized
from mgbench.scrapers.harness.evidence_args import bf16, decide, integer_numbers, split_buffers, with_evidence
from mgbench.scrapers.harness.evidence_text import bf16_reason, gather
from mgbench.scrapers.harness.roles import dim_indices, related_ranks, with_role
from mgbench.scrapers.harness.specs import PARAM_GROUPS_RE, optim_arg

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


def initial_spec(cand: dict[str, Any], module_text: str | None = None) -> dict[str, Any]:
    """Required parameters from the repository's evidence first (`cand["evidence"]`: cached call sites and
    tests; the entry's docstring, shape comments and body in `module_text`), then name guesses; a
    parametrized test's first case is taken as given. Parameters with defaults are left to their defaults."""
    return evidence_spec(cand, module_text)[0]


def evidence_spec(
    cand: dict[str, Any], module_text: str | None = None, use_evidence: bool = True
) -> tuple[dict[str, Any], dict[str, str]]:
    """initial_spec, with what the evidence changed per argument name (`tensor->bool by body`, `bf16 by
    path`), for reports and benchmarks/harness_input_evidence.py; without `use_evidence`, name guesses only
    (the spec before the evidence, to compare)."""
    args = []
    seen_kw = False
    cases = parametrized(cand)
    required = [p for p in call_params(cand) if p["kind"] not in ("vararg", "varkw") and p.get("default") is None]
    clues = gather(cand, module_text, [p["name"] for p in required]) if use_evidence else {}
    changed: dict[str, str] = {}
    context = f"{cand['entry']} {(cand.get('provenance') or {}).get('path', '')}"
    ranked: set[str] = set(cases)  # names whose rank the evidence (or a test case) gave: relations keep them
    for p in call_params(cand):
        if p["kind"] in ("vararg", "varkw"):
            if p["kind"] == "vararg":
                seen_kw = True
            continue
        if p.get("default") is not None:
            seen_kw = True
            continue
        a = guess_arg(p["name"], p.get("annotation"), cand.get("docstring"))
        if p["name"] in cases and not _harness_owned(a):
            a = case_arg(p["name"], cases[p["name"]])  # world sizes, ranks and groups stay the harness's
        elif use_evidence:
            a, by_role = with_role(a, context)
            verdict = decide(clues.get(p["name"], []), a["kind"])
            a, why = with_evidence(a, verdict)
            if verdict is not None and (verdict.ndim or verdict.least):
                ranked.add(p["name"])
            if why or by_role:
                changed[p["name"]] = "; ".join(w for w in (by_role, why) if w)
        if p["kind"] == "kwonly" or seen_kw:
            a["keyword"] = True
        args.append(a)
    for n, why in ({**related_ranks(args, ranked), **dim_indices(args, ranked)} if use_evidence else {}).items():
        _also(changed, n, why)
    for n in integer_numbers(args) if use_evidence else []:
        changed[n] = changed.get(n, "tensor->float by body") + "; float->int by dtype"
    for n in split_buffers(args) if use_evidence else []:
        _also(changed, n, "sized by uneven splits")
    reason = bf16_reason(cand, module_text) if use_evidence else None
    if reason:
        given = {n for n, cs in clues.items() if any(c.dtype for c in cs)} | set(cases)
        for n in bf16(args, given):
            _also(changed, n, f"bf16 by {reason}")
    if use_evidence:
        _captured(cand, args, changed)
    spec = {"entry": cand["entry"], "kind": cand["kind"], "args": args, "attrs": [], "n_attr": 8}
    if use_evidence and cand.get("curated"):
        _curated(cand, spec, changed)
    return spec, changed


def _curated(cand: dict[str, Any], spec: dict[str, Any], changed: dict[str, str]) -> None:
    """The registry's reviewed inputs (`cand["curated"]`: scrapers/harness/curated) replace what the
    evidence, the capture and the guesses made of the arguments they name, in place; a named parameter
    with a default is passed by keyword; an autograd.Function's record has no parameters, so its
    arguments come in the entry's order. The entry's object state goes in `attrs`, and its `full_n` in
    `curated_n` (the full size settling verifies instead of the bytes-per-rank rule)."""
    pin = cand["curated"]
    args, have = spec["args"], {a["name"]: i for i, a in enumerate(spec["args"])}
    defaulted = {p["name"] for p in call_params(cand) if p.get("default") is not None or p["kind"] == "kwonly"}
    for name, got in pin.get("args", {}).items():
        why = f"curated {pin['id']}"
        if name in have:
            old = args[have[name]]
            args[have[name]] = {**got, **({"keyword": True} if old.get("keyword") else {})}
            changed[name] = f"{old['kind']}->{got['kind']} by {why}"
        else:
            args.append({**got, **({"keyword": True} if name in defaulted or have else {})})
            changed[name] = why
    spec["attrs"] = [dict(a) for a in pin.get("attrs", {}).values()]
    if pin.get("full_n"):
        spec["curated_n"] = int(pin["full_n"])


def _captured(cand: dict[str, Any], args: list[dict[str, Any]], changed: dict[str, str]) -> None:
    """Arguments a test caller was seen to pass (`cand["captured"]`: scrapers/harness/capture) replace what
    the evidence and the guesses made of them, in place: what a real caller passes comes first."""
    cap = cand.get("captured") or {}
    # process groups, world sizes and ranks stay the harness's (a test's None is no group, its world of 2
    # no world size), as for a parametrized test's cases
    got_args = {k: v for k, v in (cap.get("args") or {}).items() if not _harness_owned(guess_arg(k, None, None))}
    for i, a in enumerate(args):
        got = got_args.get(a["name"])
        if got is not None and a["kind"] != "group":
            args[i] = {**got, **({"keyword": True} if a.get("keyword") else {})}
            changed[a["name"]] = f"{a['kind']}->{got['kind']} by capture {cap.get('caller', '')}"
    if not args and cand["kind"] == "autograd_function":
        # its record has no parameters (the search adds `forward`'s from errors): the captured ones, in
        # call order up to the first that could not be fitted
        for name in cap.get("params") or []:
            if name not in got_args:
                break
            args.append(dict(got_args[name]))
            changed[name] = f"captured by {cap.get('caller', '')}"


def is_captured(why: str, cand: dict[str, Any]) -> bool:
    """Whether `why` (what evidence_spec says changed an argument) is the capture's replacement."""
    caller = (cand.get("captured") or {}).get("caller", "")
    return bool(caller) and (why.endswith(f" by capture {caller}") or why == f"captured by {caller}")


def _harness_owned(a: dict[str, Any]) -> bool:
    return a["kind"] == "group" or a["kind"] == "int" and a["expr"] in ("ws", "0")


def _also(changed: dict[str, str], name: str, why: str) -> None:
    """Add `why` to what the evidence changed of `name`."""
    changed[name] = (changed[name] + "; " if name in changed else "") + why


def param_named(cand: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((p for p in call_params(cand) if p["name"] == name), None)
