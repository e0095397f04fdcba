"""What the repository itself says about an entry's parameters (what a name guess yields to): kind, tensor rank,
dtype, flag-ness, callable arity, rank-valued, uneven splits, each with the source it came from.

Sources, strongest first (`decide` applies this precedence):
- call sites: other functions and tests of the same repository calling the entry (callsites.py,
  precomputed from the checkout into `evidence.jsonl`, since the harness machine has no checkouts);
- annotations, shape comments: `# [s, b, h]` on a line naming the parameter, `x (Tensor): ... [b, s, h]` in
  the docstring (evidence_text.py);
- body usage of the parameter in the entry's own source (computed at harness time from the module text):
  `x.shape[2]`, `b, s, h = x.shape`, `x.dim() == 3`, `if flag:`, `range(k)`, `fn(a, b)`, `src=p` (this module,
  also through the module's own helpers the parameter is passed on to);
- the file: model code (a path under model/layers/transformer/attention/moe/mlp) or `torch.bfloat16` in it
  (evidence_text.model_code).

Only the standard library (ast, json, re) is used; nothing of the candidate is imported or executed.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

# attributes and methods of a tensor that a body reads (an access to anything else means an object)
TENSOR_ATTRS = frozenset(
    "shape size dim ndim ndimension dtype device numel nelement view reshape flatten contiguous float half "
    "bfloat16 double long int bool to cpu cuda detach clone copy_ zero_ fill_ add_ mul_ div_ sub_ sum mean max "
    "min abs sqrt pow exp log softmax narrow chunk split unsqueeze squeeze transpose permute t T mT expand "
    "expand_as repeat masked_fill index_select gather scatter_ scatter_add_ is_contiguous data grad requires_grad "
    "requires_grad_ backward item tolist new_empty new_zeros new_ones new_tensor type_as element_size "
    "storage untyped_storage data_ptr is_cuda is_floating_point stride norm argmax argmin topk sort cumsum "
    "eq ne gt lt ge le any all isnan isinf nan_to_num clamp clamp_ float_ record_stream square matmul mm bmm "
    "is_leaf main_grad".split()
)
STR_METHODS = frozenset("startswith endswith format lower upper strip lstrip rstrip replace join encode".split())
RANK_KEYWORDS = frozenset(
    "src dst root peer group_src group_dst src_rank dst_rank global_src global_dst rank_src rank_dst".split()
)
INT_DTYPE_RE = re.compile(r"u?int\d*$|long$|short$")
P2P_OPS = frozenset({"send", "recv", "isend", "irecv", "P2POp", "send_object_list", "recv_object_list"})
RANK_POSITIONAL = {"send": 1, "recv": 1, "isend": 1, "irecv": 1, "broadcast": 1, "reduce": 1, "P2POp": 2}
# tensors that real model code keeps in float32 even when activations are bf16 (statistics, losses, masks)
FP32_NAME_RE = re.compile(
    r"(^|_)(loss|losses|grad|grads|gradient|norm|norms|stat|stats|mask|ids?|index|indices|label|labels|logps|"
    r"seed|count|counts|scale|scales|amax|var|mean|step|lr|bucket|buffer|flat|param|params|main)(_|$)",
    re.I,
)
# matrix products: function or method -> (rank of its operands, exact); F.linear's weight is a matrix too
MATMUL_FNS = {"matmul": (2, False), "mm": (2, True), "bmm": (3, True), "linear": (2, False)}
TRANSPOSES = frozenset({"t", "transpose", "permute"})
SPLIT_WORDS = re.compile(r"bincount|histc|tokens_per_expert|num_tokens|\.tolist\(\)|counts?\b|seqlens")


class EvidenceError(ValueError):
    """A malformed evidence cache (the message names the file, the line and the reason)."""


@dataclass
class Clue:
    """One piece of evidence about one parameter: `kind` is tensor, int, float, number (int or float), bool,
    str, callable, dtype, rank, splits, object or mode (a ColossalAI ParallelMode member); `source` says where
    it came from (call_site PATH:LINE, test PATH:LINE, annotation, shape_comment, docstring, body)."""

    kind: str
    source: str
    ndim: int | None = None  # exact tensor rank
    min_ndim: int | None = None  # at least this rank (`x.shape[2]`)
    dtype: str | None = None
    value: Any = None  # a literal (bool, int, float, str, mode name)
    arity: int | None = None  # a callable's positional arguments
    uneven: bool = False  # split sizes computed from routing (token counts)
    fields: list[str] = field(default_factory=list)  # an object's attributes read by the body

    def to_dict(self) -> dict[str, Any]:
        # a literal False or 0 is evidence; only absent details and the defaults of uneven/fields are left out
        d = asdict(self)
        return {k: v for k, v in d.items() if v is not None and not (k in ("uneven", "fields") and not v)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Clue:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


# ---- body usage -------------------------------------------------------------------------------------------


def entry_node(tree: ast.Module, entry: str, kind: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The entry's def in a parsed module: `f`, `Cls.m`, or an autograd Function's `forward`."""
    parts = entry.split(".")
    if kind == "autograd_function" and len(parts) == 1:
        parts = [parts[0], "forward"]
    body: list[ast.stmt] = tree.body
    node: ast.AST | None = None
    for part in parts:
        node = next(
            (
                s
                for s in body
                if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and s.name == part
            ),
            None,
        )
        if node is None:
            return None
        body = node.body
    return node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def _int(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        v = node.operand.value
        return -v if type(v) is int else None
    return None


def _is(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _from_index(k: int | None) -> int | None:
    """The least rank a tensor indexed by dimension k has."""
    return None if k is None else (k + 1 if k >= 0 else -k)


class _Body(ast.NodeVisitor):
    """Clues about the parameters `names` from one function body."""

    def __init__(self, names: Iterable[str]) -> None:
        self.names = set(names)
        self.clues: dict[str, list[Clue]] = {n: [] for n in self.names}
        self.tests: set[str] = set()  # used as a truth value
        self.tensorish: set[str] = set()
        self.objattrs: dict[str, set[str]] = {}
        self.called: set[str] = set()  # whose attribute is called (a method: not a plain data object)

    def add(self, name: str, kind: str, **keys: Any) -> None:
        self.clues[name].append(Clue(kind, "body", **keys))

    def _name(self, node: ast.AST) -> str | None:
        return node.id if isinstance(node, ast.Name) and node.id in self.names else None

    def visit_Attribute(self, node: ast.Attribute) -> None:
        n = self._name(node.value)
        if n:
            if node.attr in TENSOR_ATTRS:
                self.tensorish.add(n)
            elif node.attr in STR_METHODS:
                self.add(n, "str")
            elif not node.attr.startswith("_"):
                self.objattrs.setdefault(n, set()).add(node.attr)
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        v = node.value
        if isinstance(v, ast.Attribute) and v.attr == "shape" and self._name(v.value):
            m = _from_index(_int(node.slice))
            if m:
                self.add(v.value.id, "tensor", min_ndim=m)
        n = self._name(v)
        if n and isinstance(node.slice, ast.Tuple):
            elts = node.slice.elts
            if not any(isinstance(e, ast.Constant) and e.value in (None, Ellipsis) for e in elts):
                if any(isinstance(e, ast.Slice) for e in elts):
                    self.add(n, "tensor", min_ndim=len(elts))
        self.generic_visit(node)

    def _operand(self, node: ast.AST) -> str | None:
        """The parameter a matrix-product operand is: `w`, `w.t()`, `w.T`, `w.mT`, `w.transpose(0, 1)`."""
        if isinstance(node, ast.Attribute) and node.attr in ("T", "mT"):
            return self._name(node.value)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in TRANSPOSES:
            return self._name(node.func.value)
        return self._name(node)

    def _matrix(self, operands: Iterable[ast.AST], ndim: int = 2, exact: bool = False) -> None:
        """Operands of a matrix product are matrices (`bmm`: batches of them): a matmul stays a matmul."""
        for o in operands:
            n = self._operand(o)
            if n:
                self.add(n, "tensor", **({"ndim": ndim} if exact else {"min_ndim": ndim}))

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult):
            self._matrix((node.left, node.right))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        op = f.attr if isinstance(f, ast.Attribute) else ""
        if op in MATMUL_FNS and not self._name(getattr(f, "value", None)):  # torch.matmul(a, b), F.linear(x, w)
            self._matrix(node.args[:2], *MATMUL_FNS[op])
        elif op in MATMUL_FNS and node.args:  # a.matmul(b), a.mm(b)
            self._matrix((f.value, node.args[0]), *MATMUL_FNS[op])
        if isinstance(f, ast.Attribute) and self._name(f.value):
            n = f.value.id
            if f.attr not in TENSOR_ATTRS:
                self.called.add(n)
            ints = [_int(a) for a in node.args]
            if f.attr == "size" and len(node.args) == 1:
                m = _from_index(ints[0])
                if m:
                    self.add(n, "tensor", min_ndim=m)
            elif f.attr == "permute" and node.args and all(i is not None for i in ints) and len(ints) > 1:
                self.add(n, "tensor", ndim=len(ints))
            elif f.attr == "transpose" and len(ints) == 2 and None not in ints:
                self.add(n, "tensor", min_ndim=max(_from_index(i) or 0 for i in ints))
        n = self._name(f)
        if n:
            self.add(n, "callable", arity=len(node.args) + len(node.keywords))  # a keyword: not a unary op
        if isinstance(f, ast.Attribute) and _is(f.value, "gpc") and node.args and self._name(node.args[0]):
            self.add(node.args[0].id, "mode")  # ColossalAI's global context takes a ParallelMode
        if isinstance(f, ast.Attribute) and _is(f.value, "torch") and f.attr == "tensor" and node.args:
            data = node.args[0]
            dt = next((k.value for k in node.keywords if k.arg == "dtype"), None)
            whole = isinstance(dt, ast.Attribute) and _is(dt.value, "torch") and INT_DTYPE_RE.match(dt.attr)
            for e in data.elts if isinstance(data, (ast.List, ast.Tuple)) else []:
                if self._name(e):  # `torch.tensor([item])`: a Python number (an int for an integer dtype)
                    self.add(e.id, "number", value="int" if whole else None)
        if _is(f, "range") and len(node.args) >= 1:
            for a in node.args:
                if self._name(a):
                    self.add(a.id, "int")
        self._ranks(node)
        for kw in node.keywords:
            kn = self._name(kw.value)
            if kn and kw.arg in ("async_op", "non_blocking"):
                self.add(kn, "bool")
            if kn and kw.arg == "dtype":
                self.add(kn, "dtype")
        self.generic_visit(node)

    def _ranks(self, node: ast.Call) -> None:
        """`src=p`, `dist.broadcast(t, p)`: a root; the peer of a point-to-point op (`dist.isend(t, p)`)."""
        f = node.func
        op = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        p2p = op in P2P_OPS
        for kw in node.keywords:
            if kw.arg in RANK_KEYWORDS and self._name(kw.value):
                self.add(kw.value.id, "rank", value="peer" if p2p else kw.arg)
        i = RANK_POSITIONAL.get(op)
        if i is not None and len(node.args) > i and self._name(node.args[i]):
            self.add(node.args[i].id, "rank", value="peer" if p2p else "src")

    def visit_Assign(self, node: ast.Assign) -> None:
        v = node.value
        target = node.targets[0]
        src = None
        if isinstance(v, ast.Attribute) and v.attr == "shape":
            src = self._name(v.value)
        elif isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr == "size" and not v.args:
            src = self._name(v.func.value)
        if (
            src
            and isinstance(target, (ast.Tuple, ast.List))
            and not any(isinstance(e, ast.Starred) for e in target.elts)
        ):
            self.add(src, "tensor", ndim=len(target.elts))
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        if len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq):
            left, right = node.left, node.comparators[0]
            for a, b in ((left, right), (right, left)):
                k = _int(b)
                n = self._dim_of(a)
                if n and k is not None and k > 0:
                    self.add(n, "tensor", ndim=k)
            for a, b in ((left, right), (right, left)):
                n = self._name(a)
                if n and isinstance(b, ast.Attribute) and _is(b.value, "ParallelMode"):
                    self.add(n, "mode", value=b.attr)
                if n and isinstance(b, ast.Call) and getattr(b.func, "attr", getattr(b.func, "id", "")) == "get_rank":
                    self.add(n, "rank", value="src")  # compared with the own rank: a root, not the rank
        self.generic_visit(node)

    def _dim_of(self, node: ast.AST) -> str | None:
        """`x.dim()`, `x.ndim`, `len(x.shape)` -> x."""
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("dim", "ndimension")
        ):
            return self._name(node.func.value)
        if isinstance(node, ast.Attribute) and node.attr == "ndim":
            return self._name(node.value)
        if isinstance(node, ast.Call) and _is(node.func, "len") and len(node.args) == 1:
            a = node.args[0]
            if isinstance(a, ast.Attribute) and a.attr == "shape":
                return self._name(a.value)
        return None

    def _test(self, node: ast.AST) -> None:
        """A truth-value test: `if p`, `if not p`, `p and q`."""
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return self._test(node.operand)
        if isinstance(node, ast.BoolOp):
            for v in node.values:
                self._test(v)
            return
        n = self._name(node)
        if n:
            self.tests.add(n)

    def visit_If(self, node: ast.If) -> None:
        self._test(node.test)
        self.generic_visit(node)

    visit_While = visit_If

    def visit_IfExp(self, node: ast.IfExp) -> None:
        self._test(node.test)
        self.generic_visit(node)

    def visit_Assert(self, node: ast.Assert) -> None:
        self._test(node.test)
        self.generic_visit(node)

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        self._test(node)
        self.generic_visit(node)

    def finish(self) -> dict[str, list[Clue]]:
        for n in self.tensorish:
            if not any(c.kind == "tensor" for c in self.clues[n]):
                self.add(n, "tensor")
        for n in self.tests - self.tensorish:
            if not self.clues[n] and n not in self.objattrs:
                self.add(n, "bool")
        for n, attrs in self.objattrs.items():
            if n not in self.tensorish | self.called and not any(c.kind == "tensor" for c in self.clues[n]):
                self.add(n, "object", fields=sorted(attrs))
        return {n: cs for n, cs in self.clues.items() if cs}


