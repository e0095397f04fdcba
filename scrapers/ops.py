"""The torch.distributed communication API the extractor recognizes, keyed by qualified name.

Every entry maps a fully qualified callable (after import-alias resolution) to an `Op`: the
canonical op name, the taxonomy realization id it implements and which API family it belongs to.
The ops themselves, with the APIs defining them, are the table of mgbench.distops.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mgbench import distops


@dataclass(frozen=True)
class Op:
    name: str  # canonical op name, e.g. "all_gather_into_tensor"
    realization: str | None  # taxonomy realization id (None: synchronization only)
    api: str  # c10d | functional | autograd | ops | symmetric_memory | cuda_nccl | process_group
    payload: str = "tensor"  # tensor | object (pickled Python objects: control plane)
    fused: str | None = None  # compute fused into the op (workload id), e.g. "gemm"


_REAL = {op.name: op.realization for op in distops.OPS}  # op name -> realization id
_OBJECT_OPS = frozenset(op.name for op in distops.OPS if op.payload == distops.OBJECT)

C10D_OPS = distops.names(api=distops.C10D)
FUNCTIONAL_OPS = distops.names(api=distops.FUNCTIONAL)
AUTOGRAD_OPS = distops.names(api=distops.AUTOGRAD)
CUDA_NCCL_OPS = distops.names(api=distops.CUDA_NCCL)
# torch.ops namespaces of the c10d functional ops (op name -> canonical name)
OPS_NAMESPACES = ("torch.ops._c10d_functional", "torch.ops.c10d_functional", "torch.ops._c10d_functional_autograd")
OPS_OPS = {raw: op.name for op in distops.OPS for raw in op.functional_ops}
# symmetric-memory fused ops: name -> (canonical realization, fused workload)
SYMM_MEM_OPS = {op.name: (op.realization, op.fused) for op in distops.select(api=distops.SYMMETRIC_MEMORY)}
# ProcessGroup methods (c10d C++ API spelling) -> canonical op
PG_METHODS = {m: op.name for op in distops.OPS for m in op.pg_methods}
# PG method names that no other common library uses on a receiver called *group / *pg
PG_DISTINCT = {
    "allreduce",
    "allreduce_coalesced",
    "allgather",
    "_allgather_base",
    "allgather_coalesced",
    "allgather_into_tensor_coalesced",
    "_reduce_scatter_base",
    "reduce_scatter_tensor_coalesced",
    "alltoall_base",
    "recv_anysource",
}
# calls whose result is a ProcessGroup
PG_FACTORIES = {
    "torch.distributed.new_group",
    "torch.distributed.distributed_c10d.new_group",
    "torch.distributed.distributed_c10d._get_default_group",
    "torch.distributed.group.WORLD",
    "torch.distributed.GroupMember.WORLD",
    "torch.distributed.distributed_c10d.GroupMember.WORLD",
    "torch.distributed.distributed_c10d.group.WORLD",
    "torch.distributed.ProcessGroup",
    "torch.distributed.distributed_c10d.ProcessGroup",
    "torch.distributed.new_subgroups",
    "torch.distributed.distributed_c10d._new_group_with_tag",
    "torch.distributed.ProcessGroupGloo",
    "torch.distributed.ProcessGroupNCCL",
}
PG_TYPES = {
    "torch.distributed.ProcessGroup",
    "torch.distributed.distributed_c10d.ProcessGroup",
    "torch._C._distributed_c10d.ProcessGroup",
    "torch.distributed.ProcessGroupNCCL",
    "torch.distributed.ProcessGroupGloo",
}


def _table() -> dict[str, Op]:
    t: dict[str, Op] = {}

    def add(prefix: str, names: tuple[str, ...], api: str) -> None:
        for n in names:
            t[f"{prefix}.{n}"] = Op(n, _REAL[n], api, "object" if n in _OBJECT_OPS else "tensor")

    add("torch.distributed", C10D_OPS, "c10d")
    add("torch.distributed.distributed_c10d", C10D_OPS, "c10d")
    add("torch.distributed._functional_collectives", FUNCTIONAL_OPS, "functional")
    add("torch.distributed.nn.functional", AUTOGRAD_OPS, "autograd")
    add("torch.distributed.nn", AUTOGRAD_OPS, "autograd")
    add("torch.cuda.nccl", CUDA_NCCL_OPS, "cuda_nccl")
    for ns in OPS_NAMESPACES:
        for raw, canon in OPS_OPS.items():
            op = Op(canon, _REAL[canon], "ops")
            t[f"{ns}.{raw}"] = op
            t[f"{ns}.{raw}.default"] = op
    for mod in ("torch.distributed._symmetric_memory", "torch.ops.symm_mem"):
        for n, (real, fused) in SYMM_MEM_OPS.items():
            t[f"{mod}.{n}"] = Op(n, real, "symmetric_memory", fused=fused)
            t[f"{mod}.{n}.default"] = Op(n, real, "symmetric_memory", fused=fused)
    return t


OPS: dict[str, Op] = _table()


def pg_op(method: str) -> Op:
    canon = PG_METHODS[method]
    return Op(canon, _REAL[canon], "process_group")


def lookup(qualname: str, facades: dict[str, str] | None = None) -> tuple[Op | None, str]:
    """The Op for a qualified name, trying facade modules (e.g. deepspeed.comm -> torch.distributed).

    Returns (op, qualified name in torch terms)."""
    op = OPS.get(qualname)
    if op is not None:
        return op, qualname
    for facade, target in (facades or {}).items():
        if qualname.startswith(facade + "."):
            mapped = target + qualname[len(facade) :]
            if mapped in OPS:
                return OPS[mapped], mapped
    return None, qualname


_OP_WORDS = sorted({*C10D_OPS, *FUNCTIONAL_OPS, *PG_METHODS, *SYMM_MEM_OPS, "_c10d_functional"}, key=len, reverse=True)


def prefilter_patterns(facades: dict[str, str] | None = None) -> tuple[re.Pattern[bytes], re.Pattern[bytes]]:
    """(anchor, op) byte regexes: a file is parsed only if both match somewhere in it.

    The anchor proves torch.distributed (or a facade of it) can be in scope; the op regex that a
    communication op name occurs. Both are supersets of what resolution accepts."""
    anchors = [
        rb"torch\.distributed",
        rb"from\s+torch\s+import[^\n]*\bdistributed",
        rb"c10d",
        rb"import\s+torch\s+as\b",
        rb"torch\.cuda\.nccl",
        rb"from\s+torch\.cuda\s+import[^\n]*\bnccl",
        rb"torch\.ops\.symm_mem",
        rb"ProcessGroup",
    ]
    for facade in facades or {}:
        head, _, tail = facade.rpartition(".")
        anchors.append(re.escape(facade.encode()))
        if head:
            anchors.append(
                rb"from\s+" + re.escape(head.encode()) + rb"\s+import[^\n]*\b" + re.escape(tail.encode()) + rb"\b"
            )
    anchor = re.compile(b"|".join(anchors))
    w = rb"(?:" + b"|".join(re.escape(w.encode()) for w in _OP_WORDS) + rb")\b"
    # an op word used as an attribute, called, imported, or alone on a line (parenthesized imports);
    # a mention in prose ("all_reduce the grads") does not count
    ops = re.compile(
        rb"\."
        + w
        + rb"|\b"
        + w
        + rb"\s*\(|import[^\n]*\b"
        + w
        + rb"|^[ \t]*"
        + w
        + rb"(?:[ \t]+as[ \t]+\w+)?[ \t]*,?[ \t]*(?:#[^\n]*)?$",
        re.M,
    )
    return anchor, ops
