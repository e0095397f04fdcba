"""Object state read from `__init__` source (scrapers/harness/inputs/discovery/initattrs.py) and the
proposals built from it (inputs/statefix.py): parameters, defaults, factories, group queries, base classes,
world-size defaults."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mgbench.scrapers.harness.inputs.discovery.initattrs import init_attrs, used_attrs
from tests.harness.helpers import ROW_LINEAR, entry_candidate


def test_init_attrs_reads_parameters_defaults_factories_and_group_queries():
    got = init_attrs(ROW_LINEAR, "RowLinear")
    assert got["in_features"] == {"name": "in_features", "kind": "int", "expr": "n"}  # docstring: int
    assert got["mode"] == {"name": "mode", "kind": "const", "value": "sum"}  # literal default
    assert got["chunks"]["value"] == 1 and got["gather_output"]["value"] is False
    assert got["process_group"]["kind"] == "group"  # a None group is the world group
    assert got["world"]["expr"] == "ws" and got["rank"]["expr"] == "rank"
    assert got["weight"]["shape"] == ["n", "n"] and got["weight"]["replicated"] is True  # Parameter(empty(a, b))
    assert got["index"] == {"name": "index", "kind": "tensor", "shape": ["4"], "dtype": "int64", "replicated": False}
    assert "helper" not in got and "shape" not in got  # repository call; a property of the class


def test_only_state_the_method_reaches_is_drawn():
    """`forward` reads weight, process_group and mode itself and `shape` (a property reading weight); the
    rest of `__init__`'s state is left out, so a task carries no inputs its code never reads."""
    used = used_attrs(ROW_LINEAR, "RowLinear.forward")
    assert {"weight", "process_group", "mode", "bias", "shape"} <= used and "world" not in used
    assert sorted(init_attrs(ROW_LINEAR, "RowLinear", used)) == ["bias", "mode", "process_group", "weight"]


BASE = """import torch
import torch.distributed as dist


class Base:
    def __init__(self, group=None, scale=2.0):
        self.group = group
        self.scale = scale
        self.unused = 3


class Sub(Base):
    def __init__(self, scale=4.0):
        super().__init__()
        self.scale = scale

    def reduce(self, x):
        dist.all_reduce(x, group=self.group)
        return x * self.scale
"""


def test_state_set_by_a_base_class_init_counts_and_the_subclass_wins():
    used = used_attrs(BASE, "Sub.reduce")
    assert init_attrs(BASE, "Sub", used) == {
        "scale": {"name": "scale", "kind": "const", "value": 4.0},
        "group": {"name": "group", "kind": "group", "value": "world"},
    }


QUERIES = """import torch
class Q:
    def __init__(self, process_group, mpu):
        self.tp_rank = gpc.get_local_rank()
        self.col_rank = gpc.get_local_rank(ParallelMode.PARALLEL_2P5D_COL)
        self.pg_size = process_group.size()
        self.pg_rank = self.process_group.rank()
        self.numel = x.size()
        self.dp_group = mpu.get_data_parallel_group()
        self.other = mpu.get_group(1)
        self.device = torch.device("cuda", 0)
        self.stream = torch.cuda.Stream()
        self.pending = []
        self.count = 0
        self.loss = torch.zeros(1)
"""


def test_group_and_device_queries_in_init_are_drawn():
    got = init_attrs(QUERIES, "Q")
    assert got["tp_rank"]["expr"] == got["pg_rank"]["expr"] == "rank" and got["pg_size"]["expr"] == "ws"
    assert got["dp_group"] == {"name": "dp_group", "kind": "group", "value": "world"}
    assert got["device"]["kind"] == "device" and got["stream"]["kind"] == "stream"
    assert got["pending"] == {"name": "pending", "kind": "const", "value": []}
    assert (
        "numel" not in got and "other" not in got and "col_rank" not in got
    )  # a tensor's size; getters with arguments
    assert "count" not in got and got["loss"]["shape"] == ["1"]  # a counter's zero start; a literal size


def test_a_none_state_gives_way_to_a_drawn_value_and_other_classes_are_not_read():
    text = ROW_LINEAR.replace(
        "        if weight is None:\n            self.weight = Parameter(torch.empty(out_features, "
        "in_features))\n        else:\n            self.weight = weight\n",
        "        self.weight = weight\n        if weight is None:\n            self.weight = "
        "Parameter(torch.empty(out_features, in_features))\n",
    )
    assert init_attrs(text, "RowLinear")["weight"]["shape"] == ["n", "n"]
    assert init_attrs(ROW_LINEAR, "Missing") == {} and init_attrs("def f(:\n", "RowLinear") == {}


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "x",
                "1",
                "None",
                "'s'",
                "torch.empty(a, b)",
                "f(a)",
                "a + 1",
                "[a]",
                "dist.get_world_size()",
                "torch.zeros(*s)",
            ]
        ),
        min_size=1,
        max_size=6,
    )
)
def test_init_attrs_never_fails_and_keeps_only_drawable_kinds(values):
    body = "".join(f"        self.v{i} = {v}\n" for i, v in enumerate(values))
    text = f"import torch\nclass C:\n    def __init__(self, x, a=2, s=None):\n{body}"
    got = init_attrs(text, "C")
    assert set(got) <= {f"v{i}" for i in range(len(values))}
    for i, v in enumerate(values):
        drawable = v not in ("f(a)", "a + 1", "[a]", "torch.zeros(*s)")
        assert (f"v{i}" in got) == drawable, (v, got)
    assert all(a["kind"] in ("const", "int", "tensor") for a in got.values())


