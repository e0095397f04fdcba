"""Waiting for an entry's outstanding communication ("drain" in a harness spec): entries that start
asynchronous collectives or point-to-point transfers (`async_op=True`, `isend`, `irecv`,
`batch_isend_irecv`) and keep the handles for a later call (`self.handles.append(work)`) or never wait
on them leave the output half-written when the call returns. With "drain", every `Work` the call starts
is waited for before its outputs are read, as the caller's later `wait()` would. A send whose receive
comes only in a later call would time out on gloo here (and not under NCCL, where `wait()` only orders the
stream): the search then rejects the spec.

Added only to the task modules whose harness spec has "drain", so no other task's text changes; it wraps
the runtime's `_mg_hosted` (the context every call runs in), kept as `_mg_hosted_plain`. A text part
(torch + stdlib only), not imported: it uses the runtime's `_mg_contextlib` and `_mg_dist`."""
_MG_ASYNC = ("all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor",
             "all_to_all", "all_to_all_single", "broadcast", "reduce", "gather", "scatter", "barrier",
             "isend", "irecv", "batch_isend_irecv")
_MG_ILLEGAL = getattr(_mg_dist.distributed_c10d, "_IllegalWork", None)   # an op inside `_coalescing_manager`
_MG_RECORDERS = {}      # id(function) -> its recording wrapper: one per function, so identity checks hold across calls
_MG_PENDING = []        # the Work started by the call in progress
_mg_hosted_plain = _mg_hosted


def _mg_recorder(real):
    """`real` that also keeps the handles it returns (one `Work` or a list of them), each once; not the
    placeholder an op inside `_coalescing_manager` returns (the manager's own handle is kept)."""
    rec = _MG_RECORDERS.get(id(real))
    if rec is None:
        def rec(*a, **k):
            out = real(*a, **k)
            for w in out if isinstance(out, list) else [out]:
                if isinstance(w, _mg_dist.Work) and type(w) is not _MG_ILLEGAL \
                        and not any(w is p for p in _MG_PENDING):
                    _MG_PENDING.append(w)
            return out
        _MG_RECORDERS[id(real)] = rec       # `rec` keeps `real` alive: its id is never reused
    return rec


@_mg_contextlib.contextmanager
def _mg_hosted(entry, namespace=None, device=None):
    """The runtime's `_mg_hosted`, and every `Work` the call starts is waited for when it ends (in the
    order started; one the call already waited for is not waited for again: a gloo send's second `wait()`
    waits for another send), also through names the module imported (`from torch.distributed import
    isend`). The wrapper replaces the function in `torch.distributed` and `distributed_c10d` alike, so
    identity checks (`P2POp`, `batch_isend_irecv`, `_coalescing_manager`) still hold."""
    with _mg_hosted_plain(entry, namespace, device):
        del _MG_PENDING[:]
        swap = {id(f): _mg_recorder(f) for f in (getattr(_mg_dist, name, None) for name in _MG_ASYNC) if f}
        modules = [vars(_mg_dist), vars(_mg_dist.distributed_c10d)]
        places = [(d, k, v) for d in modules + ([namespace] if namespace is not None else [])
                  for k, v in list(d.items()) if id(v) in swap]
        for d, k, v in places:
            d[k] = swap[id(v)]
        try:
            yield
            for work in list(_MG_PENDING):
                if not work.is_completed():
                    work.wait()
        finally:
            del _MG_PENDING[:]
            for d, k, v in places:
                d[k] = v
