"""Task-side runtime, part 1 (the core): inlined verbatim into every level-4 task (torch + stdlib only).

A spec (JSON) lists the entry's arguments; `_mg_args` draws them for one rank. Shape dims are small
expressions in `n` (the size class) and `ws` (world size). Stream 0 is replicated, 1 + rank per rank.

This folder holds task-side text only. Each file is one part of what a task module carries: the file's
text below its docstring. Which parts a task carries, in which order, is listed on the host side in
scrapers/harness/runtime_parts.py (EVERY_TASK: this part, repo_globals.py, cuda_on_cpu.py; the others on
demand). The other parts use this part's names and are read as text, never imported; this one is also
imported by host-side code (`_mg_eval`, `_mg_state_attrs`), which then sizes inputs as a task does.
"""
import contextlib as _mg_contextlib
import copy as _mg_copy
import hashlib as _mg_hashlib
import os as _mg_os
import pathlib as _mg_pathlib
import sys as _mg_sys
import tempfile as _mg_tempfile
import types as _mg_types

import torch as _mg_torch
import torch.distributed as _mg_dist
from torch.overrides import TorchFunctionMode as _MgTorchFunctionMode


def _mg_eval(expr, n, ws, rank, i=0):
    """An integer expression of the size n, world size ws, rank and (in a split list) the entry's index i."""
    return int(eval(str(expr), {"__builtins__": {}}, {"n": n, "ws": ws, "rank": rank, "i": i}))


def _mg_gen(seed, stream, index):
    key = f"{seed}:{stream}:{index}".encode()
    g = _mg_torch.Generator()
    g.manual_seed(int.from_bytes(_mg_hashlib.sha256(key).digest()[:7], "little"))
    return g


def _mg_tensor(a, g, n, ws, rank, device):
    shape = [_mg_eval(d, n, ws, rank) for d in a.get("shape", ["n"])]
    dtype = getattr(_mg_torch, a.get("dtype", "float32"))
    if "fill" in a:     # every element one integer expression (a count such as N*H*W*ws)
        t = _mg_torch.full(shape, _mg_eval(a["fill"], n, ws, rank), dtype=dtype)
    elif a.get("draw") == "positive":   # a scale such as a reciprocal std: uniform in [0.5, 1.5)
        t = (_mg_torch.rand(shape, generator=g, dtype=_mg_torch.float32) + 0.5).to(dtype)
    elif dtype.is_floating_point:
        t = _mg_torch.randn(shape, generator=g, dtype=_mg_torch.float32).to(dtype)
    elif dtype == _mg_torch.bool:
        t = _mg_torch.randint(0, 2, shape, generator=g).bool()
    elif a.get("draw") == "distinct":  # each row (last dim) distinct values below high: top-k indices
        high = max(shape[-1], _mg_eval(a.get("high", "n"), n, ws, rank))
        t = _mg_torch.rand(shape[:-1] + [high], generator=g).argsort(-1)[..., : shape[-1]].to(dtype)
    else:
        t = _mg_torch.randint(0, max(1, _mg_eval(a.get("high", "n"), n, ws, rank)), shape, generator=g).to(dtype)
    return t.to(device)