EDGES = """import torch
import torch.distributed as dist
from typing import Generic, TypeVar
T = TypeVar("T")


class Base(Generic[T]):
    def __init__(self, group=None):
        self.group = group


class Layer(Base[T]):
    def __init__(me, /, config=None, mpu=None, flag=None, big=1e999, *, dim: int = 3):
        me.config = config
        me.mpu = mpu
        me.flag = flag
        me.big = big
        me.dim = dim
        me.idx = torch.zeros(2, dtype=int)

        def hook(me):
            me.inner = 7
        me.written = 1

    @staticmethod
    def helper(obj):
        return obj.hidden

    def run(me, x):
        me.written = x
        me.dim += 1
        return x * me.flag + me.config.scale + me.big + me.idx.sum() + me.group


class Layer:        # rebinds the name: this one is the class the module has at run time
    def __init__(self):
        self.late = True
"""


def test_edges_of_init_reading():
    """Positional-only `self` under another name, keyword-only defaults, a `None` default that the code
    dereferences (a config, a parallel-state module) taken from the name guess, an infinite default not a
    constant (the spec must survive JSON), `dtype=int` as int64, bases written `Base[T]`, nested functions
    skipped, and of two module-level classes of one name the later one."""
    text = EDGES.rsplit("class Layer:", 1)[0]
    got = init_attrs(text, "Layer")
    assert got["config"]["kind"] == "namespace" and got["mpu"] == {"name": "mpu", "kind": "group", "value": "state"}
    assert got["flag"] == {"name": "flag", "kind": "const", "value": None} and got["big"]["kind"] != "const"
    assert got["dim"] == {"name": "dim", "kind": "const", "value": 3} and got["idx"]["dtype"] == "int64"
    assert got["group"]["kind"] == "group" and "inner" not in got
    assert set(init_attrs(EDGES, "Layer")) == {"late"}


def test_used_attrs_counts_reads_and_in_place_updates_not_plain_writes():
    used = used_attrs(EDGES.rsplit("class Layer:", 1)[0], "Layer.run")
    assert {"flag", "config", "big", "idx", "group", "dim"} <= used
    assert "written" not in used and "hidden" not in used  # a plain write; a static method's argument


def test_init_state_is_proposed_once_and_never_duplicates_an_attribute():
    from mgbench.scrapers.harness.inputs.statefix import state_from_init

    init = init_attrs(ROW_LINEAR, "RowLinear", used_attrs(ROW_LINEAR, "RowLinear.forward"))
    cand = {"_init": init}
    spec = {"args": [], "attrs": [], "globals": []}
    (batch,) = state_from_init(spec, cand, "mode")
    assert sorted(a["name"] for a in batch["attrs"]) == sorted(init)
    assert state_from_init(batch, cand, "other") == []  # state already drawn: no second batch
    one = {**spec, "attrs": [{"name": "mode", "kind": "const", "value": "sum"}]}
    assert state_from_init(one, cand, "weight") == []  # the search set one itself
    assert state_from_init(spec, {"_init": {}}, "weight") == []


def test_a_missing_property_is_not_set_on_the_instance():
    """A property whose getter fails is reported missing itself: setting it would fail ('no setter'), so
    only the `__init__` state is proposed."""
    from mgbench.scrapers.harness.inputs.discovery.initattrs import class_names
    from mgbench.scrapers.harness.inputs.rules.order import propose

    cand, text = entry_candidate(ROW_LINEAR, "RowLinear.forward", "method", ["self", "x"])
    cand = {**cand, "_init": {}, "_defined": class_names(text, "RowLinear")}
    err = {"type": "AttributeError", "msg": "'RowLinear' object has no attribute 'shape'", "line": ""}
    spec = {"entry": "RowLinear.forward", "kind": "method", "args": [], "attrs": [], "globals": [], "n_attr": 8}
    assert not any(a["name"] == "shape" for s in propose(spec, err, cand) for a in s["attrs"])
    err["msg"] = "'RowLinear' object has no attribute 'mode'"
    assert any(a["name"] == "mode" for s in propose(spec, err, cand) for a in s["attrs"])


TP_MLP = """
class TP_MLP:
    def __init__(self, rank=0, world_size=8, group=None, hidden=4, tp_size: int = 2, pp_size=1):
        self.rank = rank
        self.world_size = world_size
        self.tp = tp_size
        self.pp = pp_size
        self.hidden = hidden
        self.group = group
"""


def test_world_size_defaults_become_the_runs_world_size_other_literals_stay():
    got = init_attrs(TP_MLP, "TP_MLP")
    assert got["world_size"] == {"name": "world_size", "kind": "int", "expr": "ws"}
    assert got["tp"]["expr"] == "ws"
    assert got["pp"] == {"name": "pp", "kind": "const", "value": 1}  # a parallel size of 1: none, not ws
    assert got["hidden"] == {"name": "hidden", "kind": "const", "value": 4}
    assert got["rank"] == {"name": "rank", "kind": "const", "value": 0}  # a rank keeps its default
    assert got["group"]["kind"] == "group"
