"""Failures as Python and torch raise them, with the spec and candidate they happened on: the table that
tests/harness/test_rule_order.py pins the search rules' firing order with. Pure data (no project imports)."""

from __future__ import annotations

from typing import Any


def t(name: str, shape: list[str] | None = None, **kw: Any) -> dict[str, Any]:
    return {"name": name, "kind": "tensor", "shape": shape or ["n"], "dtype": "float32", **kw}


def spec_of(
    *args: dict[str, Any], attrs: list[dict[str, Any]] | None = None, kind: str = "function", entry: str = "f"
) -> dict[str, Any]:
    return {"entry": entry, "kind": kind, "args": list(args), "attrs": attrs or [], "n_attr": 8}


def cand_of(
    entry: str = "f",
    kind: str = "function",
    params: list[str] | None = None,
    text: str = "",
    defaults: dict[str, Any] | None = None,
) -> dict[str, Any]:
    ps = [
        {"name": p, "kind": "positional", "annotation": None, "default": (defaults or {}).get(p)}
        for p in (params or [])
    ]
    return {"id": "case", "entry": entry, "kind": kind, "params": ps, "docstring": None, "_text": text}


def err(typ: str, msg: str, line: str = "", in_candidate: bool = True) -> dict[str, Any]:
    return {"type": typ, "msg": msg, "line": line, "in_candidate": in_candidate}


G = {"name": "group", "kind": "group", "value": "world"}
K = {"name": "k", "kind": "int", "expr": "0"}
FN = {"name": "act", "kind": "fn", "value": "gelu"}

