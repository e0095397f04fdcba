"""Task-contract names in mined code (scrapers/harness/make/reserved.py, render.prepare): renamed with every
reference that means them, never rejected; the rendered task's own `solution`/`make_inputs` stay the
harness's."""

from __future__ import annotations

import ast

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from mgbench.scrapers.harness.make.render import prepare, task_source
from mgbench.scrapers.harness.make.reserved import RESERVED, Unrenamable, rename_reserved, renamed_entry
from tests.harness.helpers import entry_candidate

MINED = '''import torch
import torch.distributed as dist
from m import oracle
SIZES = [3, 4]


def make_inputs(x, solution=None):
    """A mined helper that happens to share a contract name."""
    return x * SIZES[0] + (solution or 0)


def solution(x, make_inputs=1):
    global _mg_state
    _mg_state = f"{SIZES}"
    pick = [solution for solution in range(2)]
    dist.all_reduce(x)
    return make_inputs, pick, "solution", helper.solution, oracle


class Holder:
    solution = 5

    def call(self):
        return solution(self.solution, make_inputs=self.solution)
'''


def _module_binds(src: str) -> set[str]:
    tree = ast.parse(src)
    out = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    out |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    return out | {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}


def test_module_bindings_and_their_references_are_renamed_locals_and_attributes_are_not():
    out, renames = rename_reserved(MINED)
    assert renames == {
        "SIZES": "mined_SIZES",
        "_mg_state": "_mined_mg_state",
        "make_inputs": "mined_make_inputs",
        "oracle": "mined_oracle",
        "solution": "mined_solution",
    }
    assert not _module_binds(out) & (RESERVED | {"_mg_state"})
    assert "from m import oracle as mined_oracle" in out and "mined_SIZES = [3, 4]" in out
    assert "def mined_make_inputs(x, solution=None):" in out  # the parameter keeps its name
    assert "return x * mined_SIZES[0] + (solution or 0)" in out
    assert 'global _mined_mg_state\n    _mined_mg_state = f"{mined_SIZES}"' in out
    assert "def mined_solution(x, make_inputs=1):" in out and "[solution for solution in range(2)]" in out
    assert 'return make_inputs, pick, "solution", helper.solution, mined_oracle' in out
    assert "    solution = 5\n" in out  # a class attribute
    assert "return mined_solution(self.solution, make_inputs=self.solution)" in out  # keyword kept


def test_code_without_contract_names_comes_back_unchanged():
    src = "import torch\n\n\ndef f(solution, oracle=2):\n    return solution.SIZES + oracle\n"
    assert rename_reserved(src) == (src, {})


def test_new_names_avoid_every_identifier_of_the_module():
    out, renames = rename_reserved("mined_solution = 1\n\n\ndef solution():\n    return mined_solution\n")
    assert renames == {"solution": "mined_solution_"}
    assert "def mined_solution_():\n    return mined_solution\n" in out


def test_a_binding_it_cannot_respell_is_rejected_with_the_name():
    with pytest.raises(Unrenamable, match="'solution'"):
        rename_reserved("import solution.sub\n")


def test_method_entry_of_a_renamed_class():
    assert renamed_entry("SIZES.forward", {"SIZES": "mined_SIZES"}) == "mined_SIZES.forward"
    assert renamed_entry("solution", {"solution": "mined_solution"}) == "mined_solution"
    assert renamed_entry("other", {"solution": "mined_solution"}) == "other"


# a module built from pieces that use one contract name in different roles; renaming must not change what
# the entry computes
_PIECES = {
    "global_const": "{n} = 7\n\n\ndef use_const(x):\n    return x + {n}\n",
    "helper_def": "def {n}(x):\n    return x * 3\n\n\ndef use_def(x):\n    return {n}(x) + 1\n",
    "param": "def use_param(x, {n}=2):\n    return x * {n}\n",
    "local": "def use_local(x):\n    {n} = x - 1\n    return {n} * 2\n",
    "comprehension": "def use_comp(x):\n    return sum({n} for {n} in range(x))\n",
    "closure": "def use_closure(x):\n    {n} = x\n\n    def inner():\n        return {n} + 10\n\n    return inner()\n",
    "keyword": "def kw(**k):\n    return sorted(k)\n\n\ndef use_keyword(x):\n    return kw({n}=x)[0] == '{n}'\n",
}


@settings(max_examples=40, deadline=None)
@given(
    name=st.sampled_from(sorted(RESERVED) + ["_mg_call", "_MG_SPEC"]),
    pieces=st.lists(st.sampled_from(sorted(_PIECES)), min_size=1, max_size=5, unique=True),
)
def test_renaming_keeps_what_every_function_computes(name, pieces):
    assume(not {"global_const", "helper_def"} <= set(pieces))  # one module-level binding of the name
    src = "\n\n".join(_PIECES[p].format(n=name) for p in pieces)
    out, renames = rename_reserved(src)
    assert bool(renames) == bool({"global_const", "helper_def"} & set(pieces))
    before, after = {}, {}
    exec(compile(src, "<before>", "exec"), before)  # our own test code, not mined code
    exec(compile(out, "<after>", "exec"), after)
    for fn in [k for k in before if k.startswith("use_")]:
        assert before[fn](4) == after[fn](4), (fn, out)
    assert name not in after or not renames  # the contract name is free for the harness


def test_rendered_task_keeps_the_harness_solution_and_calls_the_mined_one():
    """A mined module defining `solution` and `make_inputs` renders; the task's own `solution` and
    `make_inputs` are the harness's (they come last), and the harness calls the mined, renamed `solution`."""
    text = (
        "import torch\nimport torch.distributed as dist\n\n\n"
        "def make_inputs(x):\n    return x * 2\n\n\n"
        "def solution(x):\n    y = make_inputs(x).clone()\n    dist.all_reduce(y)\n    return y + 1\n"
    )
    cand, _ = entry_candidate(text, "solution", params=["x"])
    prep = prepare(text)
    assert prep.renames == {"make_inputs": "mined_make_inputs", "solution": "mined_solution"}
    entry = renamed_entry("solution", prep.renames)
    spec = {"entry": entry, "kind": "function", "args": [{"kind": "tensor"}], "attrs": [], "n_attr": 8}
    src = task_source(cand, prep, spec)
    ns: dict = {}
    exec(compile(src, "<task>", "exec"), ns)  # a task module of our own test text, not mined code
    assert "_mg_call" in ns["solution"].__code__.co_names  # the tail's, defined after the mined code
    assert "_mg_inputs" in ns["make_inputs"].__code__.co_names
    assert ns["mined_solution"].__code__.co_names[:1] == ("mined_make_inputs",)
    assert ns["_MG_SPEC"]["entry"] == "mined_solution"
    assert "(solution)" in src.splitlines()[1]  # the provenance line keeps the original name
