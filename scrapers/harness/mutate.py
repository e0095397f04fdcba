"""Error-driven adjustments of a harness spec: parse the failure, propose the next specs to try."""
from __future__ import annotations

import re
from typing import Any, Callable

from scrapers.harness.containers import container_fixes, grad_fix, scalar_draws
from scrapers.harness.guess import GROUP_RE, NAMESPACE_RE, guess_arg, param_named
from scrapers.harness.optimfix import OPTIM_PARAM_KINDS, optimizer_fixes, state_attr_fix
from scrapers.harness.peers import peer_fixes
from scrapers.harness.sizes import grad_shape_fixes, ndim_fixes, size_fixes, slot_fixes, unpack_fixes
from scrapers.harness.specedit import _all_args, of_type, _set_arg, _shape_all, _suspects, _tensor_args, _with, \
    candidate_loops
from scrapers.harness.statefix import state_from_init

SHAPE_WORDS = ("size of tensor", "shapes cannot be multiplied", "dimension out of range", "too many indices",
               "not enough values to unpack", "view size", "invalid for input of size", "shape", "must match",
               "mismatch", "expected size", "same size", "same number of elements", "split_with_sizes",
               "split sizes", "divisible", "chunk", "must be equal", "out of bounds", "index", "mat1", "mat2",
               "but got", "expected", "assert")
INT_DTYPE_WORDS = ("long", "expected scalar type int", "indices", "int64", "integer", "index_select")
INDEX_NAME_RE = re.compile(r"^(targets?|labels?)$|(^|_)(ids|indices|index|idx)$")    # class ids, token ids, top-k
GLOBAL_SHAPES = (["n"], ["n", "n"], ["n*ws", "n"], ["n", "n*ws"], ["ws", "n"], ["n", "n", "n"], ["n*ws"],
                 ["n*ws", "n", "n"], ["n", "n", "n", "n"])

DICT_METHODS = ("items", "keys", "values", "get")
DICT_NAME_RE = re.compile(r"(^|_)(dict|dicts|state|sd|map|batch|nested)($|_)")  # an argument that may be a dict
STATE_GETTER_RE = re.compile(r"_?get_\w*(group|groups|world_size|rank|size)$")   # `mpu.get_model_parallel_group`

LOG_RE = re.compile(r"(see_memory_usage|(print|log|debug|warn|report|nvtx)(_\w+)?|\w+_(log|print|nvtx\w*))$")
Mutation = Callable[[dict[str, Any]], dict[str, Any] | None]


def _field(name: str) -> dict[str, Any]:
    """A guessed attribute/field; tensors of objects are replicated (weights, tables, constants). A config
    entry named by one capital (`config["M"]`, GEMM and attention sizes) is an int."""
    if re.fullmatch(r"[MNKBSHDLE]", name):
        return {"name": name, "kind": "int", "expr": "n"}
    a = guess_arg(name.lstrip("_"), None, None)
    a["name"] = name
    if a["kind"] in ("tensor", "tensors"):
        a["replicated"] = True
    return a


