"""Task-side runtime, part 3: CUDA placement emulated on CPU-only ranks. Inlined verbatim after
part 2 (`repo_globals.py`) into every level-4 task (torch + stdlib only). A text part, not imported: it
uses part 1's names (`_mg_contextlib`, `_mg_torch`, `_MgTorchFunctionMode`).

Mined code often places its tensors on the GPU (`x.cuda()`, `device="cuda"`, `torch.cuda.set_device`,
streams and events) even when the computation itself runs anywhere. On a rank without CUDA (the gloo
harness search, CPU validation), `_mg_cpu_cuda()` maps that placement to the CPU for the duration of
the entry's call: device arguments naming CUDA become the CPU, `Tensor.cuda` and `pin_memory` return
the tensor, and the `torch.cuda` device/stream/event calls become bookkeeping no-ops. Kernels that
need a GPU (Triton, custom CUDA, NCCL-only APIs) still fail and are reported `needs_gpu`. On a GPU
rank nothing is changed; `mgbench scrape crosscheck` compares the two runs.

Gloo also takes fewer buffer shapes than NCCL for `all_gather_into_tensor` (output) and
`reduce_scatter_tensor` (input): only the concatenated `[ws * s0, *rest]`, where NCCL also takes the
stacked `[ws, *shape]` it documents and any contiguous buffer of ws parts' elements (a flat buffer). On a
CPU-only rank such a buffer is passed as a view in the concatenated form."""


def _mg_to_cpu(d):
    """A device naming CUDA (str, torch.device or int index) -> the CPU; anything else unchanged."""
    if isinstance(d, str) and d.split(":")[0] == "cuda":
        return _mg_torch.device("cpu")
    if isinstance(d, _mg_torch.device) and d.type == "cuda":
        return _mg_torch.device("cpu")
    return d


_MG_SELF_OPS = ("cuda", "pin_memory", "record_stream")


class _MgCpuPlacement(_MgTorchFunctionMode):
    """Rewrites CUDA device arguments to the CPU; `.cuda()` / `.pin_memory()` / `.record_stream()` keep the tensor."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        name = getattr(func, "__name__", "")
        if name in _MG_SELF_OPS and args and isinstance(args[0], _mg_torch.Tensor):
            return None if name == "record_stream" else args[0]
        if "device" in kwargs:
            dev = kwargs["device"]
            kwargs["device"] = "cpu" if type(dev) is int else _mg_to_cpu(dev)
        if name in ("to", "_parse_to"):         # Tensor.to / Module.to (`model.to(rank)`): an int is a CUDA index
            first = 1 if name == "to" else 0
            args = tuple(a if i < first else ("cpu" if type(a) is int else _mg_to_cpu(a)) for i, a in enumerate(args))
        return func(*args, **kwargs)


class _MgCudaStandIn:
    """A stream or event on a CPU-only rank: work is already ordered, so waiting and recording do nothing."""

    def __init__(self, *a, **k):
        pass

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *a, **k: 0.0 if name == "elapsed_time" else (True if name == "query" else None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _mg_cuda_table(ws):
    """torch.cuda attributes replaced during a call on a CPU-only rank."""
    def const(value):           # one function object per attribute (torch._dynamo refuses shared ones)
        return lambda *a, **k: value

    def context(*a, **k):
        return _mg_contextlib.nullcontext()

    return {"current_device": const(0), "set_device": const(None), "synchronize": const(None),
            "device_count": const(ws), "empty_cache": const(None), "Stream": _MgCudaStandIn,
            "Event": _MgCudaStandIn, "current_stream": _MgCudaStandIn, "default_stream": _MgCudaStandIn,
            "stream": context, "device": lambda *a, **k: _mg_contextlib.nullcontext(),
            "get_device_name": const("cpu"), "reset_peak_memory_stats": const(None),
            "max_memory_allocated": const(0), "memory_allocated": const(0)}


def _mg_concatenated(whole, part):
    """The buffer of all ranks' parts viewed in the concatenated form gloo takes (`[ws * s0, *rest]`, a 0-D
    part as `[1]`), where NCCL takes it as it is: stacked, or any contiguous buffer of ws parts' elements."""
    part = part.view(1) if part.dim() == 0 else part
    if not whole.is_contiguous() or part.numel() == 0 or whole.numel() % part.numel():
        return whole, part
    return whole.view(-1, *part.shape[1:]), part


def _mg_gloo_forms():
    """torch.distributed functions replaced during a call on a gloo rank (CPU, or CUDA tensors of ranks sharing
    a GPU): the stacked forms, which gloo checks by shape where NCCL takes any buffer of the right size."""
    all_gather, reduce_scatter = _mg_dist.all_gather_into_tensor, _mg_dist.reduce_scatter_tensor

    def all_gather_into_tensor(output_tensor, input_tensor, *args, **kwargs):
        return all_gather(*_mg_concatenated(output_tensor, input_tensor), *args, **kwargs)

    def reduce_scatter_tensor(output, input, *args, **kwargs):
        stacked, part = _mg_concatenated(input, output)
        return reduce_scatter(part, stacked, *args, **kwargs)

    return {"all_gather_into_tensor": all_gather_into_tensor, "reduce_scatter_tensor": reduce_scatter_tensor}


@_mg_contextlib.contextmanager
def _mg_cpu_cuda(ws, active):
    """Within: CUDA placement is the CPU (only when `active`: a CPU-only rank)."""
    if not active:
        yield
        return
    table = _mg_cuda_table(ws)
    saved = {k: getattr(_mg_torch.cuda, k) for k in table}
    nvtx = _mg_torch.cuda.nvtx
    saved_nvtx = {k: getattr(nvtx, k) for k in ("range_push", "range_pop", "mark")}
    for k, v in table.items():
        setattr(_mg_torch.cuda, k, v)
    for k in saved_nvtx:
        setattr(nvtx, k, (lambda *a, **kw: None))      # a new function object each
    try:
        with _MgCpuPlacement():
            yield
    finally:
        for k, v in saved.items():
            setattr(_mg_torch.cuda, k, v)
        for k, v in saved_nvtx.items():
            setattr(nvtx, k, v)


@_mg_contextlib.contextmanager
def _mg_gloo_stacked(active):
    """Within: the stacked collective forms take NCCL's buffers (only when `active`: a gloo rank)."""
    if not active:
        yield
        return
    forms = _mg_gloo_forms()
    saved_forms = {k: getattr(_mg_dist, k) for k in forms}
    for k, v in forms.items():
        setattr(_mg_dist, k, v)
    try:
        yield
    finally:
        for k, v in saved_forms.items():
            setattr(_mg_dist, k, v)
