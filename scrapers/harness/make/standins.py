"""Stand-ins for imports a task module cannot have: one table, read top to bottom, first match wins.

`render.prepare` replaces `from module import name` (or `import module`, name None) by `bound = expr`.
Each entry of STAND_INS names the imports it matches (every given condition must hold) and the
expression that replaces them; the expressions name classes and functions of the task-side runtime
(scrapers/harness/make/runtime/): `_MgParallelState` and the other parts every level-4 task carries, or an
on-demand part (`_MgTriton`, `_MgNumpy`) that render.prepare adds only to a task whose code uses it.
The last entry matches everything: a `_MgMissing` placeholder that fails when used (works=False).

Order matters where patterns overlap: a parallel-state module's `import` binds the whole state before
its attributes are looked up one by one, `triton_dist` stands in only as a whole or for `jit`, and the
specific version helpers of `packaging` come before the generic ones. Adding a stand-in: one entry
here (and its runtime class, if new, in scrapers/harness/make/runtime/). Host side only: nothing here is
inlined into a task.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

FACADES = frozenset({"deepspeed.comm", "deepspeed.comm.comm", "deepspeed.comm.torch"})
STATE_NAMES = frozenset({"parallel_state", "mpu", "groups", "ps", "parallel_states", "mappings_state"})
STATE_MODULES = ("parallel_state", ".mpu", "utils.groups")  # module suffixes of parallel state
NOOP_NAMES = frozenset(
    {
        "print_rank_0",
        "print_rank_last",
        "log_single_rank",
        "dist_print",
        "warn_rank_0",
        "log_dist",
        "print_rank0",
        "nvtx_range_push",
        "nvtx_range_pop",
    }
)
DECORATORS = frozenset(
    {
        "instrument_w_nvtx",
        "jit_fuser",
        "trace_fn",
        "parameterize",
        "clear_cache_before_run",
        "rerun_if_address_is_in_use",
        "rerun_on_exception",
        "nvtx_decorator",
        "nvtx_range",
        "skip_if_not_enough_gpus",
        "register_module",
        "no_torch_dynamo",
        "disable_compile",
    }
)
DECORATOR_FACTORIES = frozenset({"copy_signature"})  # `@f(source)`: typing only, the function as is
TRITON_MODULES = frozenset({"triton", "triton.language", "triton_dist", "triton_dist.language"})

VERSION_NAMESPACE = "_mg_types.SimpleNamespace(Version=_MgVersion, parse=_MgVersion)"
REQUIRED_TORCH_VERSION = (
    "(lambda min_version=None, max_version=None: (min_version is None or _mg_torch_min_version("
    "min_version)) and (max_version is None or _MgVersion(_mg_torch.__version__) <= max_version))"
)
COLOSSAL_ACCELERATOR = (
    "_mg_types.SimpleNamespace(get_accelerator=_MgAccelerator, "
    "get_current_device=lambda: _MgAccelerator().current_device())"
)

NameCondition = Literal["none", "given", "upper"]


@dataclass(frozen=True)
class StandIn:
    """One row of the table: the imports it matches and what replaces them.

    An import is `from module import name` (name None for `import module`); `full` is `module.name`
    (or `module`), `last` the imported name (or the module's last component). Every condition that is
    set must hold. `expr` is a format string over `module`, `name`, `full` and `dot_name` (`.name`, or
    '' without a name), each with `!r` where a literal is wanted."""

    label: str  # what the entry stands in for (tests and docs name it)
    expr: str
    works: bool = True  # False: a placeholder that fails when used
    full: frozenset[str] = frozenset()
    last: frozenset[str] = frozenset()
    name: frozenset[str] = frozenset()  # the imported name exactly
    name_is: NameCondition | None = None  # none: `import module`; given: a name; upper: one in capitals
    module: frozenset[str] = frozenset()  # the module exactly
    module_suffix: tuple[str, ...] = ()  # the module ends with one of these
    module_has: str = ""  # the module contains this

    def matches(self, module: str, name: str | None, full: str, last: str) -> bool:
        return (
            (not self.full or full in self.full)
            and (not self.last or last in self.last)
            and (not self.name or name in self.name)
            and _name_is(self.name_is, name)
            and (not self.module or module in self.module)
            and (not self.module_suffix or module.endswith(self.module_suffix))
            and self.module_has in module
        )

    def render(self, module: str, name: str | None, full: str) -> str:
        return self.expr.format(module=module, name=name, full=full, dot_name=f".{name}" if name else "")


def _name_is(cond: NameCondition | None, name: str | None) -> bool:
    if cond is None:
        return True
    if cond == "none":
        return name is None
    return bool(name) and (cond == "given" or name.isupper())


def _set(*names: str) -> frozenset[str]:
    return frozenset(names)


STAND_INS: tuple[StandIn, ...] = (
    StandIn("deepspeed.comm facade", "_mg_dist", full=FACADES),
    StandIn("nanotron.distributed facade", "_mg_dist", full=_set("nanotron.distributed")),
    # parallel state: the whole state where imported as a whole, else one attribute of it
    StandIn("parallel-state module by name", "_MgParallelState()", last=STATE_NAMES),
    StandIn("parallel-state module imported whole", "_MgParallelState()", module_suffix=STATE_MODULES, name_is="none"),
    StandIn("parallel-state attribute", "_mg_ps_attr({name!r})", module_suffix=STATE_MODULES),
    # common repository globals (runtime classes)
    StandIn("ColossalAI global context", "_MgGlobalContext()", last=_set("global_context")),
    StandIn("ColossalAI gpc", "_MgGlobalContext()", last=_set("gpc"), module_has="colossalai"),
    StandIn("ParallelMode enum", "_MgEnum()", last=_set("ParallelMode")),
    StandIn("Megatron ProcessGroupCollection", "_MgGroupCollection", last=_set("ProcessGroupCollection")),
    # Triton: kernels define but do not launch (runtime/standin_triton.py); triton_dist whole or its jit
    StandIn("triton", "_MgTriton({module!r}){dot_name}", module=TRITON_MODULES - {"triton_dist"}),
    StandIn(
        "triton_dist imported whole", "_MgTriton({module!r}){dot_name}", module=_set("triton_dist"), name_is="none"
    ),
    StandIn("triton_dist.jit", "_MgTriton({module!r}){dot_name}", module=_set("triton_dist"), name=_set("jit")),
    StandIn("pytest", "_MgPytest()", module=_set("pytest"), name_is="none"),
    StandIn("Megatron test Utils", "_MgTestUtils()", last=_set("Utils"), module_has="test_utilities"),
    StandIn("DeepSpeed DistributedTest", "_MgDistributedTest", last=_set("DistributedTest")),
    StandIn("deepspeed imported whole", "_MgDeepSpeed()", module=_set("deepspeed"), name_is="none"),
    # DeepSpeed's `@compiler.compile()` is torch.compile: the eager function computes the same (and the
    # sandbox forbids inductor's compiler subprocesses)
    StandIn(
        "DeepSpeed compiler",
        "_mg_types.SimpleNamespace(compile=lambda *a, **k: _mg_passthrough)",
        full=_set("deepspeed.runtime.compiler"),
    ),
    StandIn("pass-through decorator", "_mg_passthrough", last=DECORATORS),
    StandIn("pass-through decorator factory", "(lambda *a, **k: _mg_passthrough)", last=DECORATOR_FACTORIES),
    # physicsnemo's `profile` is a profiler object's bound __call__, used bare (`@profile`) on halo/conv code
    StandIn(
        "physicsnemo profile decorator",
        "_mg_passthrough",
        last=_set("profile"),
        module_has="physicsnemo.utils.profiling",
    ),
    StandIn("registry marks", "_MgMarks()", module_suffix=("registry",), name_is="upper"),
    # Megatron's global args: a module global the search synthesizes
    StandIn("Megatron get_args", "(lambda *a, **k: args)", last=_set("get_args"), module_has="megatron"),
    StandIn("global_vars get_args", "(lambda *a, **k: args)", last=_set("get_args"), module_suffix=("global_vars",)),
    StandIn(
        "model_parallel_cuda_manual_seed",
        "(lambda seed, *a, **k: _mg_torch.manual_seed(seed))",
        last=_set("model_parallel_cuda_manual_seed"),
    ),
    StandIn(
        "ColossalAI accelerator",
        COLOSSAL_ACCELERATOR,
        last=_set("accelerator"),
        name_is="given",
        module_has="colossalai",
    ),
    StandIn("get_current_device", "(lambda *a: _MgAccelerator().current_device())", last=_set("get_current_device")),
    # fairscale's model_parallel.initialize: parallel state as a whole or one attribute
    StandIn("fairscale initialize", "_MgParallelState()", last=_set("initialize"), module_suffix=("model_parallel",)),
    StandIn(
        "fairscale initialize imported whole",
        "_MgParallelState()",
        module_suffix=("model_parallel.initialize",),
        name_is="none",
    ),
    StandIn("fairscale initialize attribute", "_mg_ps_attr({name!r})", module_suffix=("model_parallel.initialize",)),
    # inside fairscale.nn.model_parallel the same module is imported relatively (`from .initialize import`)
    StandIn(
        "fairscale initialize attribute, relative",
        "_mg_ps_attr({name!r})",
        module=_set("initialize"),
        name=_set(
            "get_model_parallel_group",
            "get_model_parallel_rank",
            "get_model_parallel_world_size",
            "get_data_parallel_group",
            "get_data_parallel_rank",
            "get_data_parallel_world_size",
        ),
    ),
    # version helpers (packaging.version, torch version checks) on the running torch
    StandIn("packaging.version imported whole", VERSION_NAMESPACE, module=_set("packaging.version"), name_is="none"),
    StandIn("packaging's version", VERSION_NAMESPACE, module=_set("packaging"), name=_set("version")),
    # `import packaging.version` binds `packaging`
    StandIn(
        "packaging imported whole",
        f"_mg_types.SimpleNamespace(version={VERSION_NAMESPACE})",
        module=_set("packaging"),
        name_is="none",
    ),
    StandIn("packaging.version Version", "_MgVersion", module=_set("packaging.version"), last=_set("Version", "parse")),
    StandIn(
        "minimum torch version", "_mg_torch_min_version", last=_set("is_torch_min_version", "torch_version_at_least")
    ),
    StandIn("required_torch_version", REQUIRED_TORCH_VERSION, last=_set("required_torch_version")),
    StandIn(
        "Megatron get_torch_version",
        "(lambda *a: _MgVersion(_mg_torch.__version__))",  # a Version
        last=_set("get_torch_version"),
    ),
    StandIn(
        "fairscale torch_version",
        "(lambda *a: _MgVersion(_mg_torch.__version__).release)",  # int tuple
        last=_set("torch_version"),
    ),
    # accelerator, group queries, logging
    StandIn("get_accelerator", "_MgAccelerator", last=_set("get_accelerator")),
    StandIn(
        "group size",
        "(lambda group=None: _mg_dist.get_world_size(group))",
        last=_set("get_pg_size", "get_tensor_model_parallel_world_size_from_group"),
    ),
    StandIn("group rank", "(lambda group=None: _mg_dist.get_rank(group))", last=_set("get_pg_rank")),
    StandIn("rank-0 printing and NVTX ranges", "_mg_noop", last=NOOP_NAMES),
    StandIn("module logger", "__import__('logging').getLogger('mgbench.mined')", last=_set("logger")),
    # ColossalAI: `logger = get_dist_logger(); logger.info(...)`
    StandIn("logger factory", "(lambda *a, **k: _MgLogger())", last=_set("get_dist_logger", "get_logger")),
    StandIn("missing", "_MgMissing({full!r})", works=False),  # anything else: fails when used
)


def lookup(module: str, name: str | None) -> StandIn:
    """The first entry of STAND_INS matching `from module import name` (the last one matches all)."""
    full = f"{module}.{name}" if name else module
    last = (name or module).split(".")[-1]
    return next(s for s in STAND_INS if s.matches(module, name, full, last))


def stand_in(module: str, name: str | None) -> tuple[str, bool]:
    """(expression, works) replacing `from module import name` (or `import module` when name is None)."""
    entry = lookup(module, name)
    return entry.render(module, name, f"{module}.{name}" if name else module), entry.works