def _mg_value(a, index, seed, rank, ws, n, device):
    """One argument of one rank (groups are resolved in `_mg_call`, never part of the inputs)."""
    kind = a["kind"]
    g = _mg_gen(seed, 0 if a.get("replicated") else 1 + rank, index)
    if kind == "tensor":
        t = _mg_tensor(a, g, n, ws, rank, device)
        t.__dict__.update(_mg_fields(a, index, seed, rank, ws, n, device))
        return t
    if kind == "tensors":   # with "grads": parameters whose gradients are set (`p.grad` in a grad norm)
        ts = [_mg_tensor(a, g, n, ws, rank, device)
              for _ in range((2 if a.get("grads") else 1) * _mg_eval(a.get("count", "ws"), n, ws, rank))]
        return list(_mg_module(ts).parameters()) if a.get("grads") else ts
    if kind == "int":
        return _mg_eval(a.get("expr", "n"), n, ws, rank)
    if kind == "splits":
        return [_mg_eval(a.get("expr", "n"), n, ws, rank, i) for i in range(ws)]   # uneven: expr in rank and i
    if kind == "float":     # "draw": per rank and seed (a statistic that is reduced), else a constant
        return float(_mg_torch.rand((), generator=g)) if a.get("draw") else float(a.get("value", 0.5))
    if kind == "const":     # a JSON value (the keys of a synthesized dict), a fresh copy per call
        v = a.get("value")
        return list(v) if isinstance(v, list) else v
    if kind == "member":    # a module-level name of the task (inlined repository code): `Mode.REDUCE_SCATTER`
        head, *rest = a["value"].split(".")
        obj = globals()[head]
        for part in rest:
            obj = getattr(obj, part)
        return obj
    if kind == "dtype":
        return getattr(_mg_torch, a.get("value", "float32"))
    if kind == "fn":
        return _mg_noop if a.get("value") == "noop" else getattr(_mg_torch.nn.functional, a.get("value", "gelu"))
    if kind == "path":      # a scratch path (same on every rank), `str` or `pathlib.Path`
        p = _mg_pathlib.Path(_mg_os.environ.get("TMPDIR") or _mg_tempfile.gettempdir()) / "mg_path"
        return p if a.get("value") == "pathlib" else str(p)
    if kind == "device":    # the rank's device (`device=`, `target_device`), a string when annotated `str`
        return str(device) if a.get("value") == "str" else _mg_torch.device(device)
    if kind in ("stream", "event"):     # on a CPU rank a stand-in (work is ordered)
        if _mg_torch.device(device).type != "cuda":
            return _MgCudaStandIn()
        return _mg_torch.cuda.current_stream(device) if kind == "stream" else _mg_torch.cuda.Event(enable_timing=True)
    if kind == "ranks":     # the global ranks of a group (`self.pp_group_ranks[src]`)
        return list(range(ws))
    if kind == "reduce_op":
        return getattr(_mg_dist.ReduceOp, a.get("value", "SUM"))
    if kind == "module":        # a model, or with "chunks" a list of models (Megatron's model chunks)
        count = 2 * _mg_eval(a.get("count", "2"), n, ws, rank)
        models = [_mg_module([_mg_tensor(a, g, n, ws, rank, device) for _ in range(count)])
                  for _ in range(int(a.get("chunks", 1)))]
        return models if "chunks" in a else models[0]
    if kind == "linear":    # a projection slot (`up_proj(x)`): nn.Linear(shape[1] -> shape[0]), no bias
        w = _mg_tensor(a, g, n, ws, rank, device)
        m = _mg_torch.nn.Linear(w.shape[1], w.shape[0], bias=False, device=w.device, dtype=w.dtype)
        with _mg_torch.no_grad():
            m.weight.copy_(w)
        return m
    if kind == "namespace":
        vals = _mg_fields(a, index, seed, rank, ws, n, device)
        return vals if a.get("dict") else _MgNamespace(**vals)
    return a.get("value")


def _mg_fields(a, index, seed, rank, ws, n, device):
    """Attributes of a synthesized object (or of a tensor, e.g. `param.main_grad`)."""
    return {f["name"]: (_mg_group(f) if f["kind"] == "group" else
                        _mg_value(f, 100 * (index + 1) + j, seed, rank, ws, n, device))
            for j, f in enumerate(a.get("fields", []))}


def _mg_group(a):
    value = a.get("value", "world")
    if value == "collection":
        return _MgGroupCollection()
    if value == "list":
        return [_mg_dist.group.WORLD]
    if value == "state":            # a parallel-state object (`mpu.get_model_parallel_group()`)
        return _MgParallelState()
    return _mg_dist.group.WORLD if value == "world" else None


class _MgNamespace(_mg_types.SimpleNamespace):
    """A synthesized config/argument object: attributes found from the entry's AttributeErrors."""


_MG_ATTR = 1000       # attribute i draws from generator stream _MG_ATTR + i


def _mg_inputs(spec, rank, ws, seed, device, n):
    """The arguments, then (spec "state": a method that works on its object) its attributes, drawn like
    arguments at size n and per rank (gradients, shards and buffers differ between ranks; replicated state
    would make collectives no-ops)."""
    return tuple(_mg_value(a, i, seed, rank, ws, n, device) for i, a in enumerate(spec["args"])
                 if a["kind"] != "group") + tuple(_mg_value({**a, "replicated": False}, _MG_ATTR + i, seed, rank,
                                                             ws, n, device) for i, a in _mg_state_attrs(spec))


