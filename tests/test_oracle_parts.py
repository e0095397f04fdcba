"""Oracles run in parts along their head axis (validation/oracle_parts.py) give the whole oracle's outputs."""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mgbench.validation import oracle_parts
from mgbench.validation.contract import load_module

FAMILIES = ["ring_attention", "ulysses_sdpa", "kv_allgather_attention", "ulysses_attention"]


@pytest.fixture(scope="module")
def attention_tasks(tmp_path_factory) -> dict:
    """{task_id: module} of the families SPLITS names, generated at their published text."""
    from mgbench.generator import generate

    out = tmp_path_factory.mktemp("attention")
    generate(out, families=FAMILIES)
    ids = [json.loads(line)["task_id"] for line in (out / "manifest.jsonl").read_text().splitlines()]
    return {t: load_module(out / "tasks" / f"{t}.py") for t in ids}


def _oracle_both_ways(mod, world_size: int, seed: int, parts: int, split=None):
    inputs = [mod.make_inputs(r, world_size, seed=seed, device="cpu", size="smoke") for r in range(world_size)]
    whole = mod.oracle(inputs, world_size)
    split = split or oracle_parts.split_for(Path(mod.__file__).stem)
    return whole, oracle_parts.solve_in_parts(mod.oracle, inputs, world_size, split, parts)


def _max_gap(a, b) -> float:
    pairs = [(a, b)] if isinstance(a, torch.Tensor) else list(zip(a, b))
    for x, y in pairs:
        assert x.shape == y.shape and x.dtype == y.dtype
    return max(float((x - y).abs().max()) / max(float(x.abs().max()), 1e-300) for x, y in pairs)


def test_every_split_entry_names_generated_tasks(attention_tasks):
    for pattern in oracle_parts.SPLITS:
        assert fnmatch.filter(attention_tasks, pattern), f"{pattern} matches no generated task"
    assert all(oracle_parts.split_for(t) for t in attention_tasks)


def test_neighbouring_families_are_not_split():
    for task_id in (
        "l3-ulysses_tp_attention-fp32",
        "l3-varlen_ring_attention-fp32",
        "l3-cp_ring_attention_backward-full-fp32",
    ):
        assert oracle_parts.split_for(task_id) is None


def test_every_task_in_parts_equals_its_whole_oracle(attention_tasks):
    """Every variant (zigzag, causal, grouped K/V, fused K/V...) and dtype, each run: at world size 2, the
    most parts its smoke size allows."""
    for task_id, mod in sorted(attention_tasks.items()):
        inputs = [mod.make_inputs(r, 2, seed=0, device="cpu", size="smoke") for r in range(2)]
        parts = oracle_parts.parts_for(inputs, oracle_parts.split_for(Path(mod.__file__).stem))
        whole, in_parts = _oracle_both_ways(mod, 2, 0, parts)
        assert all(_max_gap(whole[r], in_parts[r]) < 1e-12 for r in range(2)), (task_id, parts)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_an_oracle_in_parts_equals_the_whole_oracle(attention_tasks, data):
    task_id = data.draw(st.sampled_from(sorted(attention_tasks)), label="task")
    mod = attention_tasks[task_id]
    world_size = data.draw(st.sampled_from([2, 4]), label="world_size")
    seed = data.draw(st.integers(0, 1000), label="seed")
    inputs = [mod.make_inputs(r, world_size, seed=seed, device="cpu", size="smoke") for r in range(world_size)]
    most = oracle_parts.parts_for(inputs, oracle_parts.split_for(Path(mod.__file__).stem))
    assert most >= 2, f"{task_id}: its smoke size splits into no parts"
    parts = data.draw(st.sampled_from([n for n in range(2, most + 1) if most % n == 0]), label="parts")
    whole, in_parts = _oracle_both_ways(mod, world_size, seed, parts)
    for rank in range(world_size):
        assert _max_gap(whole[rank], in_parts[rank]) < 1e-12, (task_id, rank, parts)


def test_a_split_on_the_wrong_axis_is_caught(attention_tasks):
    """Splitting the Ulysses layer along each head's feature axis (w_qkv's axis 3, w_o's axis 1) keeps
    every shape but is no identity of attention: the comparison the test above makes sees it."""
    mod = attention_tasks["l3-ulysses_attention-full-fp32"]
    wrong = oracle_parts.Split(inputs=(None, 3, 1), outputs=(oracle_parts.SUM,))
    whole, in_parts = _oracle_both_ways(mod, 2, 0, 2, split=wrong)
    assert _max_gap(whole[0], in_parts[0]) > 1e-3


