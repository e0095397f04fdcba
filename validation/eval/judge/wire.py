"""The buffer exchange between the judge and the rank processes: tensors as bytes, replies as plain data.

- `encode(tree)` turns nested tuples/lists/dicts of tensors and Python scalars into plain data
  (dicts, lists, str, int, float, bytes): a tensor becomes its dtype name, shape and raw bytes (a sparse
  COO tensor: its shape, coalesced indices and values), read
  from memory with ctypes (no tensor method of a candidate's subclass runs: callers check the type
  first). `decode` rebuilds fresh tensors from such data, checking every field.
- `safe_loads` unpickles a reply but refuses every global (a pickle can only build plain data),
  so a candidate that writes its own bytes into its pipe cannot run code in the judge.
- `digest(tensor, key)`: a keyed fingerprint of a tensor's bytes computed with integer torch ops
  (exact on every device, independent of summation order, not linear in the values: the fingerprint
  of an all-reduced vector cannot be had from the fingerprints of its parts).
"""

from __future__ import annotations

import ctypes
import hashlib
import io
import pickle
from typing import Any

import torch

from mgbench.validation.compare import leaves

DTYPES = {
    str(d).removeprefix("torch."): d
    for d in (
        torch.float64,
        torch.float32,
        torch.float16,
        torch.bfloat16,
        torch.complex64,
        torch.complex128,
        torch.int64,
        torch.int32,
        torch.int16,
        torch.int8,
        torch.uint8,
        torch.bool,
        *(
            getattr(torch, n)
            for n in ("float8_e4m3fn", "float8_e5m2", "uint16", "uint32", "uint64")
            if hasattr(torch, n)
        ),
    )
}
PY_SCALARS = (bool, int, float, str, type(None))


class WireError(ValueError):
    """Data from a rank that is not what the protocol allows."""


def tensor_bytes(t: torch.Tensor) -> bytes:
    """The raw bytes of a plain tensor's elements, in row-major order (a copy)."""
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    t = t.contiguous()
    n = t.numel() * t.element_size()
    return ctypes.string_at(t.data_ptr(), n) if n else b""


def encode(obj: Any) -> Any:
    """Plain data for a tree of tensors and Python scalars (see the module docstring)."""
    kind = type(obj)
    if kind in (torch.Tensor, torch.nn.Parameter) and obj.layout == torch.sparse_coo:  # e.g. a filter basis
        c = obj.detach().coalesce()
        return {"coo": {"s": list(c.shape), "i": encode(c.indices()), "v": encode(c.values())}}
    if kind in (torch.Tensor, torch.nn.Parameter):
        if obj.layout != torch.strided:
            raise WireError(f"cannot send a {obj.layout} tensor (strided and sparse COO only)")
        return {"t": str(obj.dtype).removeprefix("torch."), "s": list(obj.shape), "b": tensor_bytes(obj)}
    if kind is tuple:
        return {"tuple": [encode(v) for v in obj]}
    if kind is list:
        return {"list": [encode(v) for v in obj]}
    if kind is dict:
        return {"dict": [[k, encode(v)] for k, v in obj.items()]}
    if kind in PY_SCALARS:
        return {"py": obj}
    raise WireError(f"cannot send a {kind.__name__} (outputs are tensors, scalars and tuple/list/dict)")


def _shape(s: Any) -> list[int]:
    if type(s) is not list or any(type(x) is not int or x < 0 for x in s):
        raise WireError("bad tensor shape")
    return s


def decode(data: Any, device: torch.device | str = "cpu") -> Any:
    """Fresh tensors (their own memory, writable) from `encode`'s data; WireError on anything else."""
    if type(data) is not dict or len(data) not in (1, 3):
        raise WireError("bad wire data")
    if "t" in data:
        dtype = DTYPES.get(data["t"]) if type(data["t"]) is str else None
        raw = data.get("b")
        if dtype is None or type(raw) is not bytes:
            raise WireError(f"bad tensor dtype {data.get('t')!r}")
        shape = _shape(data.get("s"))
        n = 1
        for x in shape:
            n *= x
        size = torch.empty((), dtype=dtype).element_size()
        if n * size != len(raw):
            raise WireError("tensor bytes do not match its shape")
        t = torch.frombuffer(bytearray(raw), dtype=dtype) if n else torch.empty(0, dtype=dtype)
        t = t.reshape(shape)
        return t if torch.device(device).type == "cpu" else t.to(device)
    ((key, val),) = data.items()
    if key == "py" and type(val) in PY_SCALARS:
        return val
    if key == "coo" and type(val) is dict and set(val) == {"s", "i", "v"}:
        shape, idx, values = _shape(val["s"]), decode(val["i"]), decode(val["v"])
        if not (isinstance(idx, torch.Tensor) and idx.dtype == torch.int64 and idx.dim() == 2):
            raise WireError("bad sparse indices")
        if not (isinstance(values, torch.Tensor) and idx.shape == (len(shape), values.shape[0])):
            raise WireError("sparse indices do not match the values or the shape")
        try:
            t = torch.sparse_coo_tensor(idx, values, shape, check_invariants=True).coalesce()
        except RuntimeError as e:  # an index out of the shape
            raise WireError(f"bad sparse tensor: {str(e).splitlines()[0]}") from None
        return t if torch.device(device).type == "cpu" else t.to(device)
    if key in ("tuple", "list") and type(val) is list:
        items = [decode(v, device) for v in val]
        return tuple(items) if key == "tuple" else items
    if key == "dict" and type(val) is list:
        out = {}
        for kv in val:
            if type(kv) is not list or len(kv) != 2 or type(kv[0]) not in (str, int):
                raise WireError("bad dict entry")
            out[kv[0]] = decode(kv[1], device)
        return out
    raise WireError(f"bad wire data {key!r}")


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"a rank reply may not name {module}.{name}")


