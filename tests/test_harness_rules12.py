"""Harness rules of session 12: ranks that talk to themselves become the own rank or a peer (peers.py); a
per-rank slot `out[rank] = x` gets one slot per rank (sizes.slot_fixes); a guessed callable's complaint
about keywords no longer drops the entry's last argument; the callee of `self.f(x)` becomes the function."""
from __future__ import annotations

from hypothesis import given, strategies as st

from scrapers.harness.mutate import propose
from scrapers.harness.peers import NEXT, OWN, PAIR, PREV, peer_expr, peer_fixes
from scrapers.harness.runtime import _mg_eval
from scrapers.harness.search import Budget, synthesize
from tests.harness_cases import entry_candidate
from tests.test_harness_inline import _candidate

PAIR_ERR = "[enforce fail at pair.cc:801] state_ >= CONNECTED. 1 vs 4. Pair is not connected ([127.0.0.1]:1)"


def _int(name: str, expr: str = "0") -> dict:
    return {"name": name, "kind": "int", "expr": expr}


def _t(name: str, shape: list[str] | None = None) -> dict:
    return {"name": name, "kind": "tensor", "shape": shape or ["n"], "dtype": "float32", "replicated": False}


def test_rank_names_map_to_own_rank_next_and_previous_peers():
    assert peer_expr("rank") == OWN and peer_expr("my_rank") == OWN and peer_expr("group_rank") == OWN
    assert peer_expr("next_pipeline_rank") == NEXT and peer_expr("dst_rank") == NEXT and peer_expr("dst") == NEXT
    assert peer_expr("prev_rank") == PREV and peer_expr("src") == PREV and peer_expr("recv_rank") == PREV
    assert peer_expr("hidden_size") is None and peer_expr("ranking_dim") is None and peer_expr("root") is None


@given(ws=st.integers(2, 16), rank=st.integers(0, 15))
def test_peer_expressions_name_another_valid_rank(ws, rank):
    """Next and previous are valid ranks other than the caller's and are inverse to each other; a partner
    is an involution (a pair exchanges with each other)."""
    rank %= ws
    nxt, prv = _mg_eval(NEXT, 8, ws, rank), _mg_eval(PREV, 8, ws, rank)
    assert 0 <= nxt < ws and 0 <= prv < ws and nxt != rank and prv != rank
    assert _mg_eval(PREV, 8, ws, nxt) == rank and _mg_eval(OWN, 8, ws, rank) == rank
    if ws % 2 == 0:
        p = _mg_eval(PAIR, 8, ws, rank)
        assert p != rank and _mg_eval(PAIR, 8, ws, p) == rank


def test_peer_fixes_need_a_self_talk_error_and_use_the_failing_line():
    spec = {"args": [_t("buf"), _int("rank"), _int("size", "n"), _int("comm_rank"), _int("root")],
            "attrs": [], "globals": []}
    assert peer_fixes(spec, "shape mismatch") == []
    got = peer_fixes(spec, PAIR_ERR.lower(), "dist.recv(buf, src=comm_rank); dist.send(buf, dst=comm_rank)")
    exprs = [{a["name"]: a["expr"] for a in s["args"] if a["kind"] == "int"} for s in got]
    assert exprs[0] == {"rank": OWN, "size": "ws", "comm_rank": PAIR, "root": "0"}      # size beside the own rank
    assert exprs[1] == {"rank": OWN, "size": "n", "comm_rank": PAIR, "root": "0"}
    assert peer_fixes(spec, PAIR_ERR.lower(), "") and all(
        a["expr"] == "0" for s in peer_fixes(spec, PAIR_ERR.lower(), "") for a in s["args"] if a["name"] in (
            "comm_rank", "root"))


