"""First guesses of an argument's kind from its name and annotation
(scrapers/harness/inputs/discovery/name_guess.py)."""

from __future__ import annotations

import torch

from mgbench.scrapers.harness.inputs.discovery.name_guess import guess_arg
from mgbench.scrapers.harness.make import runtime


def test_one_entry_per_rank_sizes():
    """Parallel sizes (`ep_size`, `tp_size`, `group_size`) are guessed as the world size, other sizes as n;
    `expected length 2, got 8` from a gather proposes the world size for a guessed int / list count."""
    from mgbench.scrapers.harness.inputs.discovery.name_guess import guess_arg
    from mgbench.scrapers.harness.inputs.rules.order import propose

    assert [
        guess_arg(n, None, None)["expr"]
        for n in ("ep_size", "tp_world_size", "group_size", "nranks", "num_ranks", "hidden_size", "src_rank")
    ] == ["ws", "ws", "ws", "ws", "ws", "n", "0"]
    spec = {
        "entry": "f",
        "kind": "function",
        "attrs": [],
        "n_attr": 8,
        "args": [{"name": "k", "kind": "int", "expr": "n"}],
    }
    err = {
        "type": "RuntimeError",
        "line": "dist.all_gather(out, x)",
        "msg": "ProcessGroupGloo::allgather: invalid output tensor list at index 0 (expected length 2, got 8)",
    }
    assert propose(spec, err, {"params": [], "kind": "function"})[0]["args"][0]["expr"] == "ws"


def test_guesses_for_indices_rank_lists_events_reduce_ops_and_norms():
    kinds = {
        name: guess_arg(name, None, None)
        for name in (
            "tp_index",
            "buffer_idx",
            "pp_group_ranks",
            "start_event",
            "op",
            "norm_type",
            "max_norm",
            "mpu",
            "warmup",
            "bucket_cap_mb",
            "num_ranks",
        )
    }
    assert kinds["tp_index"] == {"name": "tp_index", "kind": "int", "expr": "0"}
    assert kinds["buffer_idx"]["expr"] == "0"
    assert kinds["pp_group_ranks"]["kind"] == "ranks" and kinds["num_ranks"]["kind"] == "int"
    assert kinds["start_event"]["kind"] == "event" and kinds["op"]["kind"] == "reduce_op"
    assert kinds["norm_type"]["value"] == 2.0 and kinds["max_norm"]["value"] == 1.0
    assert kinds["mpu"]["value"] == "state" and guess_arg("datatype", None, None)["kind"] == "dtype"
    assert kinds["warmup"]["kind"] == kinds["bucket_cap_mb"]["kind"] == "int"
    assert runtime._mg_value({"kind": "ranks"}, 0, 0, 0, 4, 8, "cpu") == [0, 1, 2, 3]
    assert runtime._mg_value({"kind": "reduce_op"}, 0, 0, 0, 2, 8, "cpu") == torch.distributed.ReduceOp.SUM


def test_module_annotations_make_models_and_lists_of_model_chunks():
    assert guess_arg("model", "List[torch.nn.Module]", None)["chunks"] == 2
    assert guess_arg("module", "MegatronModule", None)["kind"] == "module"
    assert "chunks" not in guess_arg("module", "MegatronModule", None)
    assert guess_arg("mod", "ModuleType", None)["kind"] == "tensor"