def _mg_state_attrs(spec):
    """The attributes that are inputs: all but process groups, when the spec has "state"."""
    return [(i, a) for i, a in enumerate(spec.get("attrs", [])) if spec.get("state") and a["kind"] != "group"]


def _mg_module(ts):
    """A synthesized model (`model.parameters()`): parameters ts[0::2] with gradients ts[1::2]."""
    m = _mg_torch.nn.Module()
    for i, (w, gr) in enumerate(zip(ts[0::2], ts[1::2])):
        m.register_parameter(f"w{i}", _mg_torch.nn.Parameter(w, requires_grad=w.is_floating_point()))
        m.get_parameter(f"w{i}").grad = gr if w.is_floating_point() else None
    return m


def _mg_params(x):
    """The parameters of a synthesized model or of a list of parameters, else None."""
    if isinstance(x, _mg_torch.nn.Module):
        return list(x.parameters())
    return x if isinstance(x, list) and x and all(isinstance(v, _mg_torch.nn.Parameter) for v in x) else None


def _mg_plain(x):
    """A synthesized model or list of parameters as its parameters and gradients (outputs, comparisons)."""
    if isinstance(x, list) and x and all(isinstance(v, _mg_torch.nn.Module) for v in x):
        return tuple(_mg_plain(v) for v in x)
    params = _mg_params(x)
    return x if params is None else tuple(t.detach() for p in params for t in (p, p.grad) if t is not None)


def _mg_clone(x):
    if isinstance(x, _mg_torch.nn.Linear):      # a projection slot keeps its forward
        return _mg_copy.deepcopy(x)
    params = _mg_params(x)
    if params is not None:          # an integer parameter has no gradient: it keeps none
        m = _mg_module([t for p in params for t in (p.detach().clone(), p.grad)])
        for p in m.parameters():
            p.grad = None if p.grad is None else p.grad.clone()
        return m if isinstance(x, _mg_torch.nn.Module) else list(m.parameters())
    if isinstance(x, _mg_torch.Tensor):
        y = x.detach().clone()
        y.__dict__.update({k: _mg_clone(v) for k, v in x.__dict__.items()})
        return y
    if isinstance(x, (list, tuple)):
        return type(x)(_mg_clone(v) for v in x)
    if isinstance(x, dict):
        return {k: _mg_clone(v) for k, v in x.items()}
    if isinstance(x, _MgNamespace):
        return _MgNamespace(**{k: _mg_clone(v) for k, v in vars(x).items()})
    return x


def _mg_clean(x):
    """Keep tensors and plain values of an output; anything else (handles, objects) becomes None."""
    x = _mg_plain(x)
    if isinstance(x, _mg_torch.Tensor):
        return x.detach()
    if isinstance(x, (list, tuple)):
        return tuple(_mg_clean(v) for v in x)
    if isinstance(x, dict):
        return {str(k): _mg_clean(v) for k, v in x.items()}
    return x if isinstance(x, (int, float, bool, str, type(None))) else None


def _mg_has_tensor(x):
    if isinstance(x, _mg_torch.Tensor):
        return True
    if isinstance(x, (tuple, list)):
        return any(_mg_has_tensor(v) for v in x)
    if isinstance(x, dict):
        return any(_mg_has_tensor(v) for v in x.values())
    return False


def _mg_device(x):
    """Where the rank's inputs live: the device of the first tensor found, else None."""
    if isinstance(x, _mg_torch.Tensor):
        return x.device
    if isinstance(x, _mg_torch.nn.Module):
        return next((p.device for p in x.parameters()), None)
    for v in (x.values() if isinstance(x, dict) else x if isinstance(x, (list, tuple)) else ()):
        d = _mg_device(v)
        if d is not None:
            return d
    return None