def _object_fix(spec: dict[str, Any], err: dict[str, Any], owner: str, attr: str) -> list[dict[str, Any]]:
    """`'Tensor'/'_MgNamespace' object has no attribute X` or `KeyError: X`: the argument used as `arg.X`
    (or `arg[X]`) is a config/namespace (or dict) object; give it field X. A group/size/rank getter
    (`arg.get_dp_group()`) makes it a parallel-state object."""
    line = err.get("line", "")
    users = re.findall(rf"(\w+)\s*(?:\.\s*{re.escape(attr)}\b|\[\s*['\"]{re.escape(attr)}['\"])", line)
    if attr in DICT_METHODS:
        users += re.findall(rf"(\w+)\s*\.\s*{attr}\b", line)
        if owner == "Tensor" and not any(a["name"] in users for a in _all_args(spec)):    # through a helper
            tensors = [a["name"] for a in _all_args(spec) if a["kind"] == "tensor"]
            named = [t for t in tensors if DICT_NAME_RE.search(t.lower())]
            users += named or (tensors if len(tensors) == 1 else [])
    out = []
    for a in _all_args(spec):
        if a["name"] not in users and not (owner == "KeyError" and a.get("dict")):
            continue
        if owner != "KeyError" and STATE_GETTER_RE.match(attr):     # `self.dist_index.get_dp_group()`
            out.append(_set_arg(spec, a["name"], {"name": a["name"], "kind": "group", "value": "state"}))
            continue
        if a["kind"] == "namespace":
            if all(f["name"] != attr for f in a["fields"]) and attr not in DICT_METHODS:
                out.append(_set_arg(spec, a["name"], {**a, "fields": a["fields"] + [_field(attr)]}))
        elif a["kind"] == "tensor" and owner == "Tensor" and attr in ("append", "extend", "insert"):
            out.append(_set_arg(spec, a["name"], {**a, "kind": "tensors", "count": "0"}))   # a list to fill
        elif a["kind"] in ("tensor", "tensors") and owner == "Tensor":
            as_dict = attr in DICT_METHODS
            if a["kind"] == "tensor" and not as_dict and all(f["name"] != attr for f in a.get("fields", [])):
                out.append(_set_arg(spec, a["name"], {**a, "fields": a.get("fields", []) + [_field(attr)]}))
            fields = [{**_field(k), "replicated": False} for k in ("w0", "w1")] if as_dict else [_field(attr)]
            out.append(_set_arg(spec, a["name"], {"name": a["name"], "kind": "namespace", "fields": fields,
                                                  **({"dict": True} if as_dict else {})}))
    return out


MODULE_METHODS = ("parameters", "named_parameters", "buffers", "named_buffers", "modules", "named_modules",
                  "children", "state_dict", "zero_grad")


def _module_fix(spec: dict[str, Any], err: dict[str, Any], low: str, cand: dict[str, Any]) -> list[dict[str, Any]]:
    """`model.parameters()` on a guessed tensor/list/namespace (`... is not callable`, `no attribute
    'parameters'`): the argument is a model; per-rank weights first, then replicated ones. A loop variable
    over an argument (`for chunk in model: chunk.parameters()`) makes the argument a list of models."""
    if "not callable" not in low and "attribute" not in low:
        return []
    users = re.findall(rf"(\w+)\s*\.\s*(?:{'|'.join(MODULE_METHODS)})\s*\(", err.get("line", ""))
    if not users and re.search(rf"\b(?:{'|'.join(MODULE_METHODS)})\b", low):   # a helper looked for it
        users = [a["name"] for a in _all_args(spec) if re.search(r"(^|_)(model|module)s?($|_)", a["name"].lower())
                 and a["kind"] in ("tensor", "tensors", "namespace")]
    loops = candidate_loops(cand)
    chunked = {loops[u] for u in users if u in loops}
    return [_set_arg(spec, a["name"], {"name": a["name"], "kind": "module", "shape": ["n"], "count": "2",
                                       "dtype": "float32", **({"replicated": True} if rep else {}),
                                       **({"chunks": 2} if a["name"] in chunked else {})})
            for a in _all_args(spec) if (a["name"] in users or a["name"] in chunked)
            and (a["kind"] != "module" or a["name"] in chunked and "chunks" not in a) for rep in (False, True)]


PATH_WORDS = ("expected str, bytes or os.pathlike", "must be str, bytes, or os.pathlike", "can only concatenate str (not",
              "for /: ", "not a path", "should be string, bytes", "expected str instance")


