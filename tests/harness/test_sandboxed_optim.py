"""End-to-end: optimizer arguments are real optimizers with parameter groups and per-parameter state."""

from __future__ import annotations

import pytest

from mgbench.scrapers.harness.inputs.search import Budget, synthesize
from tests.harness.helpers import OPT_FN, entry_candidate

pytestmark = pytest.mark.sandboxed  # runs candidates or tasks through child rank processes


OPT_METHOD = """import torch
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
"""


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
    assert {a["name"]: a["kind"] for a in res.spec["attrs"]} == {"param_groups": "param_groups", "state": "optim_state"}