def _mg_target(namespace, spec, state=(), device="cpu", drawn=None):
    """The callable of the entry: a function, `Class.apply` or a bound method of an instance (whose state
    attributes, when the spec has them, are the given input values). Module globals and attributes are
    drawn on `device`, where the inputs are. With `drawn` (a settled spec: `_mg_drawn`), each is drawn once
    and reused; those the entry changes (spec "mutates_attrs") are cloned for every call."""
    entry, kind = spec["entry"], spec["kind"]
    rank, ws = _mg_dist.get_rank(), _mg_dist.get_world_size()

    def _mg_draw(a, index):
        if a["kind"] == "group":
            return _mg_group(a)
        if drawn is None:
            return _mg_value(a, index, 0, rank, ws, spec["n_attr"], device)
        if index not in drawn:
            drawn[index] = _mg_value(a, index, 0, rank, ws, spec["n_attr"], device)
        return _mg_clone(drawn[index]) if a["name"] in spec.get("mutates_attrs", ()) else drawn[index]

    for i, a in enumerate(spec.get("globals", [])):     # module globals the extracted code lacks (`EP_GROUP`)
        namespace[a["name"]] = _mg_draw(a, 2000 + i)
    if kind == "function":
        return namespace[entry]
    cls = namespace[entry.split(".")[0]]
    if kind == "autograd_function":
        return cls.apply
    if getattr(cls, "__abstractmethods__", None):     # an abstract base's concrete method: build it anyway
        cls.__abstractmethods__ = frozenset()         # (the class of this rank process only)
    obj = cls.__new__(cls)
    if isinstance(obj, _mg_torch.nn.Module):    # its own __init__ is not run, the Module machinery must be
        _mg_torch.nn.Module.__init__(obj)
    given = dict(zip((i for i, _ in _mg_state_attrs(spec)), state))
    for i, a in enumerate(spec.get("attrs", [])):
        setattr(obj, a["name"], given[i] if i in given else _mg_draw(a, _MG_ATTR + i))
    return getattr(obj, entry.split(".", 1)[1])


def _mg_drawn(namespace, device):
    """The module globals and attributes drawn once in this process for this device, rank and world size."""
    key = (str(device), _mg_dist.get_rank(), _mg_dist.get_world_size())
    return namespace.setdefault("_MG_DRAWN", {}).setdefault(key, {})


def _mg_bind(spec, values):
    """Positional and keyword arguments of the entry: the argument values in spec order, groups resolved."""
    pos, kw, it = [], {}, iter(values)
    for a in spec["args"]:
        v = _mg_group(a) if a["kind"] == "group" else next(it)
        if a.get("keyword") and spec["kind"] != "autograd_function":    # Function.apply: positional only
            kw[a["name"]] = v
        else:
            pos.append(v)
    return pos, kw


def _mg_rank_device(inputs):
    return _mg_device(inputs) or (_mg_torch.device("cuda", _mg_torch.cuda.current_device())
                                  if "nccl" in str(_mg_dist.get_backend()) else "cpu")


_MG_REPORT = None       # scrapers/harness/settle.py sets a dict: the auto path records how it formed the output


def _mg_call(namespace, spec, inputs):
    """Call the entry with the inputs (the reference never mutates them) and the groups. A settled spec
    (its "output" decided once by scrapers/harness/settle.py) takes `_mg_call_settled`: no comparison in
    the call; else the output is discovered per call (`_mg_call_auto`, what the harness search runs)."""
    if "output" in spec:
        return _mg_call_settled(namespace, spec, inputs)
    return _mg_call_auto(namespace, spec, inputs)


def _mg_call_settled(namespace, spec, inputs):
    """The settled call: only the inputs the entry changes or returns are cloned (spec "mutates",
    "returns"; a changed input that is no part of the output is a copy kept between calls whose changed
    tensors are refilled, spec "scratch": `_mg_refill`), globals and attributes are drawn once (`_mg_drawn`),
    and the output is formed by the recorded mode with no comparison, no snapshot and no host sync."""
    out_spec, copy = spec["output"], set(spec.get("mutates", ())) | set(spec.get("returns", ()))
    scratch = spec.get("scratch", {})
    args = [_mg_refill(namespace, scratch[str(i)], i, v) if str(i) in scratch else _mg_clone(v) if i in copy
            else v for i, v in enumerate(inputs)]
    k = len(args) - len(_mg_state_attrs(spec))
    pos, kw = _mg_bind(spec, args[:k])
    device = _mg_rank_device(inputs)
    with _mg_hosted(spec["entry"], namespace, device):
        target = _mg_target(namespace, spec, args[k:], device, _mg_drawn(namespace, device))
        out = target(*pos, **kw)
        _mg_wait(out)
        out = _mg_clean(out)
    mode = out_spec["mode"]
    if mode == "return":
        return out
    if mode == "numbers":
        return _mg_torch.tensor(_mg_numbers(out), dtype=_mg_torch.float64)
    obj = getattr(target, "__self__", None) if spec["kind"] == "method" else None
    obj = None if isinstance(obj, type) else obj        # as the auto path: a class is no object state
    touched = [_mg_plain(args[i]) for i in out_spec.get("index", ())]
    attrs = _mg_attr_tensors(obj) if mode in ("state", "attrs") else {}
    touched += [v for _, v in sorted(attrs.items())] if mode == "state" else \
        [attrs[key] for key in out_spec.get("attrs", ())]
    return _mg_clean(touched[0] if len(touched) == 1 else tuple(touched))