def test_slot_of_one_rank_gets_a_leading_world_size_dimension():
    spec = {"args": [_t("sendbuf", ["n", "n"]), _t("recvbuf")], "attrs": [], "globals": [], "entry": "f"}
    err = {"type": "RuntimeError", "line": "recvbuf[rank] = sendbuf",
           "msg": "expand(torch.FloatTensor{[8, 8]}, size=[8]): the number of sizes provided (1) must be greater "
                  "or equal to the number of dimensions in the tensor (2)"}
    first = propose(spec, err, _candidate("f"))[0]
    assert {a["name"]: a["shape"] for a in first["args"]} == {"sendbuf": ["n", "n"], "recvbuf": ["ws", "n", "n"]}


def test_guessed_callables_keyword_complaint_keeps_the_entrys_arguments():
    """`init(self.weight, fan_in=...)` with `init` guessed as gelu: it becomes a no-op; the entry's last
    argument (another initializer) is not dropped as if the entry had been given too many."""
    spec = {"args": [{"name": "init", "kind": "fn", "value": "gelu"}, _t("bias_init")], "attrs": [],
            "globals": [], "entry": "Layer.reset_parameters"}
    err = {"type": "TypeError", "msg": "gelu() got an unexpected keyword argument 'fan_in'",
           "line": "init(self.weight, fan_in=fan_in)"}
    got = propose(spec, err, _candidate("f"))
    assert got and all(len(s["args"]) == 2 for s in got)
    assert any(a["name"] == "init" and a.get("value") == "noop" for s in got for a in s["args"])
    own = {**err, "msg": "Layer.reset_parameters() got an unexpected keyword argument 'x'"}
    assert any(len(s["args"]) == 1 for s in propose(spec, own, _candidate("f")))


def test_the_called_name_becomes_the_function():
    spec = {"args": [_t("features")], "attrs": [_t("projection")], "globals": [], "entry": "M.forward"}
    err = {"type": "TypeError", "msg": "'Tensor' object is not callable", "line": "y = self.projection(features)"}
    fns = [a["name"] for s in propose(spec, err, _candidate("f")) for a in s["args"] + s["attrs"] if a["kind"] == "fn"]
    assert "projection" in fns and "features" not in fns


P2P = '''import torch
import torch.distributed as dist


def exchange(send_next, recv_prev, group, next_rank, prev_rank):
    ops = [dist.P2POp(dist.isend, send_next, next_rank, group), dist.P2POp(dist.irecv, recv_prev, prev_rank, group)]
    for req in dist.batch_isend_irecv(ops):
        req.wait()
    return recv_prev * 2
'''


def test_ring_exchange_is_synthesized_with_peer_ranks():
    """Ranks guessed as 0 make every rank send to itself; after gloo's error they become the ring's peers."""
    cand, text = entry_candidate(P2P, "exchange", params=["send_next", "recv_prev", "group", "next_rank",
                                                           "prev_rank"])
    res = synthesize(cand, text, Budget(seconds=40, attempts=12, attempt_timeout_s=6, mem_mb=512))
    assert res.accepted, (res.reason, res.last_error)
    exprs = {a["name"]: a.get("expr") for a in res.spec["args"]}
    assert exprs["next_rank"] == NEXT and exprs["prev_rank"] == PREV and 4 in res.world_sizes


def test_a_taken_rendezvous_port_is_retried_not_blamed_on_the_candidate(monkeypatch):
    """Two runs in flight can pick the same free port; the loser's rank 0 fails to listen (EADDRINUSE). The
    run is repeated on a new port instead of rejecting the candidate as a timeout."""
    import socket

    from scrapers.harness import sandbox
    from scrapers.harness.render import prepare, task_source
    from tests.harness_cases import candidate
    from validation.pool import free_port
    cand, text = candidate("grad_allreduce")
    spec = {"entry": cand["entry"], "kind": "function", "attrs": [], "n_attr": 8,
            "args": [{"name": "grad", "kind": "tensor", "shape": ["n"], "dtype": "float32", "replicated": False},
                     {"name": "group", "kind": "group", "value": "world"}]}
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        ports = iter([busy.getsockname()[1], free_port()])
        monkeypatch.setattr(sandbox, "free_port", lambda: next(ports))
        at = sandbox.run_ranks(task_source(cand, prepare(text), spec), 2, 8, timeout_s=6)
    assert at.status == "ok", (at.status, at.reason, at.replies)