def test_parts_that_do_not_divide_a_head_axis_are_refused(attention_tasks):
    mod = attention_tasks["l2-kv_allgather_attention-causal-fp32"]  # smoke: 4 query heads, 2 K/V heads
    inputs = [mod.make_inputs(r, 2, seed=0, device="cpu", size="smoke") for r in range(2)]
    with pytest.raises(ValueError, match="4 parts do not divide axis 2"):
        oracle_parts.solve_in_parts(mod.oracle, inputs, 2, oracle_parts.split_for(Path(mod.__file__).stem), 4)


def test_parts_divide_every_split_axis():
    split = oracle_parts.Split(inputs=(2, 2, None), outputs=(2,))
    q, kv, other = torch.zeros(1, 4, 32, 2), torch.zeros(1, 4, 12, 2), torch.zeros(5)
    assert oracle_parts.parts_for([(q, kv, other)], split) == 4  # gcd(32, 12) = 4
    assert oracle_parts.parts_for([(q, q, other)], split) == 8  # capped at MAX_PARTS


def test_validation_runs_a_split_oracle_in_parts_where_memory_is_short(attention_tasks, monkeypatch):
    """checks.expected_output calls the task's oracle once a part on the devices SPLIT_ON_DEVICES names
    (the CPU here, standing in for a GPU) and gives the whole oracle's output; elsewhere once, whole."""
    from mgbench.validation import checks

    mod = attention_tasks["l2-kv_allgather_attention-zigzag-fp32"]
    calls: list[int] = []
    oracle = mod.oracle

    def counted(inputs_per_rank, world_size):
        calls.append(inputs_per_rank[0][0].shape[2])  # this call's query heads
        return oracle(inputs_per_rank, world_size)

    monkeypatch.setattr(mod, "oracle", counted)
    cpu = torch.device("cpu")
    inputs = mod.make_inputs(1, 2, seed=3, device=cpu, size="smoke")
    whole = checks.expected_output(mod, inputs, 1, 2, cpu, "smoke", 3, in_turns=False)
    assert calls == [mod.SIZES["smoke"]["heads"]]
    monkeypatch.setattr(oracle_parts, "SPLIT_ON_DEVICES", {"cpu"})
    calls.clear()
    in_parts = checks.expected_output(mod, inputs, 1, 2, cpu, "smoke", 3, in_turns=False)
    assert len(calls) == mod.SIZES["smoke"]["kv_heads"] and sum(calls) == mod.SIZES["smoke"]["heads"]
    assert _max_gap(whole, in_parts) < 1e-12


# A task with the ring-attention entry's layout (q, k, v (b, s, heads, d) -> out (b, s, heads, d), a per-head
# statistic (b, heads, s)) whose oracle records the heads of each call; its solution needs no process group.
PLANTED_PER_HEAD = """
import torch
SIZES = {"smoke": {"s": 4, "h": 4, "d": 3}, "full": {"s": 4, "h": 4, "d": 3}}
CALLS = []
def make_inputs(rank, world_size, *, seed, device, size="full"):
    g = torch.Generator().manual_seed(seed * 10 + rank)
    n = SIZES[size]
    return tuple(torch.randn(1, n["s"], n["h"], n["d"], generator=g).to(device) for _ in range(3))
def _per_head(q, k, v):
    out = q * k + v
    return out, out.sum(-1).transpose(1, 2)
def solution(q, k, v):
    return _per_head(q, k, v)
def oracle(inputs_per_rank, world_size):
    CALLS.append(inputs_per_rank[0][0].shape[2])
    return [_per_head(*(t.double() for t in inp)) for inp in inputs_per_rank]
"""


def test_the_eval_judge_runs_a_split_oracle_in_parts(monkeypatch):
    """The judge's reference ranks look the task id up in the table: the planted task under an attention
    family's id has its oracle run one head at a time (4 heads: 4 parts), under another id whole, with the
    same expected outputs."""
    from mgbench.validation.eval.judge import reference, wire
    from mgbench.validation.jobs import JudgeRefSetupJob, JudgeRefTrialJob
    from mgbench.validation.worker import RankContext

    monkeypatch.setattr(reference, "_TASK", {})
    monkeypatch.setattr(oracle_parts, "SPLIT_ON_DEVICES", {"cpu"})
    ctx = RankContext(rank=1, world_size=2, backend="gloo", device=torch.device("cpu"))
    seen = {}
    for task_id in ("l2-ring_attention-planted", "l1-planted"):
        reference._setup(JudgeRefSetupJob(task_source=PLANTED_PER_HEAD, has_oracle=True, task_id=task_id), ctx)
        trial = reference._trial(JudgeRefTrialJob(seed=3, size="smoke", has_oracle=True), ctx)
        seen[task_id] = (reference._task().CALLS, wire.decode(trial["expected"]))
    assert seen["l2-ring_attention-planted"][0] == [1, 1, 1, 1] and seen["l1-planted"][0] == [4]
    assert _max_gap(seen["l2-ring_attention-planted"][1], seen["l1-planted"][1]) < 1e-12