def _mg_parts(x):
    """The tensors of an input in a fixed order (a model or parameter list as its weights and gradients)."""
    return _mg_tensors_in(_mg_plain(x))


def _mg_refill(namespace, parts, i, x):
    """Input i as a copy made once per process and input, whose tensors at positions `parts` (those the entry
    changes) get the input's values again before each call: no allocation, a copy of what the entry changes
    only. A new input, one the caller changed since (its version counters moved) or a copy whose structure
    the entry changed gets a fresh clone."""
    cache = namespace.setdefault("_MG_SCRATCH", {})
    held, src = cache.get(i), _mg_parts(x)
    if held is not None and held[0] is x and held[2] == [t._version for t in src]:
        dst = _mg_parts(held[1])
        if len(dst) == len(src) and all(dst[j].shape == src[j].shape for j in parts):
            for j in parts:
                dst[j].copy_(src[j])
            return held[1]
    cache[i] = (x, _mg_clone(x), [t._version for t in src])
    return cache[i][1]


def _mg_call_auto(namespace, spec, inputs):
    """Call the entry with the inputs (cloned) and the groups, and find the output.

    The output is what the entry returns when it holds a tensor, else its tensor arguments changed by the
    call (in-place collectives such as all_reduce of a gradient), else the numbers it returns (a reduced
    metric such as a loss or a norm, as a float64 tensor). A method on object state (spec "state") outputs
    its changed arguments and its object's tensor attributes after the call; any other method whose call
    leaves no tensor to return falls back to the attributes its call changed or set. With `_MG_REPORT` (a
    dict: settling), which of these it was, and what the call changed, is recorded there."""
    args = list(_mg_clone(inputs))
    k = len(args) - len(_mg_state_attrs(spec))            # argument values, then the object's state
    pos, kw = _mg_bind(spec, args[:k])
    report = _MG_REPORT
    device = _mg_rank_device(inputs)
    with _mg_hosted(spec["entry"], namespace, device):
        target = _mg_target(namespace, spec, args[k:], device)
        obj = getattr(target, "__self__", None) if spec["kind"] == "method" else None
        obj = None if isinstance(obj, type) else obj
        # the attributes' snapshot is for the last-resort output, never reached when an argument is a tensor or
        # a model (it stays one after the call): no clone on the timed path then
        direct = any(isinstance(v, (_mg_torch.Tensor, _mg_torch.nn.Module)) for v in args[:k])
        before = {} if spec.get("state") or direct else {key: _mg_clone(v) for key, v in _mg_attr_tensors(obj).items()}
        if report is not None:
            drawn = _mg_drawn_now(namespace, spec, target)
            seen = ([_mg_versions(v) for v in args], {key: (_mg_versions(v), _mg_clone(v)) for key, v in drawn.items()})
        out = target(*pos, **kw)
        _mg_wait(out)
        out = _mg_clean(out)
    if report is not None:
        _mg_report_changes(report, args, inputs, seen, _mg_drawn_now(namespace, spec, target))
    args, inputs = [_mg_plain(v) for v in args[:k]], [_mg_plain(v) for v in inputs[:k]]
    if _mg_has_tensor(out):
        return _mg_reported(report, {"mode": "return"}, out)
    changed = [i for i, (v, o) in enumerate(zip(args, inputs)) if _mg_has_tensor(v) and not _mg_same(v, o)]
    now = sorted(_mg_attr_tensors(obj).items())
    if spec.get("state") and (changed or now):        # the same structure on every rank, changed or not
        touched = [args[i] for i in changed] + [v for _, v in now]
        return _mg_reported(report, {"mode": "state", "index": changed}, touched)
    numbers = _mg_numbers(out)
    if not changed and numbers:         # a reduced metric returned as Python numbers (`loss.item()`)
        return _mg_reported(report, {"mode": "numbers"}, _mg_torch.tensor(numbers, dtype=_mg_torch.float64))
    if changed:
        return _mg_reported(report, {"mode": "args", "index": changed}, [args[i] for i in changed])
    held = [i for i, v in enumerate(args) if _mg_has_tensor(v)]
    if held:
        return _mg_reported(report, {"mode": "args", "index": held}, [args[i] for i in held])
    keys = [key for key, v in now if not (key in before and _mg_same(v, before[key]))]
    return _mg_reported(report, {"mode": "attrs", "attrs": keys}, [dict(now)[key] for key in keys])


