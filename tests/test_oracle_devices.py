"""Oracles must be device-agnostic: run on the device of their inputs (they run on GPUs at full size).

Inputs are moved to the "meta" device, where mixing in a CPU tensor raises, so a CPU-only machine
catches oracles that build CPU tensors and would fail on CUDA inputs. Oracles that need data
(.tolist(), boolean masks) cannot run on meta and are not judged here.
"""

from __future__ import annotations

import json
import warnings

import pytest

from mgbench.generator import generate
from mgbench.validation.contract import load_module

DEVICE_ERRORS = ("expected device", "same device")


@pytest.fixture(scope="module")
def all_tasks(tmp_path_factory):
    out = tmp_path_factory.mktemp("alltasks")
    generate(out, check_import=False)
    return out


def test_oracles_do_not_mix_devices(all_tasks):
    warnings.simplefilter("ignore")
    bad, judged = [], 0
    for line in (all_tasks / "manifest.jsonl").read_text().splitlines():
        rec = json.loads(line)
        ws = rec["world_sizes"][0]
        mod = load_module(all_tasks / rec["module"])
        try:
            inputs = [mod.make_inputs(r, ws, seed=0, device="meta", size="smoke") for r in range(ws)]
            mod.oracle(inputs, ws)
            judged += 1
        except Exception as e:  # noqa: BLE001 - meta cannot run data-dependent code
            if any(s in str(e) for s in DEVICE_ERRORS):
                bad.append(f"{rec['task_id']}: {str(e).splitlines()[0]}")
    assert not bad, bad
    assert judged >= 100
