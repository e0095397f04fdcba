"""Waiting for an entry's outstanding communication ("drain" in a harness spec): entries that start
asynchronous collectives or point-to-point transfers (`async_op=True`, `isend`, `irecv`,
`batch_isend_irecv`) and keep the handles for a later call (`self.handles.append(work)`) or never wait
on them leave the output half-written when the call returns. With "drain", every `Work` the call starts
is waited for before its outputs are read, as the caller's later `wait()` would.

Added (below the marker line) only to the task modules whose harness spec has "drain", so no other
task's text changes; it wraps the runtime's `_mg_hosted` (the context every call runs in). torch +
stdlib only."""
import contextlib as _mg_contextlib

import torch.distributed as _mg_dist


def _mg_hosted(entry, namespace=None):      # the runtime's, rebound below the marker
    return _mg_contextlib.nullcontext()


from_runtime = None  # marker line: everything above is dropped when inlined
_MG_ASYNC = ("all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor",
             "all_to_all", "all_to_all_single", "broadcast", "reduce", "gather", "scatter", "barrier",
             "isend", "irecv", "batch_isend_irecv")
_mg_hosted_plain = _mg_hosted


def _mg_recording(real, pending):
    """`real` that also keeps the handles it returns (one `Work`, or a list of them), each once: a gloo
    send's second `wait()` would wait for another send (`batch_isend_irecv` returns its ops' handles)."""
    def call(*a, **k):
        out = real(*a, **k)
        for w in out if isinstance(out, list) else [out]:
            if isinstance(w, _mg_dist.Work) and not any(w is p for p in pending):
                pending.append(w)
        return out
    return call


@_mg_contextlib.contextmanager
def _mg_hosted(entry, namespace=None):
    """The runtime's `_mg_hosted`, and every `Work` the call starts is waited for when it ends (in the
    order started), also through names the module imported (`from torch.distributed import isend`). The
    wrapper replaces the function in `torch.distributed` and `distributed_c10d` alike, so identity checks
    (`P2POp`, `batch_isend_irecv`) still hold."""
    with _mg_hosted_plain(entry, namespace):
        pending = []
        real = {name: getattr(_mg_dist, name) for name in _MG_ASYNC if hasattr(_mg_dist, name)}
        swap = {id(f): _mg_recording(f, pending) for f in real.values()}
        modules = [vars(_mg_dist), vars(_mg_dist.distributed_c10d)]     # both: `P2POp` checks `op is isend`
        places = [(d, k, v) for d in modules + ([namespace] if namespace is not None else [])
                  for k, v in list(d.items()) if id(v) in swap]
        for d, k, v in places:
            d[k] = swap[id(v)]
        try:
            yield
            for work in pending:
                work.wait()
        finally:
            for d, k, v in places:
                d[k] = v