def safe_loads(raw: bytes) -> Any:
    """Unpickle plain data only (no global is ever looked up, so nothing runs in the judge)."""
    return _PlainUnpickler(io.BytesIO(raw)).load()


# -- fingerprints --------------------------------------------------------------------------------

_M40 = (1 << 40) - 1
_M32 = (1 << 32) - 1


def _keys(key: int) -> tuple[int, int, int, int]:
    h = hashlib.blake2b(int(key).to_bytes(16, "little", signed=True), digest_size=16).digest()
    k = int.from_bytes(h, "little")
    return k & _M32, ((k >> 32) & ((1 << 30) - 1)) | 1, ((k >> 62) & ((1 << 21) - 1)) | 1, (k >> 83) & _M32


def digest_bytes(u8: torch.Tensor, key: int) -> int:
    """Keyed fingerprint of a flat uint8 tensor (on any device)."""
    n = u8.numel()
    if n == 0:
        return 0
    b = u8.to(torch.int64)
    w = b[0::4] | (b[1::4] << 8) | (b[2::4] << 16) | (b[3::4] << 24) if n % 4 == 0 else b
    k1, k2, k3, k4 = _keys(key)
    idx = torch.arange(w.numel(), dtype=torch.int64, device=w.device)
    h = ((w ^ k1) * k2) & _M40
    h = h ^ (h >> 17)
    h = (((h + idx) ^ k4) * k3) & _M40
    h = ((h ^ (h >> 19)) * k2) & _M40
    h = (h ^ (h >> 21)) & _M32
    return int(h.sum()) ^ n


def tensor_u8(t: torch.Tensor) -> torch.Tensor:
    """The bytes of a plain tensor as a flat uint8 tensor on its device."""
    t = t.detach().contiguous().reshape(-1)
    if t.dtype == torch.bool:
        t = t.to(torch.uint8)
    return t.view(torch.uint8) if t.numel() else torch.empty(0, dtype=torch.uint8, device=t.device)


def _blake(t: torch.Tensor, key: int) -> int:
    """Keyed BLAKE2b of a CPU tensor's bytes, read in place (no copy of a contiguous tensor)."""
    t = t.detach().contiguous()
    n = t.numel() * t.element_size()
    h = hashlib.blake2b(key=int(key).to_bytes(16, "little", signed=True), digest_size=8)
    if n:
        h.update(memoryview((ctypes.c_char * n).from_address(t.data_ptr())))
    return int.from_bytes(h.digest(), "little")


def digest_tree(obj: Any, key: int, device_type: str = "cpu") -> list[Any]:
    """Fingerprints of every leaf of a tree of tensors/scalars (scalars by value), in leaf order;
    `device_type` "cuda" computes the GPU method on a CPU tensor (the judge checking a GPU rank)."""
    out: list[Any] = []
    for _, v in leaves(obj):
        if type(v) in (torch.Tensor, torch.nn.Parameter):
            if v.layout == torch.sparse_coo:  # fingerprinted by its values in dense form
                v = v.detach().to_dense()
            gpu = v.device.type != "cpu" or device_type != "cpu"
            out.append(digest_bytes(tensor_u8(v), key) if gpu else _blake(v, key))
        elif type(v) in PY_SCALARS:
            out.append(repr(v))
        else:
            raise WireError(f"cannot fingerprint a {type(v).__name__}")
    return out


def digest_data(data: Any, key: int, device_type: str = "cpu") -> list[Any]:
    """digest_tree of decode(data) computed from the bytes (the judge's side)."""
    return digest_tree(decode(data), key, device_type)


def meta(obj: Any) -> Any:
    """Structure, dtypes and shapes of a tree (what a timed call returned, without the values)."""
    kind = type(obj)
    if kind in (torch.Tensor, torch.nn.Parameter):
        return {"t": str(obj.dtype).removeprefix("torch."), "s": list(obj.shape)}
    if kind in (tuple, list):
        return {kind.__name__: [meta(v) for v in obj]}
    if kind is dict:
        return {"dict": [[k, meta(v)] for k, v in obj.items()]}
    return {"py": repr(obj)}


def meta_of_data(data: Any) -> Any:
    """meta() of encoded data, computed without decoding the bytes."""
    if "t" in data:
        return {"t": data["t"], "s": data["s"]}
    ((key, val),) = data.items()
    if key in ("tuple", "list"):
        return {key: [meta_of_data(v) for v in val]}
    if key == "dict":
        return {"dict": [[k, meta_of_data(v)] for k, v in val]}
    return {"py": repr(val)}