def _mg_reported(report, output, touched):
    """The output (`touched`: a list of what the call changed, cleaned as one value or a tuple); when settling,
    its mode in `report` and the inputs ("returns") and drawn globals or attributes ("returns_attrs") whose
    memory it shares (a settled call clones those: its output never aliases an input nor a reused draw)."""
    out = _mg_clean(touched[0] if len(touched) == 1 else tuple(touched)) if isinstance(touched, list) else touched
    if report is not None:
        args, drawn = report.pop("_held")
        ptrs = {t.untyped_storage().data_ptr() for t in _mg_tensors_in(out)}
        report["output"] = output
        report["returns"] = [i for i, v in enumerate(args)
                             if any(t.untyped_storage().data_ptr() in ptrs for t in _mg_tensors_in(v))]
        report["returns_attrs"] = sorted(key for key, v in drawn.items()
                                         if any(t.untyped_storage().data_ptr() in ptrs for t in _mg_tensors_in(v)))
    return out


def _mg_versions(x):
    """The version counters of every tensor in x (in-place writes bump them): fields, models, containers."""
    if isinstance(x, _mg_torch.Tensor):
        return [x._version] + [_mg_versions(v) for v in x.__dict__.values()]
    if isinstance(x, _mg_torch.nn.Module):
        return [_mg_versions(t) for p in x.parameters() for t in (p, p.grad)]
    if isinstance(x, (list, tuple)):
        return [_mg_versions(v) for v in x]
    if isinstance(x, dict):
        return [_mg_versions(v) for v in x.values()]
    if isinstance(x, _MgNamespace):
        return [_mg_versions(v) for v in vars(x).values()]
    return None


