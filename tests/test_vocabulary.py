"""The ground floor's vocabulary: the torch.distributed op table (mgbench.distops) names what the installed
torch defines, the dtype table (mgbench.dtypes) spells what torch and the taxonomy spell, and the one task
filter (mgbench.taskfilter) selects what `generate` and `validate` select."""

from __future__ import annotations

import argparse
import importlib

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mgbench import distops, dtypes
from mgbench.generator.selection import Selection
from mgbench.generator.spec import expand
from mgbench.store import write_manifest
from mgbench.taskfilter import TaskFilter
from mgbench.taxonomy import load_taxonomy
from mgbench.validation.commands import select_tasks
from mgbench.validation.gpu.run import GpuRunConfig, select

API_MODULES = {
    distops.C10D: ("torch.distributed", "torch.distributed.distributed_c10d"),
    distops.FUNCTIONAL: ("torch.distributed._functional_collectives",),
    distops.AUTOGRAD: ("torch.distributed.nn.functional",),
    distops.CUDA_NCCL: ("torch.cuda.nccl",),
}


def test_op_names_are_unique_and_their_facts_come_from_the_vocabulary():
    assert len(distops.BY_NAME) == len(distops.OPS)
    realizations = {r.id for r in load_taxonomy().realizations.values()}
    for op in distops.OPS:
        assert op.kind in distops.KINDS and op.form in distops.FORMS and op.apis <= set(distops.APIS), op
        assert (op.realization is None) == (op.kind == distops.BARRIER), op
        assert op.realization is None or op.realization in realizations, op
        assert op.async_of is None or distops.BY_NAME[op.async_of].kind == op.kind, op


@pytest.mark.parametrize("api", sorted(API_MODULES))
def test_every_op_of_an_api_is_defined_there_in_this_torch(api):
    for module in API_MODULES[api]:
        mod = importlib.import_module(module)
        missing = [n for n in distops.names(api=api) if not hasattr(mod, n)]
        assert not missing, (module, missing)


def test_dispatcher_op_names_are_ops_of_this_torch():
    for op in distops.OPS:
        for name in op.c10d_ops:
            assert hasattr(torch.ops.c10d, name), (op.name, name)
        for name in op.functional_ops:
            assert hasattr(torch.ops._c10d_functional, name), (op.name, name)


def test_named_queries():
    tensor = set(distops.tensor_calls())
    assert {"all_reduce", "all_gather_into_tensor", "isend", "batch_isend_irecv"} <= tensor
    assert not tensor & {"P2POp", "barrier", "all_gather_object", "send_object_list", "all_reduce_inplace"}
    assert distops.single_buffer_calls(distops.P2P) == ("send", "recv", "isend", "irecv")
    assert not set(distops.single_buffer_calls(distops.COLLECTIVE)) & {"all_reduce_coalesced", "broadcast_object_list"}
    assert [distops.BY_NAME[n].bus_factor(4) for n in ("all_reduce", "all_gather", "broadcast")] == [1.5, 0.75, 1.0]


def test_dtype_spellings_are_torch_attributes_and_the_taxonomy_dtypes():
    from mgbench.taxonomy.loader import DTYPES

    assert DTYPES == dtypes.NAMES
    for d in dtypes.DTYPES:
        t = d.to_torch()
        assert t.is_floating_point == d.is_float and t.itemsize * 8 == d.bits, d
        assert all(getattr(torch, a) is t for a in d.aliases), d
        assert {dtypes.lookup(s) for s in (d.name, d.short, *d.aliases)} == {d}
    assert dtypes.long_name("bf16") == "bfloat16" and dtypes.long_name("half") == "float16"
    assert dtypes.long_name("float8") == "float8"  # unknown spellings pass through (and match no task)


manifest_records = st.lists(
    st.fixed_dictionaries(
        {
            "task_id": st.sampled_from(["a", "b", "c", "d"]),
            "level": st.integers(1, 4),
            "family": st.sampled_from(["f", "g"]),
            "dtype": st.sampled_from(dtypes.NAMES),
        }
    ),
    max_size=8,
)
spellings = st.sampled_from(sorted(dtypes.BY_SPELLING) + ["float8"])


@settings(max_examples=200, deadline=None)
@given(
    recs=manifest_records,
    ids=st.none() | st.lists(st.sampled_from("abcx"), max_size=2),
    levels=st.none() | st.lists(st.integers(1, 4), max_size=2),
    families=st.none() | st.lists(st.sampled_from("fgx"), max_size=2),
    dts=st.none() | st.lists(spellings, max_size=2),
)
def test_the_filter_keeps_a_record_when_each_given_filter_names_it(recs, ids, levels, families, dts):
    only = TaskFilter.of(ids, levels, families, dts)
    long = {dtypes.long_name(d) for d in dts or ()}
    want = [
        r
        for r in recs
        if (not ids or r["task_id"] in ids)
        and (not levels or r["level"] in levels)
        and (not families or r["family"] in families)
        and (not long or r["dtype"] in long)
    ]
    assert only.select(recs) == want
    assert only.active == bool(ids or levels or families or dts)


def test_generate_validate_and_the_gpu_pass_select_the_same_tasks(tmp_path):
    tax = load_taxonomy()
    specs, _ = expand(tax, levels=[1], dtypes=["bf16", "float32"])
    assert specs and {s.dtype for s in specs} == {"bfloat16", "float32"} and {s.level for s in specs} == {1}
    recs = [{**s.to_dict(), "module": f"tasks/{s.task_id}.py", "content_hash": "h"} for s in expand(tax)[0]]
    write_manifest(tmp_path / "manifest.jsonl", recs)
    args = argparse.Namespace(out=tmp_path, task=None, level=[1], family=None, dtype=["bf16", "fp32"])
    chosen = select_tasks(args)
    assert chosen == sorted(s.task_id for s in specs)
    cfg = GpuRunConfig(out=tmp_path, results_dir=tmp_path, hardware_tag="t", levels=[1], dtypes=["bf16", "fp32"])
    assert [t["task_id"] for t in select(recs, cfg)] == chosen
    sel = Selection.of([1], None, ["bfloat16", "fp32"], mined=False)
    assert sorted(r["task_id"] for r in recs if sel.covers(r)) == chosen
