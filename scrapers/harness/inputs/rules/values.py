"""Rules for scalar values guessed as the wrong kind: paths, devices, floats, flags, ints, dtypes."""

from __future__ import annotations

import re

from mgbench.scrapers.harness.inputs.candidate import Candidate
from mgbench.scrapers.harness.inputs.failure import Failure
from mgbench.scrapers.harness.inputs.rules.base import Rule, Spec, Trigger
from mgbench.scrapers.harness.make import specs
from mgbench.scrapers.harness.make.specedit import _all_args, _set_arg, _tensor_args, _with, of_type, suspects

PATH_WORDS = (
    "expected str, bytes or os.pathlike",
    "must be str, bytes, or os.pathlike",
    "can only concatenate str (not",
    "for /: ",
    "not a path",
    "should be string, bytes",
    "expected str instance",
)
INT_DTYPE_WORDS = ("long", "expected scalar type int", "indices", "int64", "integer", "index_select")
INDEX_NAME_RE = re.compile(r"^(targets?|labels?)$|(^|_)(ids|indices|index|idx)$")  # class ids, token ids, top-k
SIZE_WORDS = (
    "converted to an index",
    "cannot be interpreted as an integer",
    "must be int",
    "expected int",
    "unsupported operand",
    "tuple of ints",
)
SCALAR_OF = {"int": "int", "float": "float", "bool": "bool", "NoneType": "none"}


def _path_used(spec: Spec, f: Failure, cand: Candidate) -> bool:
    """Not a `/` between two things neither of which is a str (`'Tensor' and 'int'`)."""
    return not ("for /: " in f.low and "'str'" not in f.low)


def path(spec: Spec, f: Failure, cand: Candidate) -> list[Spec]:
    """A path used as a string (`"file://" + init_file`, `open(path)`) or joined with `/` (`tmp_path / "x"`):
    the suspect becomes a scratch path, `pathlib.Path` when joined with `/`, else `str`."""
    val = "pathlib" if "for /: " in f.low else "str"
    return [
        _set_arg(spec, a["name"], specs.path(a["name"], val))
        for a in suspects(spec, f.line)
        if a["kind"] not in ("path", "group", "namespace")
    ]


def zero_divisor(spec: Spec, f: Failure, cand: Candidate) -> list[Spec]:
    """A count or divisor guessed as an index (0): the world size, then n."""
    sus = suspects(spec, f.line)
    return [
        _set_arg(spec, a["name"], {**a, "expr": e})
        for a in (sus if any(x["kind"] == "int" for x in sus) else _all_args(spec))
        if a["kind"] == "int" and a.get("expr") == "0"
        for e in ("ws", "n")
    ]


def device(spec: Spec, f: Failure, cand: Candidate) -> list[Spec]:
    """`must be torch.device, not ...`: the suspect becomes the rank's device."""
    return [_set_arg(spec, a["name"], specs.device(a["name"])) for a in suspects(spec, f.line) if a["kind"] != "device"]


def scalar(spec: Spec, f: Failure, cand: Candidate) -> list[Spec]:
    """`float(max_norm)`, `.item()` on a tensor: a float, then a 0-d tensor."""
    out = []
    for a in suspects(spec, f.line):
        if a["kind"] == "tensor":
            out.append(_set_arg(spec, a["name"], specs.real(a["name"], 2.0 if "norm_type" in a["name"] else 1.0)))
            out.append(_set_arg(spec, a["name"], {**a, "shape": []}))
    return out


def flag(spec: Spec, f: Failure, cand: Candidate) -> list[Spec]:
    """`if x:` on a tensor: a flag, False then True."""
    return [
        _set_arg(spec, a["name"], specs.flag(a["name"], v))
        for a in suspects(spec, f.line)
        if a["kind"] == "tensor"
        for v in (False, True)
    ]


def _builtin_without_attr(spec: Spec, f: Failure, cand: Candidate) -> bool:
    return f.no_attr is not None and f.no_attr.group(1) in (
        "int",
        "float",
        "NoneType",
        "list",
        "tuple",
        "bool",
    )


def builtin_as_tensor(spec: Spec, f: Failure, cand: Candidate) -> list[Spec]:
    """`'NoneType' object has no attribute 'shape'`: the value of that type (else every suspect) becomes a
    tensor (`w.T`: a matrix); `self.down_proj.shape`: the one that is None."""
    assert f.no_attr is not None
    sus = suspects(spec, f.line)
    shape = ["n", "n"] if f.no_attr.group(2) in ("T", "mT") else ["n"]
    return [
        _set_arg(spec, a["name"], specs.tensor(a["name"], shape))
        for a in of_type(sus, f.no_attr.group(1)) or sus
        if a["kind"] not in ("tensor",)
    ]