def _mg_deep_same(a, b):
    """Equal values and structure (models by parameters and gradients, namespaces by attributes)."""
    a, b = _mg_plain(a), _mg_plain(b)
    if isinstance(a, _MgNamespace):
        return isinstance(b, _MgNamespace) and _mg_deep_same(vars(a), vars(b))
    if isinstance(a, _mg_torch.Tensor):
        return _mg_same(a, b) and _mg_deep_same(a.__dict__, getattr(b, "__dict__", None))
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(map(_mg_deep_same, a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_mg_deep_same(a[k], b[k]) for k in a)
    return _mg_same(a, b)


def _mg_drawn_now(namespace, spec, target):
    """The drawn module globals and object attributes (not groups, not state inputs) as they are now, by name."""
    obj = getattr(target, "__self__", None)
    state = {i for i, _ in _mg_state_attrs(spec)}
    out = {a["name"]: namespace.get(a["name"]) for a in spec.get("globals", []) if a["kind"] != "group"}
    out.update({a["name"]: getattr(obj, a["name"], None) for i, a in enumerate(spec.get("attrs", []))
                if a["kind"] != "group" and i not in state and obj is not None and not isinstance(obj, type)})
    return out


def _mg_report_changes(report, args, inputs, seen, drawn):
    """Settling: the inputs the call changed ("mutates": another value after the call; "writes": those it
    wrote in place, with the same values or not: an all_gather into a list holding the input itself) and
    the drawn globals and attributes it changed ("mutates_attrs": written or another value)."""
    versions, attrs = seen
    report["mutates"] = [i for i, (v, o) in enumerate(zip(args, inputs)) if not _mg_deep_same(v, o)]
    report["parts"] = {str(i): _mg_changed_parts(args[i], inputs[i]) for i in report["mutates"]}
    report["writes"] = [i for i, v in enumerate(args) if _mg_versions(v) != versions[i]]
    report["mutates_attrs"] = sorted(key for key, (ver, snap) in attrs.items()
                                     if _mg_versions(drawn.get(key)) != ver or not _mg_deep_same(drawn.get(key), snap))
    report["_held"] = (args, drawn)


def _mg_changed_parts(after, before):
    """Positions (in `_mg_parts` order) of the tensors whose values the call changed; None when the call
    changed the input's structure (tensors added, removed or resized)."""
    a, b = _mg_parts(after), _mg_parts(before)
    if len(a) != len(b) or any(x.shape != y.shape or x.dtype != y.dtype for x, y in zip(a, b)):
        return None
    return [j for j, (x, y) in enumerate(zip(a, b)) if not bool(_mg_torch.equal(x, y))]


def _mg_tensors_in(x):
    """Every tensor of x that holds memory (fields, models, containers, namespaces)."""
    if isinstance(x, _mg_torch.Tensor):
        return ([x] if x.device.type != "meta" else []) + [t for v in x.__dict__.values() for t in _mg_tensors_in(v)]
    if isinstance(x, _mg_torch.nn.Module):
        return [t.detach() for p in x.parameters() for t in (p, p.grad) if t is not None]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _mg_tensors_in(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _mg_tensors_in(v)]
    if isinstance(x, _MgNamespace):
        return _mg_tensors_in(vars(x))
    return []


def _mg_wait(x):
    """Wait for the communication handles an entry returns (`return buf, dist.all_reduce(buf, async_op=True)`):
    its caller would before reading the buffers."""
    if isinstance(x, _mg_dist.Work):
        x.wait()
    elif isinstance(x, (list, tuple)):
        for v in x:
            _mg_wait(v)
    elif isinstance(x, dict):
        for v in x.values():
            _mg_wait(v)


def _mg_attr_tensors(obj):
    """The object's attributes that hold tensors (a model as its parameters and gradients), by name."""
    attrs = dict(getattr(obj, "__dict__", {}))
    if isinstance(obj, _mg_torch.nn.Module):            # submodules, parameters and buffers live apart
        attrs = {k: v for k, v in attrs.items() if k not in ("_modules", "_parameters", "_buffers")}
        attrs.update({**obj._modules, **obj._parameters, **obj._buffers})
    plain = {key: _mg_plain(v) for key, v in attrs.items()}
    return {key: v for key, v in plain.items() if _mg_has_tensor(v)}


def _mg_numbers(x):
    """The numbers of a Python number or a flat list/tuple/dict of them (bools count), else None."""
    vals = list(x.values()) if isinstance(x, dict) else list(x) if isinstance(x, (list, tuple)) else [x]
    if vals and all(isinstance(v, (int, float)) for v in vals):
        return [float(v) for v in vals]
    return None


_MG_SWAP_NAMES = {}     # (id, len) of a globals dict -> its names bound to a function `_mg_hosted` swaps
_MG_GPU_RANK = [False]  # inside `_mg_hosted`: this rank computes on a GPU (what the accelerator stand-in reports)


def _mg_swap_sites(dicts, swap):
    """(globals dict, name, real function) of every binding of a swapped function. A dict's names are found
    by one scan, again only when its size changes: scanning a task module's globals on every timed call
    cost ~0.5 ms of host time per call."""
    sites = []
    for d in dicts:
        key = (id(d), len(d))
        if key not in _MG_SWAP_NAMES:
            _MG_SWAP_NAMES[key] = tuple(k for k, v in d.items() if id(v) in swap)
        sites += [(d, k, d[k]) for k in _MG_SWAP_NAMES[key] if id(d.get(k)) in swap]
    return sites


@_mg_contextlib.contextmanager
def _mg_hosted(entry, namespace=None, device=None):
    """During the call, the harness hosts the job as torchrun would: script-style entries that start their
    own default process group get the one already running (torch would raise), cannot tear it down, see
    RANK/LOCAL_RANK/WORLD_SIZE in the environment and parse an empty command line (argparse defaults).
    `dist.reduce` leaves non-destination ranks their own values (defined on every backend).
    `namespace`: the task module's globals, whose `from torch.distributed import init_process_group` is swapped too.
    `device`: where the rank's inputs live; a rank is a GPU rank on NCCL or when its inputs are on a GPU (ranks
    sharing one GPU over gloo), else CUDA placement inside the call is the CPU."""
    real_init, real_destroy = _mg_dist.init_process_group, _mg_dist.destroy_process_group

    def init_process_group(*a, **k):
        if not _mg_dist.is_initialized():
            return real_init(*a, **k)

    def destroy_process_group(group=None):
        if group is not None and group is not _mg_dist.group.WORLD:
            return real_destroy(group)

    real_reduce = _mg_dist.reduce

    def reduce(tensor, dst=None, op=_mg_dist.ReduceOp.SUM, group=None, async_op=False, group_dst=None):
        """The buffer of a non-destination rank is unspecified after a reduce (gloo overwrites it, NCCL does
        not): those ranks get their own values back (after the work completes when it is asynchronous), so a
        task's output does not depend on the backend."""
        root, me = (group_dst, _mg_dist.get_rank(group)) if group_dst is not None else (dst, _mg_dist.get_rank())
        keep = None if me == root else tensor.detach().clone()
        extra = {} if group_dst is None else {"group_dst": group_dst}
        work = real_reduce(tensor, dst, op, group, async_op, **extra)
        if keep is not None:
            if work is not None:
                work.wait()
            tensor.detach().copy_(keep)
        return work

    swap = {id(real_init): init_process_group, id(real_destroy): destroy_process_group, id(real_reduce): reduce}
    patched = _mg_swap_sites([vars(_mg_dist)] + ([namespace] if namespace is not None else []), swap)
    rank, ws = _mg_dist.get_rank(), _mg_dist.get_world_size()
    on_gpu = "nccl" in _mg_dist.get_backend() or (device is not None and _mg_torch.device(device).type == "cuda")
    local = _mg_torch.cuda.current_device() if on_gpu else rank
    was_gpu_rank, _MG_GPU_RANK[0] = _MG_GPU_RANK[0], on_gpu
    env = {"RANK": rank, "LOCAL_RANK": local, "WORLD_SIZE": ws, "LOCAL_WORLD_SIZE": ws, "GROUP_RANK": 0,
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": 29500}
    saved_env, saved_argv = {k: _mg_os.environ.get(k) for k in env}, _mg_sys.argv
    for d, k, v in patched:
        d[k] = swap[id(v)]
    _mg_sys.argv = [entry]
    _mg_os.environ.update({k: str(v) for k, v in env.items()})        # as torchrun sets them
    try:
        # cuda_on_cpu.py: gloo takes NCCL's buffer forms; CUDA placement on a CPU rank is the CPU
        with _mg_gloo_stacked("gloo" in str(_mg_dist.get_backend())), _mg_cpu_cuda(ws, not on_gpu):
            yield
    finally:
        _MG_GPU_RANK[0] = was_gpu_rank
        if on_gpu:
            _mg_torch.cuda.set_device(local)       # an entry's own set_device does not outlive the call
        for d, k, v in patched:
            d[k] = v
        _mg_sys.argv = saved_argv
        for k, v in saved_env.items():
            if v is None:
                _mg_os.environ.pop(k, None)
            else:
                _mg_os.environ[k] = v


def _mg_same(a, b):
    if isinstance(a, _mg_torch.Tensor):
        return isinstance(b, _mg_torch.Tensor) and a.shape == b.shape and bool(_mg_torch.equal(a, b))
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(_mg_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_mg_same(a[k], b[k]) for k in a)
    return a is b if isinstance(a, _MgNamespace) else a == b


class _MgMissing:
    """Placeholder of an import the task cannot have (repository or third-party code): any use fails."""

    def __init__(self, name):
        self._mg_name = name

    def __getattr__(self, attr):
        raise ImportError(f"mgbench-missing-import: {self._mg_name}")

    def __call__(self, *a, **k):
        raise ImportError(f"mgbench-missing-import: {self._mg_name}")

    def __bool__(self):
        raise ImportError(f"mgbench-missing-import: {self._mg_name}")

    def __getitem__(self, key):       # `Base[T]`, `X | None` when a class is defined: still the placeholder
        return self

    __or__ = __ror__ = __getitem__

    def __mro_entries__(self, bases):
        return (_MgBase,)