OPT_FN = '''import torch
import torch.distributed as dist


def sync_and_step(optimizer, group):
    for pg in optimizer.param_groups:
        for p in pg["params"]:
            dist.all_reduce(p.grad, group=group)
            p.data.add_(p.grad, alpha=-pg["lr"])
'''

OPT_METHOD = '''import torch
import torch.distributed as dist


class DistMomentum:
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                if "buf" not in state:
                    state["buf"] = torch.zeros_like(p)
                dist.all_reduce(p.grad)
                state["buf"].mul_(group["momentum"]).add_(p.grad)
                p.data.add_(state["buf"], alpha=-group["lr"])
'''


def test_optimizer_argument_is_a_real_optimizer_over_parameters_with_gradients():
    """`optimizer.param_groups` on a guessed tensor makes the argument a torch optimizer; the harness is
    accepted (deterministic: each call gets its own copy of the parameters) and outputs its parameters."""
    cand, text = entry_candidate(OPT_FN, "sync_and_step", params=["optimizer", "group"])
    res = synthesize(cand, text, Budget(seconds=40, attempts=12, attempt_timeout_s=6, mem_mb=512))
    assert res.accepted, (res.reason, res.last_error)
    assert {a["name"]: a["kind"] for a in res.spec["args"]}["optimizer"] == "optimizer"


def test_optimizer_method_gets_param_groups_and_per_parameter_state():
    cand, text = entry_candidate(OPT_METHOD, "DistMomentum.step", kind="method", params=["self"])
    res = synthesize(cand, text, Budget(seconds=40, attempts=12, attempt_timeout_s=6, mem_mb=512))
    assert res.accepted, (res.reason, res.last_error)
    assert {a["name"]: a["kind"] for a in res.spec["attrs"]} == {"param_groups": "param_groups",
                                                                  "state": "optim_state"}


def test_optimizer_stand_in_is_only_in_tasks_that_draw_optimizers():
    """Other tasks' text (and content hash) stays as it was."""
    from scrapers.harness.render import prepare, task_source
    cand, text = entry_candidate(OPT_FN, "sync_and_step", params=["optimizer", "group"])
    base = {"entry": "sync_and_step", "kind": "function", "attrs": [], "n_attr": 8}
    plain = task_source(cand, prepare(text), {**base, "args": [_t("optimizer"), {"name": "group", "kind": "group"}]})
    opt = task_source(cand, prepare(text), {**base, "args": [{"name": "optimizer", "kind": "optimizer", "count": "ws",
                                                              "shape": ["n", "n"], "dtype": "float32"}]})
    assert "_MgOptimState" not in plain and "class _MgOptimState" in opt


CHECK_FLAG = '''import torch
import torch.distributed as dist


def overflow_flag(grad, group):
    flag = torch.zeros(1)
    if not torch.isfinite(grad).all():
        flag.fill_(1.0)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=group)
    return grad, flag
'''

GATHER_LENGTHS = '''import torch
import torch.distributed as dist


def gather_lengths(lengths, group):
    out = [torch.empty_like(lengths) for _ in range(dist.get_world_size(group))]
    dist.all_gather(out, lengths, group=group)
    return torch.arange(len(out)), torch.cat(out).tolist()
'''


def test_outputs_whose_computed_part_ignores_the_inputs_are_rejected():
    """An overflow check on finite random gradients returns its input and a flag that is always 0: the
    output changes with the seed only through the echoed input, so it is no task. Gathered values returned
    as Python numbers are computed output (accepted)."""
    budget = Budget(seconds=30, attempts=6, attempt_timeout_s=6, mem_mb=512)
    cand, text = entry_candidate(CHECK_FLAG, "overflow_flag", params=["grad", "group"])
    res = synthesize(cand, text, budget)
    assert not res.accepted and "computed_output_insensitive" in res.reason, res.reason
    cand, text = entry_candidate(GATHER_LENGTHS, "gather_lengths", params=["lengths", "group"])
    res = synthesize(cand, text, budget)
    assert res.accepted, (res.reason, res.last_error)
