"""The torch.distributed communication ops mgbench knows: one table, every stage takes its subset from it.

Each `DistOp` is one op name with the facts the stages ask about: its kind (a collective, a point-to-point
transfer or a barrier), the taxonomy realization of the data it moves, the APIs that define a callable of
that name, the form of its buffers (one tensor, a list of per-rank tensors, coalesced tensor lists,
pickled objects, a batch of P2POp descriptors), its spellings as ProcessGroup methods and dispatcher ops,
and nccl-tests' bus-bandwidth factor. The stages derive their sets with `names(...)` (or a comprehension
over OPS): the extractor's API tables (scrapers/ops.py), the calls the harness probe counts, the calls the
static checks forbid, the calls the roofline counts, the level-4 gate's dispatcher-op kinds.

Standard library only: validation imports it on GPU machines that have torch and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

# kinds
COLLECTIVE = "collective"
P2P = "p2p"
BARRIER = "barrier"  # synchronization only: moves no data
KINDS = (COLLECTIVE, P2P, BARRIER)

# the APIs that define callables: torch.distributed (and its distributed_c10d module), the functional
# collectives (torch.distributed._functional_collectives), the autograd-aware ones
# (torch.distributed.nn.functional), torch.cuda.nccl, and the symmetric-memory ops (torch.ops.symm_mem)
C10D = "c10d"
FUNCTIONAL = "functional"
AUTOGRAD = "autograd"
CUDA_NCCL = "cuda_nccl"
SYMMETRIC_MEMORY = "symmetric_memory"
APIS = (C10D, FUNCTIONAL, AUTOGRAD, CUDA_NCCL, SYMMETRIC_MEMORY)

# buffer forms
TENSOR = "tensor"  # one tensor per rank (in place or a flat output: all_gather_into_tensor, all_to_all_single)
LIST = "list"  # Python lists of per-rank tensors (all_gather, reduce_scatter, all_to_all, gather, scatter)
COALESCED = "coalesced"  # a list of tensors, each communicated as its own op in one launch
OBJECT = "object"  # pickled Python objects (the control plane)
BATCH = "batch"  # a list of P2POp descriptors (batch_isend_irecv)
DESCRIPTOR = "descriptor"  # not a call: P2POp describes one transfer for batch_isend_irecv
NONE = "none"  # no buffer (barriers)
FORMS = (TENSOR, LIST, COALESCED, OBJECT, BATCH, DESCRIPTOR, NONE)


def _ring(n: int) -> float:
    return (n - 1) / n


def _ring_twice(n: int) -> float:
    return 2 * ((n - 1) / n)


def _one(n: int) -> float:
    return 1.0


@dataclass(frozen=True)
class DistOp:
    name: str  # the op's name in its APIs, e.g. "all_gather_into_tensor"
    kind: str  # COLLECTIVE | P2P | BARRIER
    realization: str | None  # taxonomy realization id of the data it moves (None: barriers)
    apis: frozenset[str]  # the APIs defining a callable of this name (APIS)
    form: str = TENSOR  # FORMS
    async_of: str | None = None  # the blocking op this is the always-asynchronous variant of (isend: send)
    fused: str | None = None  # compute fused into the op (workload id), e.g. "gemm"
    pg_methods: tuple[str, ...] = ()  # ProcessGroup methods (the c10d C++ API's spelling) that are this op
    c10d_ops: tuple[str, ...] = ()  # dispatcher ops of the c10d namespace (torch.ops.c10d.<name>)
    functional_ops: tuple[str, ...] = ()  # dispatcher ops of the _c10d_functional namespace
    # nccl-tests' bus bandwidth = algorithm bandwidth x bus_factor(n) at n ranks
    bus_factor: Callable[[int], float] | None = None

    @property
    def payload(self) -> str:
        """'object' for pickled Python objects, else 'tensor'."""
        return OBJECT if self.form == OBJECT else TENSOR

    @property
    def is_call(self) -> bool:
        """Whether the name is a function call (P2POp is a class describing one)."""
        return self.form != DESCRIPTOR

    @property
    def moves_data(self) -> bool:
        return self.realization is not None


def _op(name: str, kind: str, realization: str | None, apis: Iterable[str], **kw) -> DistOp:
    return DistOp(name, kind, realization, frozenset(apis), **kw)


_ALL = (C10D, FUNCTIONAL, AUTOGRAD, CUDA_NCCL)

OPS: tuple[DistOp, ...] = (
    # all-reduce
    _op(
        "all_reduce",
        COLLECTIVE,
        "all_reduce",
        _ALL,
        pg_methods=("allreduce",),
        c10d_ops=("allreduce_",),
        functional_ops=("all_reduce", "all_reduce_"),
        bus_factor=_ring_twice,
    ),
    _op(
        "all_reduce_coalesced",
        COLLECTIVE,
        "all_reduce",
        (C10D, FUNCTIONAL),
        form=COALESCED,
        pg_methods=("allreduce_coalesced",),
        c10d_ops=("allreduce_coalesced_",),
        functional_ops=("all_reduce_coalesced",),
    ),
    _op("all_reduce_inplace", COLLECTIVE, "all_reduce", (FUNCTIONAL,)),
    # all-gather
    _op(
        "all_gather",
        COLLECTIVE,
        "all_gather",
        (C10D, AUTOGRAD, CUDA_NCCL),
        form=LIST,
        pg_methods=("allgather",),
        c10d_ops=("allgather_",),
        bus_factor=_ring,
    ),
    _op(
        "all_gather_into_tensor",
        COLLECTIVE,
        "all_gather",
        (C10D,),
        functional_ops=("all_gather_into_tensor", "all_gather_into_tensor_out"),
        bus_factor=_ring,
    ),
    _op(
        "_all_gather_base",
        COLLECTIVE,
        "all_gather",
        (C10D,),
        pg_methods=("_allgather_base",),
        c10d_ops=("_allgather_base_",),
        bus_factor=_ring,
    ),
    _op(
        "all_gather_coalesced",
        COLLECTIVE,
        "all_gather",
        (C10D,),
        form=COALESCED,
        pg_methods=("allgather_coalesced",),
        c10d_ops=("allgather_coalesced_",),
    ),
    _op(
        "all_gather_into_tensor_coalesced",
        COLLECTIVE,
        "all_gather",
        (FUNCTIONAL,),
        form=COALESCED,
        pg_methods=("allgather_into_tensor_coalesced",),
        c10d_ops=("allgather_into_tensor_coalesced_",),
        functional_ops=("all_gather_into_tensor_coalesced",),
    ),
    _op("all_gather_object", COLLECTIVE, "all_gather", (C10D,), form=OBJECT),
    _op("all_gather_tensor", COLLECTIVE, "all_gather", (FUNCTIONAL,)),
    _op("all_gather_tensor_autograd", COLLECTIVE, "all_gather", (FUNCTIONAL,)),
    # reduce-scatter
    _op(
        "reduce_scatter",
        COLLECTIVE,
        "reduce_scatter",
        (C10D, AUTOGRAD, CUDA_NCCL),
        form=LIST,
        pg_methods=("reduce_scatter",),
        c10d_ops=("reduce_scatter_",),
        bus_factor=_ring,
    ),
    _op(
        "reduce_scatter_tensor",
        COLLECTIVE,
        "reduce_scatter",
        (C10D, FUNCTIONAL),
        functional_ops=("reduce_scatter_tensor",),
        bus_factor=_ring,
    ),
    _op(
        "_reduce_scatter_base",
        COLLECTIVE,
        "reduce_scatter",
        (C10D,),
        pg_methods=("_reduce_scatter_base",),
        c10d_ops=("_reduce_scatter_base_",),
        bus_factor=_ring,
    ),
    _op(
        "reduce_scatter_tensor_coalesced",
        COLLECTIVE,
        "reduce_scatter",
        (FUNCTIONAL,),
        form=COALESCED,
        pg_methods=("reduce_scatter_tensor_coalesced",),
        c10d_ops=("reduce_scatter_tensor_coalesced_",),
        functional_ops=("reduce_scatter_tensor_coalesced",),
    ),
    _op("reduce_scatter_tensor_autograd", COLLECTIVE, "reduce_scatter", (FUNCTIONAL,)),
    # all-to-all
    _op(
        "all_to_all",
        COLLECTIVE,
        "all_to_all",
        (C10D, AUTOGRAD),
        form=LIST,
        pg_methods=("alltoall",),
        c10d_ops=("alltoall_",),
        bus_factor=_ring,
    ),
    _op(
        "all_to_all_single",
        COLLECTIVE,
        "all_to_all",
        (C10D, FUNCTIONAL, AUTOGRAD),
        pg_methods=("alltoall_base",),
        c10d_ops=("alltoall_base_",),
        functional_ops=("all_to_all_single",),
        bus_factor=_ring,
    ),
    _op("all_to_all_single_autograd", COLLECTIVE, "all_to_all", (FUNCTIONAL,)),
    # rooted collectives
    _op(
        "broadcast",
        COLLECTIVE,
        "broadcast",
        _ALL,
        pg_methods=("broadcast",),
        c10d_ops=("broadcast_",),
        functional_ops=("broadcast", "broadcast_"),
        bus_factor=_one,
    ),
    _op("broadcast_object_list", COLLECTIVE, "broadcast", (C10D,), form=OBJECT),
    _op(
        "reduce",
        COLLECTIVE,
        "reduce",
        (C10D, AUTOGRAD, CUDA_NCCL),
        pg_methods=("reduce",),
        c10d_ops=("reduce_",),
        bus_factor=_one,
    ),
    _op("scatter", COLLECTIVE, "scatter", (C10D, AUTOGRAD), form=LIST, pg_methods=("scatter",), c10d_ops=("scatter_",)),
    _op("scatter_object_list", COLLECTIVE, "scatter", (C10D,), form=OBJECT),
    _op("gather", COLLECTIVE, "gather", (C10D, AUTOGRAD), form=LIST, pg_methods=("gather",), c10d_ops=("gather_",)),
    _op("gather_object", COLLECTIVE, "gather", (C10D,), form=OBJECT),
    # point-to-point
    _op("send", P2P, "send_recv", (C10D,), pg_methods=("send",), c10d_ops=("send",)),
    _op(
        "recv",
        P2P,
        "send_recv",
        (C10D,),
        pg_methods=("recv", "recv_anysource"),
        c10d_ops=("recv_", "recv_any_source_"),
    ),
    _op("isend", P2P, "send_recv", (C10D,), async_of="send"),
    _op("irecv", P2P, "send_recv", (C10D,), async_of="recv"),
    _op("batch_isend_irecv", P2P, "send_recv", (C10D,), form=BATCH),
    _op("P2POp", P2P, "send_recv", (C10D,), form=DESCRIPTOR),
    _op("send_object_list", P2P, "send_recv", (C10D,), form=OBJECT),
    _op("recv_object_list", P2P, "send_recv", (C10D,), form=OBJECT),
    _op("permute_tensor", P2P, "send_recv", (FUNCTIONAL,)),
    # barriers
    _op("barrier", BARRIER, None, (C10D,), form=NONE, pg_methods=("barrier",), c10d_ops=("barrier",)),
    _op("monitored_barrier", BARRIER, None, (C10D,), form=NONE, c10d_ops=("monitored_barrier_",)),
    # symmetric-memory ops (torch.distributed._symmetric_memory, torch.ops.symm_mem)
    _op("fused_all_gather_matmul", COLLECTIVE, "all_gather", (SYMMETRIC_MEMORY,), fused="gemm"),
    _op("fused_all_gather_scaled_matmul", COLLECTIVE, "all_gather", (SYMMETRIC_MEMORY,), fused="gemm"),
    _op("fused_matmul_reduce_scatter", COLLECTIVE, "reduce_scatter", (SYMMETRIC_MEMORY,), fused="gemm"),
    _op("fused_scaled_matmul_reduce_scatter", COLLECTIVE, "reduce_scatter", (SYMMETRIC_MEMORY,), fused="gemm"),
    _op("one_shot_all_reduce", COLLECTIVE, "all_reduce", (SYMMETRIC_MEMORY,)),
    _op("two_shot_all_reduce_", COLLECTIVE, "all_reduce", (SYMMETRIC_MEMORY,)),
    _op("multimem_all_reduce_", COLLECTIVE, "all_reduce", (SYMMETRIC_MEMORY,)),
    _op("multimem_one_shot_all_reduce", COLLECTIVE, "all_reduce", (SYMMETRIC_MEMORY,)),
    _op("multimem_all_gather_out", COLLECTIVE, "all_gather", (SYMMETRIC_MEMORY,)),
    _op("all_to_all_vdev", COLLECTIVE, "all_to_all_v", (SYMMETRIC_MEMORY,)),
)

BY_NAME: dict[str, DistOp] = {op.name: op for op in OPS}


def select(
    *,
    api: str | None = None,
    kinds: Iterable[str] | None = None,
    forms: Iterable[str] | None = None,
    where: Callable[[DistOp], bool] | None = None,
) -> tuple[DistOp, ...]:
    """The ops (in table order) defined by `api`, of one of `kinds`, in one of `forms`, and passing `where`."""
    kinds, forms = (frozenset(x) if x is not None else None for x in (kinds, forms))
    return tuple(
        op
        for op in OPS
        if (api is None or api in op.apis)
        and (kinds is None or op.kind in kinds)
        and (forms is None or op.form in forms)
        and (where is None or where(op))
    )


def names(**query) -> tuple[str, ...]:
    """The names of `select(**query)`, in table order."""
    return tuple(op.name for op in select(**query))


# ---- named queries ------------------------------------------------------------------------------------


def tensor_calls(api: str = C10D) -> tuple[str, ...]:
    """Calls of `api` that move tensors between ranks: collectives and point-to-point in every tensor form
    (batches of P2POps included; pickled objects, barriers and the P2POp class left out)."""
    return names(api=api, kinds=(COLLECTIVE, P2P), where=lambda op: op.is_call and op.payload == TENSOR)


def single_buffer_calls(kind: str, api: str = C10D) -> tuple[str, ...]:
    """Calls of `api` of `kind` whose bytes follow from their own tensor arguments: one tensor or one list of
    per-rank tensors per call (coalesced lists, batches, objects and barriers left out)."""
    return names(api=api, kinds=(kind,), forms=(TENSOR, LIST))