# id -> (spec, error, candidate, the rules expected to propose, in order)
CASES: dict[str, tuple[dict[str, Any], dict[str, Any], dict[str, Any], list[str]]] = {
    "missing_positional": (
        spec_of(t("x")),
        err("TypeError", "f() missing 1 required positional argument: 'mask'", "return f(x)"),
        cand_of(params=["x", "mask"]),
        ["missing_argument"],
    ),
    "unexpected_keyword": (
        spec_of(t("x"), t("bias")),
        err("TypeError", "f() got an unexpected keyword argument 'bias'", ""),
        cand_of(params=["x"]),
        ["surplus_argument"],
    ),
    "guessed_callable_complains": (
        spec_of(t("x"), FN),
        err("TypeError", "gelu() got an unexpected keyword argument 'fan_in'", "y = act(x, fan_in=4)"),
        cand_of(params=["x", "act"]),
        ["wrong_call"],
    ),
    "method_object_attribute": (
        spec_of(t("x"), kind="method", entry="RowLinear.forward"),
        err("AttributeError", "'RowLinear' object has no attribute 'weight'", "return x @ self.weight"),
        cand_of("RowLinear.forward", "method", ["self", "x"]),
        ["object_state"],
    ),
    "tensor_used_as_config": (
        spec_of(t("x"), t("config")),
        err("AttributeError", "'Tensor' object has no attribute 'hidden_size'", "h = config.hidden_size * 2"),
        cand_of(params=["x", "config"]),
        ["object_field"],
    ),
    "param_group_setting": (
        spec_of(
            {
                "name": "param_groups",
                "kind": "param_groups",
                "shape": ["n", "n"],
                "count": "ws",
                "dtype": "float32",
            }
        ),
        err("KeyError", "'use_muon'", 'if group["use_muon"]:'),
        cand_of(params=["param_groups"], text="for group in param_groups:\n    if group['use_muon']:\n"),
        ["optimizer"],
    ),
    "undefined_constant": (
        spec_of(t("x")),
        err("NameError", "name 'HIDDEN_SIZE' is not defined", "y = x.view(-1, HIDDEN_SIZE)"),
        cand_of(params=["x"]),
        ["missing_global"],
    ),
    "undefined_outside_candidate": (
        spec_of(t("x")),
        err("NameError", "name 'HIDDEN_SIZE' is not defined", "y = x", in_candidate=False),
        cand_of(params=["x"]),
        [],
    ),
    "size_mismatch": (
        spec_of(t("a", ["n*ws"]), t("b")),
        err(
            "RuntimeError",
            "The size of tensor a (16) must match the size of tensor b (8) at non-singleton dimension 0",
            "c = a + b",
        ),
        cand_of(params=["a", "b"]),
        ["size_conflict", "generic_shapes"],
    ),
    "matmul_shapes": (
        spec_of(t("x"), t("w", ["n", "n"])),
        err(
            "RuntimeError",
            "mat1 and mat2 shapes cannot be multiplied (1x8 and 4x4)",
            "y = torch.matmul(x, w)",
        ),
        cand_of(params=["x", "w"]),
        ["size_conflict", "generic_shapes"],
    ),
    "unpack_shape": (
        spec_of(t("x")),
        err("ValueError", "not enough values to unpack (expected 3, got 1)", "b, s, h = x.shape"),
        cand_of(params=["x"]),
        ["unpack", "generic_shapes"],
    ),
    "dimension_out_of_range": (
        spec_of(t("x")),
        err(
            "IndexError",
            "Dimension out of range (expected to be in range of [-1, 0], but got 1)",
            "n = x.size(1)",
        ),
        cand_of(params=["x"]),
        ["ndim", "generic_shapes"],
    ),
    "int_iterated": (
        spec_of(t("x"), {"name": "sizes", "kind": "int", "expr": "n"}),
        err("TypeError", "'int' object is not iterable", "for s in sizes: out.append(x[:s])"),
        cand_of(params=["x", "sizes"]),
        ["int_iterated", "tensor_iterated"],
    ),
    "group_subscripted": (
        spec_of(t("x"), G),
        err("TypeError", "'ProcessGroup' object is not subscriptable", "g = group[0]"),
        cand_of(params=["x", "group"]),
        ["group_misuse"],
    ),
    "tensor_as_flag": (
        spec_of(t("x"), t("enabled")),
        err("RuntimeError", "Boolean value of Tensor with more than one value is ambiguous", "if enabled:"),
        cand_of(params=["x", "enabled"]),
        ["flag"],
    ),
    "tensor_as_path": (
        spec_of(t("x"), t("ckpt")),
        err("TypeError", "expected str, bytes or os.PathLike object, not Tensor", "torch.save(x, ckpt)"),
        cand_of(params=["x", "ckpt"]),
        ["path", "generic_shapes"],
    ),
    "path_joined": (
        spec_of(t("root")),
        err("TypeError", "unsupported operand type(s) for /: 'Tensor' and 'str'", "p = root / 'x.pt'"),
        cand_of(params=["root"]),
        ["path", "size_as_tensor"],
    ),
    "rank_talks_to_itself": (
        spec_of(t("x"), {"name": "peer", "kind": "int", "expr": "0"}),
        err(
            "RuntimeError",
            "[/gloo/transport/tcp/pair.cc:540] Pair is not connected",
            "dist.send(x, dst=peer)",
        ),
        cand_of(params=["x", "peer"]),
        ["self_talk", "generic_shapes"],
    ),
    "float_where_long": (
        spec_of(t("logits", ["n", "n"]), t("target")),
        err("RuntimeError", "expected scalar type Long but found Float", "loss = F.nll_loss(logits, target)"),
        cand_of(params=["logits", "target"]),
        ["index_dtype", "generic_shapes"],
    ),
    "tensor_called": (
        spec_of(t("x"), t("proj")),
        err("TypeError", "'Tensor' object is not callable", "y = self.proj(x)"),
        cand_of(params=["x", "proj"]),
        ["tensor_called"],
    ),
    "size_as_tensor": (
        spec_of(t("b")),
        err(
            "TypeError",
            "empty(): argument 'size' (position 1) must be tuple of ints, but found element of type Tensor at pos 0",
            "out = torch.empty(b, 4)",
        ),
        cand_of(params=["b"]),
        ["size_as_tensor"],
    ),
    "zero_divisor": (
        spec_of(t("x"), K),
        err("ZeroDivisionError", "integer division or modulo by zero", "m = x.numel() // k"),
        cand_of(params=["x", "k"]),
        ["zero_divisor"],
    ),
    "tensor_to_scalar": (
        spec_of(t("max_norm")),
        err("RuntimeError", "a Tensor with 8 elements cannot be converted to Scalar", "clip = float(max_norm)"),
        cand_of(params=["max_norm"]),
        ["scalar", "generic_shapes"],
    ),
    "none_attribute_on_default": (
        spec_of(t("x")),
        err(
            "AttributeError",
            "'NoneType' object has no attribute 'get_tensor_model_parallel_group'",
            "g = mpu.get_tensor_model_parallel_group()",
        ),
        cand_of(params=["x", "mpu"], defaults={"mpu": "None"}),
        ["group_misuse"],
    ),
    "half_precision": (
        spec_of(t("x")),
        err("RuntimeError", "expected q, k, v to be bfloat16 (got float32)", "out = kernel(x)"),
        cand_of(params=["x"]),
        ["half", "generic_shapes"],
    ),
    "model_chunks": (
        spec_of({"name": "model", "kind": "module", "shape": ["n"], "count": "2", "dtype": "float32"}),
        err("TypeError", "'Module' object is not subscriptable", "m = model[0]"),
        cand_of(params=["model"]),
        ["model_chunks"],
    ),
    "world_size_times": (
        spec_of(t("out"), t("x")),
        err(
            "RuntimeError",
            "output tensor size must be equal to world_size times input tensor size",
            "dist.all_gather_into_tensor(out, x)",
        ),
        cand_of(params=["out", "x"]),
        ["world_shapes", "generic_shapes"],
    ),
    "per_rank_list": (
        spec_of(t("outs"), t("x")),
        err("ValueError", "expected length 2, got 1 for the output list", "dist.all_gather(outs, x)"),
        cand_of(params=["outs", "x"]),
        ["per_rank_list", "generic_shapes"],
    ),
    "membership_in_tensor": (
        spec_of(t("key"), t("buckets")),
        err(
            "RuntimeError",
            "Tensor.__contains__ only supports Tensor or scalar, but you passed in a <class 'str'>.",
            "if name in self.buckets:",
        ),
        cand_of(params=["key", "buckets"]),
        ["keyed_dict", "generic_shapes"],
    ),
}