def _callable_fix(spec: dict[str, Any], err: dict[str, Any], msg: str) -> list[dict[str, Any]]:
    """A guessed callable called the wrong way (`gelu() missing 1 required positional argument`, a
    factory/method called with no tensor), or a non-callable value called (`'list' object is not callable`):
    the argument (or field) becomes a no-op callable that accepts anything (a tensor called still becomes
    gelu first, below)."""
    out = []
    m = re.match(r"(\w+)\(\) (?:missing|got an unexpected|takes)", msg)
    if m:
        out += [_set_arg(spec, a["name"], {"name": a["name"], "kind": "fn", "value": "noop"})
                for a in _all_args(spec) if a["kind"] == "fn" and a.get("value", "gelu") == m.group(1)]
    m = re.search(r"'(\w+)' object is not callable", msg)
    kinds = {"list": ("tensors", "splits"), "bool": ("bool",), "int": ("int",), "float": ("float",),
             "NoneType": ("none",), "str": ("path",)}.get(m.group(1) if m else "", ())
    if kinds:
        out += [_set_arg(spec, a["name"], {"name": a["name"], "kind": "fn", "value": "noop"})
                for a in _suspects(spec, err) if a["kind"] in kinds]
    return out


def _path_fix(spec: dict[str, Any], err: dict[str, Any], low: str) -> list[dict[str, Any]]:
    """A path used as a string (`"file://" + init_file`, `open(path)`) or joined with `/` (`tmp_path / "x"`):
    the suspect becomes a scratch path, `pathlib.Path` when joined with `/`, else `str`."""
    if not any(w in low for w in PATH_WORDS) or "for /: " in low and "'str'" not in low:
        return []
    val = "pathlib" if "for /: " in low else "str"
    return [_set_arg(spec, a["name"], {"name": a["name"], "kind": "path", "value": val})
            for a in _suspects(spec, err) if a["kind"] not in ("path", "group", "namespace")]


def _global_fix(spec: dict[str, Any], err: dict[str, Any], msg: str) -> list[dict[str, Any]]:
    """`NameError: name 'HIDDEN_SIZE' is not defined` inside the candidate: a module global that the
    extracted code lacks (a constant, or a group/args set by an init function); guessed from its name."""
    m = re.search(r"name '(\w+)' is not defined", msg)
    if err.get("type") != "NameError" or not err.get("in_candidate") or not m:
        return []
    name = m.group(1)
    low = name.lstrip("_").lower()
    if LOG_RE.match(low) and re.match(rf"\s*{name}\s*\(", err.get("line", "")) and \
            not any(g["name"] == name for g in spec.get("globals", [])):    # a logging call as a statement
        return [_with(spec, lambda s: s.setdefault("globals", []).append({"name": name, "kind": "fn",
                                                                          "value": "noop"}))]
    if not (re.fullmatch(r"_*[A-Z][A-Z0-9_]*", name) or GROUP_RE.search(low) or NAMESPACE_RE.search(low)
            or _field(low)["kind"] in ("dtype", "device", "int", "float")):   # `dtype`, `world_size` of a script
        return []
    if any(g["name"] == name for g in spec.get("globals", [])):
        return []
    a = _field(name.lstrip("_").lower())
    a["name"] = name
    return [_with(spec, lambda s: s.setdefault("globals", []).append(a))]


def _none_global(cand: dict[str, Any], name: str) -> bool:
    """`name = None` at module level in the candidate's code (`g_mpu = None`, set by an init function)."""
    return bool(re.search(rf"^{re.escape(name)}\s*(:[^=\n]*)?=\s*None\b", cand.get("_text", ""), re.M))