def not_tensor(spec: Spec, f: Failure, cand: Candidate) -> list[Spec]:
    """`must be Tensor, not ...`: a non-tensor suspect becomes a 1-D float tensor."""
    return [
        _set_arg(spec, a["name"], specs.tensor(a["name"], ["n"]))
        for a in suspects(spec, f.line)
        if a["kind"] not in ("tensor", "tensors", "group")
    ]


SUBSCRIPTED_RE = r"'(int|float|bool|NoneType)' object is not subscriptable"


def subscripted_scalar(spec: Spec, f: Failure, cand: Candidate) -> list[Spec]:
    """`cu_seqlens_k[i]` guessed as an int: a tensor of indices, then of floats."""
    m = re.search(SUBSCRIPTED_RE, f.msg)
    assert m is not None
    kind = SCALAR_OF[m.group(1)]
    return [
        _set_arg(spec, a["name"], specs.tensor(a["name"], ["n"], dt, **({"high": "n"} if dt == "int64" else {})))
        for a in suspects(spec, f.line)
        if a["kind"] == kind
        for dt in ("int64", "float32")
    ]


def _size_used(spec: Spec, f: Failure, cand: Candidate) -> bool:
    return any(w in f.low for w in SIZE_WORDS) or ("'tensor'" in f.low and "int" in f.low)


def size_as_tensor(spec: Spec, f: Failure, cand: Candidate) -> list[Spec]:
    """`torch.randn(b, s, hd)` with a size guessed as a tensor: an int."""
    return [
        _set_arg(spec, a["name"], specs.integer(a["name"], "n"))
        for a in suspects(spec, f.line)
        if a["kind"] in ("tensor", "tensors")
    ]


def _index_dtype(spec: Spec, f: Failure, cand: Candidate) -> bool:
    # The precedence of the original condition, kept as it behaved: (an int-dtype word AND "float") OR
    # "long" OR "index" anywhere in the message.
    low = f.low
    return (any(w in low for w in INT_DTYPE_WORDS) and "float" in low) or "long" in low or "index" in low


def index_dtype(spec: Spec, f: Failure, cand: Candidate) -> list[Spec]:
    """Float tensors where integers are expected: int64 in [0, n), index-named ones (`target`) first."""
    return [
        _set_arg(spec, a["name"], {**{k: v for k, v in a.items() if k != "grads"}, "dtype": "int64", "high": "n"})
        for a in sorted(suspects(spec, f.line), key=lambda a: not INDEX_NAME_RE.search(a["name"].lower()))
        if a["kind"] in ("tensor", "tensors") and a.get("dtype", "float32").startswith("float")
    ]


def dtype_compare(spec: Spec, f: Failure, cand: Candidate) -> list[Spec]:
    """`x.dtype == datatype` on the failing line: `datatype` is a dtype."""
    sus = suspects(spec, f.line)
    return [
        _set_arg(spec, a["name"], specs.dtype(a["name"], "float32"))
        for user in re.findall(r"\.dtype\s*[!=]=\s*(\w+)\b(?!\.)", f.line)
        for a in sus
        if a["name"] == user and a["kind"] != "dtype"
    ]


def half(spec: Spec, f: Failure, cand: Candidate) -> list[Spec]:
    """A kernel that wants half precision: every tensor bfloat16."""
    return [_with(spec, lambda s: [a.update(dtype="bfloat16") for a in _tensor_args(s)])]


RULES = [
    Rule("path", 70, path, Trigger(words=PATH_WORDS, when=_path_used)),
    Rule(
        "zero_divisor",
        200,
        zero_divisor,
        Trigger(regex=r"greater than 0, got:? 0|division by zero|modulo by zero|must be positive"),
    ),
    Rule("device", 210, device, Trigger(regex=r"must be torch\.device, not|expected one of cpu, cuda")),
    Rule("scalar", 220, scalar, Trigger(words=("converted to python scalar", "cannot be converted to scalar"))),
    Rule("flag", 240, flag, Trigger(words=("boolean value of tensor",))),
    Rule("builtin_as_tensor", 250, builtin_as_tensor, Trigger(when=_builtin_without_attr)),
    Rule("not_tensor", 260, not_tensor, Trigger(words=("must be tensor, not", "expected tensor"))),
    Rule("subscripted_scalar", 290, subscripted_scalar, Trigger(raw_regex=SUBSCRIPTED_RE)),
    Rule("size_as_tensor", 320, size_as_tensor, Trigger(when=_size_used)),
    Rule("index_dtype", 330, index_dtype, Trigger(when=_index_dtype)),
    Rule("dtype_compare", 340, dtype_compare),
    Rule("half", 350, half, Trigger(words=("bfloat16", "half", "float16"))),
]
