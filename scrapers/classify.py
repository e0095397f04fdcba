"""Rule-based labelling of extracted units into the taxonomy: realizations, dims, workload, families.

Realizations come from the resolved calls. Dims and workload come from weighted word rules over
the unit's name (weight 3), class name and path (2 / 1), parameter names (1.5) and identifiers in
its body (1), plus priors from the collectives used. Every label carries its confidence and the
evidence (which words or calls decided it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from mgbench.paths import STAGES_DIR
from mgbench.scrapers.records import CallSite, Classification, Label

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")

DIM_RULES: dict[str, dict[str, float]] = {
    "tensor": {
        "tensor_model_parallel": 3,
        "tensor_parallel": 3,
        "tp": 2,
        "model_parallel": 2,
        "mp": 1,
        "column": 1.5,
        "row": 1,
        "colwise": 2,
        "rowwise": 2,
        "vocab_parallel": 3,
        "tp_group": 3,
        "parallel_linear": 2,
        "column_parallel": 3,
        "row_parallel": 3,
        "tensor_model": 2,
    },
    "sequence": {
        "sequence_parallel": 3,
        "sequence_parallel_enabled": 3,
        "seq_parallel": 3,
        "sp": 1.5,
        "sp_group": 3,
        "scatter_to_sequence": 3,
        "gather_from_sequence": 3,
    },
    "context_ring": {
        "ring": 3,
        "zigzag": 3,
        "stripe": 2,
        "striped": 2,
        "context_parallel": 2,
        "cp": 1.5,
        "cp_group": 2.5,
        "ring_attn": 3,
        "lse": 1,
        "kv_buffer": 1.5,
        "next_k": 1.5,
    },
    "context_ulysses": {
        "ulysses": 4,
        "seq_all_to_all": 3,
        "all2all": 1,
        "a2a": 1.5,
        "scatter_idx": 2,
        "gather_idx": 2,
        "head": 1,
        "heads": 1,
        "usp": 2,
        "seq_a2a": 3,
    },
    "pipeline": {
        "pipeline": 3,
        "pp": 1.5,
        "stage": 2,
        "stages": 2,
        "microbatch": 2,
        "micro_batch": 2,
        "schedule": 1.5,
        "prev_rank": 2,
        "next_rank": 2,
        "send_forward": 3,
        "recv_forward": 3,
        "send_backward": 3,
        "recv_backward": 3,
        "p2p": 1.5,
        "pp_group": 3,
        "1f1b": 3,
    },
    "expert": {
        "expert": 2.5,
        "experts": 2.5,
        "moe": 3,
        "ep": 1.5,
        "dispatch": 2,
        "combine": 1.5,
        "router": 2,
        "routing": 2,
        "capacity": 1.5,
        "ep_group": 3,
        "token_dispatcher": 3,
        "expert_parallel": 3,
        "num_experts": 2,
    },
    "fsdp": {
        "fsdp": 4,
        "zero": 2.5,
        "zero3": 3,
        "stage3": 3,
        "shard": 1.5,
        "sharded": 1.5,
        "flat_param": 3,
        "partition": 1.5,
        "partitioned": 1.5,
        "unshard": 3,
        "offload": 1,
        "param_shard": 2.5,
    },
    "data": {
        "data_parallel": 3,
        "dp": 1.5,
        "ddp": 3,
        "grad": 1,
        "grads": 1.5,
        "gradient": 1,
        "gradients": 1.5,
        "bucket": 2,
        "main_grad": 2,
        "allreduce_grads": 3,
        "reducer": 1.5,
        "dp_group": 3,
        "average": 1,
    },
    "other": {"halo": 3, "fft": 3, "sort": 2, "compress": 2, "ghost": 2, "stencil": 3},
}
WORKLOAD_RULES: dict[str, dict[str, float]] = {
    "gemm": {"matmul": 3, "mm": 2, "bmm": 2, "gemm": 3, "linear": 2, "weight": 1, "einsum": 1.5},
    "gemv": {"gemv": 4, "matvec": 3},
    "mlp": {"mlp": 3, "swiglu": 3, "ffn": 3, "feed_forward": 3, "gelu": 1.5, "silu": 1.5},
    "attention": {
        "attention": 3,
        "attn": 3,
        "flash_attn": 3,
        "softmax": 1.5,
        "lse": 2,
        "causal": 1.5,
        "scaled_dot_product_attention": 3,
        "qkv": 2,
        "kv": 1.5,
        "q": 0.5,
        "k": 0.5,
        "v": 0.5,
    },
    "moe": {"moe": 3, "expert": 2, "experts": 2, "router": 2, "dispatch": 1.5, "combine": 1, "topk": 1},
    "norm": {"layernorm": 3, "layer_norm": 3, "rmsnorm": 3, "rms_norm": 3, "norm": 1.5, "variance": 1.5, "rsqrt": 1.5},
    "embedding": {"embedding": 3, "embed": 2, "vocab": 2, "token_ids": 1.5, "input_ids": 1.5},
    "loss": {"loss": 3, "cross_entropy": 3, "nll": 2, "logits": 1.5, "metric": 2, "accuracy": 2, "entropy": 2},
    "optimizer": {
        "optimizer": 3,
        "adam": 3,
        "adamw": 3,
        "lr": 1.5,
        "momentum": 2,
        "exp_avg": 3,
        "param_groups": 2,
        "clip_grad": 3,
        "grad_norm": 2.5,
        "step": 1,
    },
    "quantize": {"quant": 3, "quantize": 3, "dequant": 3, "fp8": 3, "int8": 2.5, "amax": 2.5, "scale_inv": 2},
    "conv": {"conv": 3, "conv2d": 3, "conv3d": 3, "halo": 2.5, "padding": 1, "stencil": 2},
    "rope": {"rope": 3, "rotary": 3, "freqs": 2, "cos": 1, "sin": 1},
    "sort": {"sort": 3, "argsort": 3},
    "fft": {"fft": 4, "rfft": 4, "irfft": 4},
    "gradient": {
        "grad": 1.5,
        "grads": 2,
        "gradient": 2,
        "gradients": 2,
        "main_grad": 3,
        "bucket": 2,
        "backward": 1,
        "allreduce_grads": 3,
        "reduce_grads": 3,
    },
    "topk": {"topk": 2.5, "top_k": 2.5, "sample": 2, "sampling": 2, "argmax": 2},
}
REALIZATION_DIM_PRIOR = {
    "send_recv": {"pipeline": 1.0, "context_ring": 1.0},
    "all_to_all": {"expert": 1.0, "context_ulysses": 1.0},
    "all_to_all_v": {"expert": 1.5},
}
# a realization that is the same pattern to a family as another (uneven all-to-all as the even one)
SAME_PATTERN_REALIZATION = {"all_to_all_v": "all_to_all"}
SOURCE_WEIGHT = {"name": 3.0, "class": 2.0, "path": 1.0, "param": 1.5, "body": 1.0}
DIM_THRESHOLD, WORKLOAD_THRESHOLD = 2.5, 2.0


def words(identifier: str) -> list[str]:
    """An identifier and its snake/camel parts, lower-cased.

    'RowParallelLinear' -> [rowparallellinear, row, parallel, linear, row_parallel, parallel_linear]."""
    parts = [p.lower() for chunk in identifier.split("_") if chunk for p in _CAMEL.findall(chunk)]
    out = [identifier.lower(), *parts]
    out += [f"{a}_{b}" for a, b in zip(parts, parts[1:])]
    out += [f"{a}_{b}_{c}" for a, b, c in zip(parts, parts[1:], parts[2:])]
    return out


@dataclass
class TaxonomyIds:
    dims: set[str]
    workloads: set[str]
    realizations: set[str]
    families: list[dict] = field(default_factory=list)  # {id, workload, realization, dims}


def load_ids(root: Path | None = None) -> TaxonomyIds:
    """Ids from the taxonomy YAML (read directly, so a family under edit never blocks scraping)."""
    root = root or STAGES_DIR / "taxonomy"

    def ids(name: str, key: str) -> set[str]:
        return {e["id"] for e in yaml.safe_load((root / name).read_text())[key]}

    fams = []
    for p in sorted((root / "families").glob("*.yaml")):
        try:
            entries = yaml.safe_load(p.read_text()).get("families", [])
        except (yaml.YAMLError, AttributeError):
            continue
        for e in entries:
            if isinstance(e, dict) and "id" in e:
                dims = [a["dim"] if isinstance(a, dict) else a for a in e.get("plan", [])]
                fams.append(
                    {
                        "id": e["id"],
                        "workload": e.get("workload"),
                        "realization": list(e.get("realization", [])),
                        "dims": dims,
                    }
                )
    return TaxonomyIds(
        ids("dims.yaml", "dims"), ids("workloads.yaml", "workloads"), ids("realizations.yaml", "realizations"), fams
    )


def _bag(name: str, cls: str | None, path: str, params: list[str], body: str) -> dict[str, tuple[float, str]]:
    """word -> (best weight, where it came from)."""
    bag: dict[str, tuple[float, str]] = {}

    def add(ident: str, src: str) -> None:
        w = SOURCE_WEIGHT[src]
        for word in words(ident):
            if bag.get(word, (0.0, ""))[0] < w:
                bag[word] = (w, f"{src}:{ident}")

    for ident in set(_WORD.findall(body)):
        add(ident, "body")
    for seg in re.split(r"[/.]", path):
        if seg and seg != "py":
            add(seg, "path")
    for p in params:
        add(p, "param")
    if cls:
        add(cls, "class")
    add(name, "name")
    return bag


def _score(rules: dict[str, float], bag: dict[str, tuple[float, str]]) -> tuple[float, list[str]]:
    total, ev = 0.0, []
    for word, weight in rules.items():
        if word in bag:
            w, src = bag[word]
            total += weight * w / 3.0
            ev.append(f"{word}<-{src}")
    return total, ev


def classify(
    name: str, cls: str | None, path: str, params: list[str], body: str, calls: list[CallSite], tax: TaxonomyIds
) -> Classification:
    bag = _bag(name, cls, path, params, body)
    reals: dict[str, Label] = {}
    for c in calls:
        r = c.realization
        if r == "all_to_all" and (
            "output_split_sizes" in c.keywords
            or "input_split_sizes" in c.keywords
            or (c.op.startswith("all_to_all_single") and c.n_args >= 3)
        ):
            r = "all_to_all_v"
        if r is None or r not in tax.realizations:
            continue
        conf = 1.0 if c.certainty == "resolved" else 0.7
        lab = reals.setdefault(r, Label(r, conf, []))
        lab.confidence = max(lab.confidence, conf)
        if len(lab.evidence) < 4:
            lab.evidence.append(f"call:{c.spelling or c.qualname}@{c.line}")
    if "send_recv" in reals and {"halo", "neighbor", "neighbour", "ghost"} & set(bag):
        reals["halo"] = Label("halo", 0.6, ["send_recv+halo words"])
    dims = []
    for dim, rules in DIM_RULES.items():
        s, ev = _score(rules, bag)
        for r in reals:
            prior = REALIZATION_DIM_PRIOR.get(r, {}).get(dim)
            if prior and s > 0:
                s += prior
                ev.append(f"prior:{r}")
        if s >= DIM_THRESHOLD and dim in tax.dims:
            dims.append(Label(dim, round(min(1.0, s / 6.0), 2), ev[:6]))
    dims.sort(key=lambda d: -d.confidence)
    if not dims:
        dims = [Label("collective", 0.5, ["no parallelism words"])]
    wl_scores = []
    for wl, rules in WORKLOAD_RULES.items():
        s, ev = _score(rules, bag)
        fused = [c.fused for c in calls if c.fused == wl]
        if fused:
            s, ev = s + 4, ev + [f"fused:{wl}"]
        if wl in tax.workloads:
            wl_scores.append((s, wl, ev))
    wl_scores.sort(key=lambda t: -t[0])
    best_s, best, ev = wl_scores[0] if wl_scores else (0.0, "collective", [])
    second = wl_scores[1][0] if len(wl_scores) > 1 else 0.0
    if best_s >= WORKLOAD_THRESHOLD:
        workload = Label(best, round(min(1.0, best_s / 6.0) * (0.5 + 0.5 * (best_s - second) / best_s), 2), ev[:6])
    else:
        # no compute words at all: the unit is communication plus reshaping -> a collective workload
        conf = 0.6 if best_s == 0 else 0.4
        workload = Label("collective", conf, ["no workload words" if best_s == 0 else f"weak: {best}"])
    fams = match_families(workload.id, set(reals), {d.id for d in dims}, tax)
    conf = min(
        [workload.confidence, max(d.confidence for d in dims)]
        + ([max(r.confidence for r in reals.values())] if reals else [0.0])
    )
    return Classification(sorted(reals.values(), key=lambda r: r.id), dims, workload, fams, round(conf, 2))


def match_families(workload: str, reals: set[str], dims: set[str], tax: TaxonomyIds) -> list[str]:
    """Families with this workload whose realizations the unit uses, best dim overlap first."""
    norm = SAME_PATTERN_REALIZATION
    have = {norm.get(r, r) for r in reals}
    scored = []
    for f in tax.families:
        need = {norm.get(r, r) for r in f["realization"]}
        if f["workload"] != workload or not need or not need <= have:
            continue
        overlap = len(set(f["dims"]) & dims)
        scored.append((-overlap, -len(need), f["id"]))
    return [fid for *_, fid in sorted(scored)[:5]]


def is_classified(c: Classification | None) -> bool:
    """Counted as classified in the funnel: a realization and a workload at confidence >= 0.5."""
    return bool(c and c.realizations and c.workload.confidence >= 0.5)