def _group_fix(spec: dict[str, Any], err: dict[str, Any], cand: dict[str, Any], msg: str) -> list[dict[str, Any]]:
    """A guessed process group used as something else: an object with attributes (`pg.tp_world_size`), a list
    of groups (`groups[0]`, `for g in groups`), a size (`group <= 1`). Also `'NoneType' object has no
    attribute X` on a parameter left to its default None, or on a module global set to None (`g_mpu = None`):
    pass a parallel-state object when X is a group/size/rank getter, else an object with field X."""
    line, out = err.get("line", ""), []
    attr = re.search(r"has no attribute '(\w+)'", msg)
    if "NoneType" in msg and attr:
        have = {a["name"] for a in _all_args(spec)}
        state = bool(STATE_GETTER_RE.match(attr.group(1)))
        for user in re.findall(rf"(?<![\w.])(\w+)\s*\.\s*{attr.group(1)}\b", line):
            p = param_named(cand, user)
            new = {"name": user, "kind": "group", "value": "state"} if state else \
                {"name": user, "kind": "namespace", "fields": [_field(attr.group(1))]}
            if p and user not in have and p.get("default") is not None:
                out.append(_with(spec, lambda s, new=new: s["args"].append({**new, "keyword": True})))
            elif not p and user not in have and _none_global(cand, user):
                out.append(_with(spec, lambda s, new=new: s.setdefault("globals", []).append(new)))
    if "ProcessGroup" not in msg:
        return out
    groups = [a for a in _all_args(spec) if a["kind"] == "group" and a.get("value", "world") == "world"]
    named = [a for a in groups if re.search(rf"\b{re.escape(a['name'])}\b", line)] or groups
    for a in named:
        if attr:
            new = {"name": a["name"], "kind": "namespace", "fields": [_field(attr.group(1))]}
        elif any(w in msg for w in ("not subscriptable", "not iterable", "has no len", "unpack non-iterable")):
            new = {"name": a["name"], "kind": "group", "value": "list"}
        elif "not supported between" in msg or "'int'" in msg:
            new = {"name": a["name"], "kind": "int", "expr": "ws"}
        else:
            continue
        out.append(_set_arg(spec, a["name"], new))
    return out