def body_clues(module_text: str, entry: str, kind: str, names: Iterable[str]) -> dict[str, list[Clue]]:
    """Clues about parameters `names` from the entry's body in `module_text` ({} when it does not parse)."""
    try:
        tree = ast.parse(module_text)
    except SyntaxError:
        return {}
    fn = entry_node(tree, entry, kind)
    if fn is None:
        return {}
    v = _Body(names)
    for stmt in fn.body:
        v.visit(stmt)
    out = v.finish()
    for n, cs in _through_helpers(tree, fn, set(names)).items():
        out.setdefault(n, []).extend(c for c in cs if c.kind != "object")
    return out


def _through_helpers(tree: ast.Module, fn: ast.AST, names: set[str]) -> dict[str, list[Clue]]:
    """Clues about parameters the entry passes on to a function of the same module (`_fill(t, dist.isend,
    dst)`), from that function's body (one level)."""
    helpers = {s.name: s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
    out: dict[str, list[Clue]] = {}
    for call in (c for c in ast.walk(fn) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)):
        helper = helpers.get(call.func.id)
        if helper is None or helper is fn:
            continue
        params = [a.arg for a in helper.args.posonlyargs + helper.args.args]
        pairs = list(zip(params, call.args)) + [(k.arg, k.value) for k in call.keywords if k.arg]
        passed = {p: a.id for p, a in pairs if isinstance(a, ast.Name) and a.id in names}
        if not passed:
            continue
        v = _Body(passed)
        for stmt in helper.body:
            v.visit(stmt)
        for p, cs in v.finish().items():
            out.setdefault(passed[p], []).extend(cs)
    return out