def propose(spec: dict[str, Any], err: dict[str, Any], cand: dict[str, Any]) -> list[dict[str, Any]]:
    """Next specs to try after `err` (most specific first)."""
    msg, typ = err.get("msg", ""), err.get("type", "")
    low = msg.lower()
    out: list[dict[str, Any]] = grad_shape_fixes(spec, msg, err.get("ws", 2)) + \
        slot_fixes(spec, msg, err.get("line", ""))
    out += optimizer_fixes(spec, err, msg, cand) + peer_fixes(spec, low, err.get("line", "")) + \
        _global_fix(spec, err, msg) + _callable_fix(spec, err, msg) + _path_fix(spec, err, low) + \
        _group_fix(spec, err, cand, msg)
    m = re.search(r"missing (?:\d+ )?required (?:positional|keyword-only) arguments?: (.+)", msg)
    if m:
        names = re.findall(r"'(\w+)'", m.group(1))
        def add(s: dict[str, Any]) -> None:
            for nm in names:
                p = param_named(cand, nm)
                a = guess_arg(nm, p.get("annotation") if p else None, cand.get("docstring"))
                if p is None or p["kind"] == "kwonly" or any(x.get("keyword") for x in s["args"]):
                    a["keyword"] = True
                s["args"].append(a)
        return out + [_with(spec, add)]
    m = re.search(r"unexpected keyword argument '(\w+)'", msg) or re.search(r"takes .* but (\d+) .* given", msg)
    callee = re.match(r"([\w.]+)\(\)", msg)
    if m and callee and callee.group(1) in {a.get("value", "gelu") for a in _all_args(spec) if a["kind"] == "fn"}:
        return out                        # a guessed callable's complaint (`gelu() got ... 'fan_in'`), not the entry's
    if m:
        return out + [_with(spec, lambda s: s["args"].pop())]
    m = re.search(r"'(\w+)' object has no attribute '(\w+)'", msg)
    if m and cand["kind"] == "method" and m.group(1) == cand["entry"].split(".")[0]:
        nm = m.group(2)
        a = guess_arg(nm.lstrip("_"), None, None)
        a["name"] = nm
        if a["kind"] == "tensor":
            a["replicated"] = True
        single = [] if nm in cand.get("_defined", ()) else [_with(spec, lambda s: s["attrs"].append(a))]
        return state_attr_fix(spec, nm) + state_from_init(spec, cand, nm) + single   # a failing property: not set
    out += _module_fix(spec, err, low, cand)
    if m and m.group(1) in ("Tensor", "_MgNamespace"):
        out += _object_fix(spec, err, m.group(1), m.group(2))
    k = re.fullmatch(r"'(\w+)'", msg.strip()) if typ == "KeyError" else None
    if k:
        out += _object_fix(spec, err, "KeyError", k.group(1))
    for user, key in re.findall(r"(\w+)\s*\[\s*['\"](\w+)['\"]\s*\]", err.get("line", "")):
        for a in _all_args(spec):
            if a["name"] == user and a["kind"] == "namespace" and not a.get("dict") and "subscriptable" in low:
                out.append(_set_arg(spec, user, {**a, "dict": True, "fields": a.get("fields", []) + [_field(key)]}))
            elif a["name"] == user and a["kind"] != "namespace":
                out.append(_set_arg(spec, user, {"name": user, "kind": "namespace", "dict": True,
                                                 "fields": [_field(key)]}))
    if "must be a mapping, not tensor" in low or "'tensor' object is not a mapping" in low:   # `f(**kw)`, `{**kw}`
        out += [_set_arg(spec, a["name"], {"name": a["name"], "kind": "namespace", "dict": True, "fields": []})
                for a in _all_args(spec) if a["kind"] == "tensor"
                and re.search(rf"\*\*\s*{re.escape(a['name'])}\b", err.get("line", ""))]
    out += container_fixes(spec, err, low, cand)
    sus = _suspects(spec, err)
    per_rank = re.search(r"expected length \d+, got \d+|list size should be \d+", low)     # one entry per rank
    if per_rank or "list size, must be world size" in low:
        for a in sus:                    # a tensor where a list of one tensor per rank is expected
            if a["kind"] == "tensor":
                out.append(_set_arg(spec, a["name"], {**a, "kind": "tensors", "count": "ws"}))
    if per_rank:
        for a in _all_args(spec):        # a count guessed as n (ranks stay: "0" is a rank, not a count)
            if a["kind"] == "int" and a.get("expr") not in ("ws", "0"):
                out.append(_set_arg(spec, a["name"], {**a, "expr": "ws"}))
            elif a["kind"] == "tensors" and a.get("count", "ws") != "ws":
                out.append(_set_arg(spec, a["name"], {**a, "count": "ws"}))
    if re.search(r"greater than 0, got:? 0|division by zero|modulo by zero|must be positive", low):
        for a in sus if any(x["kind"] == "int" for x in sus) else _all_args(spec):
            if a["kind"] == "int" and a.get("expr") == "0":         # a count or divisor guessed as an index
                out += [_set_arg(spec, a["name"], {**a, "expr": e}) for e in ("ws", "n")]
    if re.search(r"must be torch\.device, not|expected one of cpu, cuda", low):
        out += [_set_arg(spec, a["name"], {"name": a["name"], "kind": "device"})
                for a in sus if a["kind"] != "device"]
    if "converted to python scalar" in low or "cannot be converted to scalar" in low:   # `float(max_norm)`, `.item()`
        for a in sus:
            if a["kind"] == "tensor":
                out.append(_set_arg(spec, a["name"], {"name": a["name"], "kind": "float",
                                                      "value": 2.0 if "norm_type" in a["name"] else 1.0}))
                out.append(_set_arg(spec, a["name"], {**a, "shape": []}))
    # `params[0]`, `torch.stack(grads)` after keeping the tensors that have a gradient
    if "list index out of range" in low or "non-empty" in low:
        out += grad_fix(spec, cand, {a["name"] for a in sus})
    if "boolean value of tensor" in low:
        for a in sus:
            if a["kind"] == "tensor":
                for v in (False, True):
                    out.append(_set_arg(spec, a["name"], {"name": a["name"], "kind": "bool", "value": v}))
    if m and m.group(1) in ("int", "float", "NoneType", "list", "tuple", "bool"):
        shape = ["n", "n"] if m.group(2) in ("T", "mT") else ["n"]      # `w.T`: a matrix
        for a in of_type(sus, m.group(1)) or sus:       # `self.down_proj.shape`: the one that is None
            if a["kind"] not in ("tensor",):
                out.append(_set_arg(spec, a["name"], {"name": a["name"], "kind": "tensor", "shape": shape,
                                                      "dtype": "float32"}))
    if "must be tensor, not" in low or "expected tensor" in low:
        for a in sus:
            if a["kind"] not in ("tensor", "tensors", "group"):
                out.append(_set_arg(spec, a["name"], {"name": a["name"], "kind": "tensor", "shape": ["n"],
                                                      "dtype": "float32"}))
    if "'tensor' object is not callable" in low or "'list' object is not callable" in low:
        called = set(re.findall(r"(?<![\w.])(?:self\.)?(\w+)\s*\(", err.get("line", "")))
        for a in [a for a in sus if a["name"] in called] or sus:       # `self.projection(x)`: the callee
            if a["kind"] in ("tensor", "tensors"):
                out.append(_set_arg(spec, a["name"], {"name": a["name"], "kind": "fn", "value": "gelu"}))
    if re.search(r"'module' object is not (iterable|subscriptable)|object of type 'module' has no len", low):
        for a in sus:           # Megatron's model: a list of model chunks
            if a["kind"] == "module" and "chunks" not in a:
                out.append(_set_arg(spec, a["name"], {**a, "chunks": 2}))
    m2 = re.search(r"'(int|float|bool|NoneType)' object is not subscriptable", msg)
    if m2:                                     # `cu_seqlens_k[i]` guessed as an int: a tensor of indices
        kind = {"int": "int", "float": "float", "bool": "bool", "NoneType": "none"}[m2.group(1)]
        out += [_set_arg(spec, a["name"], {"name": a["name"], "kind": "tensor", "shape": ["n"], "dtype": dt,
                                           **({"high": "n"} if dt == "int64" else {})})
                for a in sus if a["kind"] == kind for dt in ("int64", "float32")]
    if "'int' object is not iterable" in low or "cannot unpack non-iterable int" in low:
        for a in sus:
            if a["kind"] == "int":
                out.append(_set_arg(spec, a["name"], {"name": a["name"], "kind": "splits", "expr": "n"}))
    if "object is not iterable" in low or "has no len" in low or "must be a list" in low or "list of" in low \
            or "not subscriptable" in low and "tensor" not in low:
        for a in sus:
            if a["kind"] == "tensor":
                out.append(_set_arg(spec, a["name"], {**a, "kind": "tensors", "count": "ws"}))
    if "converted to an index" in low or "cannot be interpreted as an integer" in low or ("'tensor'" in low and "int" in low) \
            or "must be int" in low or "expected int" in low or "unsupported operand" in low \
            or "tuple of ints" in low:           # `torch.randn(b, s, hd)` with a size guessed as a tensor
        for a in sus:
            if a["kind"] in ("tensor", "tensors"):
                out.append(_set_arg(spec, a["name"], {"name": a["name"], "kind": "int", "expr": "n"}))
    if any(w in low for w in INT_DTYPE_WORDS) and "float" in low or "long" in low or "index" in low:
        for a in sorted(sus, key=lambda a: not INDEX_NAME_RE.search(a["name"].lower())):   # `target` first
            if a["kind"] in ("tensor", "tensors") and a.get("dtype", "float32").startswith("float"):
                out.append(_set_arg(spec, a["name"], {**{k: v for k, v in a.items() if k != "grads"},
                                                      "dtype": "int64", "high": "n"}))
    for user in re.findall(r"\.dtype\s*[!=]=\s*(\w+)\b(?!\.)", err.get("line", "")):    # `x.dtype == datatype`
        out += [_set_arg(spec, a["name"], {"name": a["name"], "kind": "dtype", "value": "float32"})
                for a in sus if a["name"] == user and a["kind"] != "dtype"]
    if "bfloat16" in low or "half" in low or "float16" in low:
        out.append(_with(spec, lambda s: [a.update(dtype="bfloat16") for a in _tensor_args(s)]))
    if "world_size times" in low or "output tensor size" in low or "tensor size must" in low \
            or "output tensor" in low or "input tensor" in low or "split" in low or "divisible" in low:
        for a in _tensor_args(spec):
            for shp in (["n*ws"] + a["shape"][1:], ["n"] + a["shape"][1:], ["n*ws*ws"] + a["shape"][1:]):
                if shp != a["shape"]:
                    out.append(_shape_all(spec, shp, {a["name"]}))
    line = err.get("line", "")
    out += unpack_fixes(spec, msg, line) + ndim_fixes(spec, msg, line, sus) + size_fixes(spec, msg, sus, err.get("ws", 2), line)
    if (any(w in low for w in SHAPE_WORDS) or typ in ("AssertionError", "IndexError", "ValueError", "RuntimeError")) \
            and "boolean value of tensor" not in low:        # a flag, not a shape (proposed above)
        for a in sus:
            if a["kind"] in ("tensor", "tensors"):
                for shp in GLOBAL_SHAPES:
                    if shp != a["shape"]:
                        out.append(_shape_all(spec, shp, {a["name"]}))
        for shp in GLOBAL_SHAPES:
            out.append(_shape_all(spec, shp))
        for a in spec["args"]:
            if a["kind"] == "int" and a["expr"] not in ("0", "1"):
                out.append(_set_arg(spec, a["name"], {**a, "expr": "1"}))
    return out


def unscaled_state(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """A method's tensor state as inputs (drawn per rank at the harness's size like the arguments, not at
    the fixed attribute size): for a harness that does not scale or communicates nothing."""
    return [{**spec, "state": True}] if not spec.get("state") and any(
        a["kind"] in ("tensor", "tensors", "module", *OPTIM_PARAM_KINDS) for a in spec.get("attrs", [])) else []


def no_collective(spec: dict[str, Any], cand: dict[str, Any]) -> list[dict[str, Any]]:
    """Ran but communicated nothing (or degenerate): an autograd Function runs forward and backward; tensors
    read as parameters get gradients, floats are drawn per seed; a method works on its object's tensor
    attributes (make them inputs), then try passing parameters that had defaults; last, every flag guessed
    False is set (`if self.enabled:` gates)."""
    have = {a["name"] for a in spec["args"]}
    # an autograd Function's collectives may run in its backward: all arguments positional, as `apply` takes them
    out = [{**s, "kind": "function", "entry": "_mg_fwd_bwd", "backward_of": spec["entry"],
            "args": [{k: v for k, v in a.items() if k != "keyword"} for a in s["args"]]}
           for s in (_shape_all(spec, ["n", "n"]), spec)] if spec["kind"] == "autograd_function" else []
    out += grad_fix(spec, cand) + scalar_draws(spec)
    out += unscaled_state(spec)
    from scrapers.harness.guess import call_params
    for p in call_params(cand):
        if p["name"] not in have and p["kind"] in ("positional", "kwonly") and p.get("default") is not None:
            a = guess_arg(p["name"], p.get("annotation"), cand.get("docstring"))
            if a["kind"] == "bool":
                a["value"] = True
            a["keyword"] = True
            out.append(_with(spec, lambda s, a=a: s["args"].append(a)))
    out += [_shape_all(spec, shp) for shp in GLOBAL_SHAPES[1:4]]
    flags = [a["name"] for a in _all_args(spec) if a["kind"] == "bool" and a.get("value") is False]
    for group in [flags] + ([[f] for f in flags] if len(flags) > 1 else []):    # all at once, then each alone
        def flip(s: dict[str, Any], group: list[str] = group) -> None:
            for a in _all_args(s):
                if a["name"] in group and a["kind"] == "bool":
                    a["value"] = True
        out.append(_with(spec, flip))
    return out
