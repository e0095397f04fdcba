"""Task-side runtime, part 2: stand-ins for repository globals (parallel state, accelerator, pytest,
ColossalAI global context, DeepSpeed...), which scrapers/harness/standins.py maps imports to. Inlined
verbatim after part 1 (`__init__.py`) into every level-4 task (torch + stdlib only). A text part, not
imported: it uses part 1's names (`_mg_types`, `_mg_torch`, `_mg_dist`, `_MgMissing`, `_MG_GPU_RANK`)."""


class _MgParallelState:
    """Stand-in for a parallel-state module (Megatron parallel_state/mpu, DeepSpeed groups): every
    parallel group is the world group, sizes are the world size, ranks the global rank."""

    def __getattr__(self, name):
        low = name.lower().lstrip("_")
        if low.endswith("_group") or low.endswith("_groups") or low.endswith("group_gloo"):
            return lambda *a, **k: _mg_dist.group.WORLD
        if low.endswith("world_size") or low.endswith("_size"):
            return lambda *a, **k: _mg_dist.get_world_size()
        if low.endswith("src_rank") or low.endswith("first_rank"):
            return lambda *a, **k: 0
        if low.endswith("last_rank"):
            return lambda *a, **k: _mg_dist.get_world_size() - 1
        if low.endswith("_rank"):
            return lambda *a, **k: _mg_dist.get_rank()
        if low.endswith("first_stage"):       # the pipeline is the world: stage = rank
            return lambda *a, **k: _mg_dist.get_rank() == 0
        if low.endswith("last_stage"):
            return lambda *a, **k: _mg_dist.get_rank() == _mg_dist.get_world_size() - 1
        if low in ("model_parallel_is_initialized", "is_initialized") or low.endswith("_initialized"):
            return lambda *a, **k: True
        if low.startswith(("initialize_", "destroy_")):     # set-up/tear-down: the groups already exist
            return _mg_noop
        raise ImportError(f"mgbench-missing-import: parallel_state.{name}")


class _MgAccelerator:
    """Stand-in for DeepSpeed/ColossalAI `get_accelerator()` on the task's device."""

    def device_name(self, *a):      # a GPU rank: NCCL ("nccl", "cpu:gloo,cuda:nccl") or, inside the call, gloo
        return "cuda" if _MG_GPU_RANK[0] or "nccl" in _mg_dist.get_backend() else "cpu"   # over CUDA inputs

    current_device_name = device_name

    def current_device(self):
        return _mg_torch.device(self.device_name())

    def communication_backend_name(self):
        return "nccl" if "nccl" in _mg_dist.get_backend() else _mg_dist.get_backend()

    communication_backend = property(communication_backend_name)

    def synchronize(self, *a):
        return None

    get_current_device = current_device

    def is_bf16_supported(self):
        return True

    is_fp16_supported = is_available = is_bf16_supported
    support_set_device = property(lambda self: self.device_name() == "cuda")

    def supported_dtypes(self):
        return [_mg_torch.float, _mg_torch.half, _mg_torch.bfloat16]

    def manual_seed(self, seed):        # seeds the task's generators alike on every device
        _mg_torch.manual_seed(seed)

    manual_seed_all = manual_seed

    def random(self):
        return _mg_torch.random

    def device_count(self):
        return _mg_torch.cuda.device_count() if self.device_name() == "cuda" else 1

    def set_device(self, index):
        if self.device_name() == "cuda":
            _mg_torch.cuda.set_device(index)

    def device(self, index=None):
        return _mg_torch.device(self.device_name(), index) if self.device_name() == "cuda" else _mg_torch.device("cpu")

    def on_accelerator(self, tensor):
        return tensor.device.type == self.device_name()

    def empty_cache(self):
        return None

    range_push = range_pop = synchronize

    def _factory(self, dtype):
        """DeepSpeed `FloatTensor` & co.: data -> a tensor of that dtype on the device; sizes -> zeros."""
        def make(*a):
            if a and not isinstance(a[0], int):
                return _mg_torch.tensor(a[0], dtype=dtype, device=self.device_name())
            return _mg_torch.zeros(*a, dtype=dtype, device=self.device_name())
        return make

    def _cuda_or(self, name, cpu_value):
        """torch.cuda's `name` on a GPU pool; on a CPU rank a constant (memory stats 0, resets no-ops) or, for
        streams and events, the ordered-work stand-in (the class itself for `Event`/`Stream`)."""
        if self.device_name() == "cuda":
            if name in ("total_memory", "available_memory"):
                return lambda *a, **k: _mg_torch.cuda.mem_get_info()[name == "total_memory"]
            return getattr(_mg_torch.cuda, name)
        if name in ("Event", "Stream"):
            return _MgCudaStandIn
        return lambda *a, **k: cpu_value() if callable(cpu_value) else cpu_value

    def get_rng_state(self, *a, **k):
        """The device generator's state (the CPU generator's on a CPU rank)."""
        return _mg_torch.cuda.get_rng_state(*a, **k) if self.device_name() == "cuda" else _mg_torch.get_rng_state()

    def set_rng_state(self, state, *a, **k):
        return _mg_torch.cuda.set_rng_state(state, *a, **k) if self.device_name() == "cuda" else \
            _mg_torch.set_rng_state(state)

    def __getattr__(self, name):
        if name in _MG_ACC_MEMORY:
            return self._cuda_or(name, _MG_ACC_MEMORY[name])
        if name in ("Event", "Stream", "stream", "current_stream", "default_stream"):   # streams and events
            return self._cuda_or(name, _MgCudaStandIn)
        kinds = {"FloatTensor": "float", "HalfTensor": "half", "BFloat16Tensor": "bfloat16", "IntTensor": "int",
                 "LongTensor": "long", "ByteTensor": "uint8", "DoubleTensor": "double", "BoolTensor": "bool"}
        if name in kinds:
            return self._factory(getattr(_mg_torch, kinds[name]))
        raise ImportError(f"mgbench-missing-import: accelerator.{name}")


_MG_ACC_MEMORY = {"memory_allocated": 0, "max_memory_allocated": 0, "memory_reserved": 0, "max_memory_reserved": 0,
                  "memory_cached": 0, "max_memory_cached": 0, "total_memory": 0, "available_memory": 0,
                  "memory_stats": dict, "reset_peak_memory_stats": None, "reset_max_memory_allocated": None,
                  "reset_max_memory_cached": None}


def _mg_noop(*a, **k):
    return None


class _MgLogger:
    """A repository logger (ColossalAI `get_dist_logger()`, `logger.info(msg, ranks=[0])`): logs nothing."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _mg_noop


def _mg_ps_attr(name):
    try:
        return getattr(_MgParallelState(), name)
    except ImportError:
        return _MgMissing(f"parallel_state.{name}")


class _MgBase:
    """Base class standing in for an unavailable base (its inherited features are missing)."""

    def __class_getitem__(cls, key):      # a generic base (`Request[T]`)
        return cls


def _mg_passthrough(*a, **k):
    """Stand-in for a decorator (or decorator factory) that does not change what the function computes."""
    if len(a) == 1 and not k and callable(a[0]):
        return a[0]
    return _mg_passthrough


class _MgMarks:
    """`pytest.mark.*` / registries: every attribute is a pass-through decorator."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _mg_passthrough


class _MgPytest:
    mark = _MgMarks()
    fixture = staticmethod(_mg_passthrough)

    @staticmethod
    def param(*values, **k):            # a parametrize case: its values (marks and ids do not compute)
        return values[0] if len(values) == 1 else values

    @staticmethod
    def skip(reason="", *a, **k):       # the test decided it cannot run here (a reason, not a missing import)
        raise RuntimeError(f"mgbench-skipped-by-test: {reason}"[:200])

    @staticmethod
    def importorskip(name, *a, **k):    # torch modules import (or skip, as pytest would); others are missing
        if name.split(".")[0] != "torch":
            return _MgMissing(name)
        try:
            __import__(name)
        except ImportError:
            _MgPytest.skip(f"could not import {name!r}")
        return _mg_sys.modules[name]

    def __getattr__(self, name):
        raise ImportError(f"mgbench-missing-import: pytest.{name}")


class _MgGroupCollection:
    """Stand-in for Megatron `ProcessGroupCollection` (and grids): every group attribute is the world group."""

    def __init__(self, *a, **k):
        self.__dict__.update(k)

    @classmethod
    def use_mpu_process_groups(cls, *a, **k):
        return cls()

    setup_process_groups_for_ddp = use_mpu_process_groups

    def __getattr__(self, name):
        if name.startswith("__") or name.startswith(("get_", "has_", "is_")):
            raise ImportError(f"mgbench-missing-import: ProcessGroupCollection.{name}")
        return _mg_dist.group.WORLD


class _MgGlobalContext:
    """Stand-in for ColossalAI's `global_context` (gpc): every parallel mode is the world group."""

    def get_group(self, mode=None):
        return _mg_dist.group.WORLD

    get_cpu_group = get_group

    def get_world_size(self, mode=None):
        return _mg_dist.get_world_size()

    def get_local_rank(self, mode=None):
        return _mg_dist.get_rank()

    def get_global_rank(self, *a):
        return _mg_dist.get_rank()

    def is_initialized(self, mode=None):
        return True

    def get_ranks_in_group(self, mode=None):
        return list(range(_mg_dist.get_world_size()))

    def is_first_rank(self, *a, **k):
        return _mg_dist.get_rank() == 0

    def is_last_rank(self, *a, **k):
        return _mg_dist.get_rank() == _mg_dist.get_world_size() - 1

    is_pipeline_first_stage, is_pipeline_last_stage = is_first_rank, is_last_rank

    def get_prev_global_rank(self, mode=None):
        return (_mg_dist.get_rank() - 1) % _mg_dist.get_world_size()

    def get_next_global_rank(self, mode=None):
        return (_mg_dist.get_rank() + 1) % _mg_dist.get_world_size()

    def __getattr__(self, name):
        if name.endswith("_parallel_size"):
            return _mg_dist.get_world_size()
        raise ImportError(f"mgbench-missing-import: global_context.{name}")


class _MgEnum:
    """Stand-in for an enum of modes (ColossalAI `ParallelMode`): each member is its name."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return name


class _MgTestUtils:
    """Stand-in for test set-up helpers (Megatron `tests...Utils`): the task's ranks are already set up."""

    @property
    def world_size(self):
        return _mg_dist.get_world_size()

    @property
    def rank(self):
        return _mg_dist.get_rank()

    local_rank = rank

    def __getattr__(self, name):
        if name in ("initialize_model_parallel", "destroy_model_parallel", "initialize_distributed"):
            return _mg_noop
        raise ImportError(f"mgbench-missing-import: test_utilities.Utils.{name}")


class _MgDistributedTest:
    """Base class standing in for DeepSpeed's `DistributedTest`: the ranks are the task's ranks."""

    @property
    def world_size(self):
        return _mg_dist.get_world_size()


class _MgDeepSpeed:
    """Stand-in for `import deepspeed`: `deepspeed.comm` is torch.distributed, the accelerator the task's."""

    comm = _mg_dist
    init_distributed = staticmethod(_mg_noop)

    def __getattr__(self, name):
        if name == "accelerator":
            return _mg_types.SimpleNamespace(get_accelerator=_MgAccelerator)
        raise ImportError(f"mgbench-missing-import: deepspeed.{name}")


class _MgVersion:
    """Stand-in for `packaging.version.Version`: release numbers compared as tuples ("2.11.0+cu130" -> (2, 11, 0);
    pre-release and local tags are dropped), which is what torch version checks use."""

    def __init__(self, text):
        import re as _re
        self.public = str(text).split("+")[0]
        nums = _re.match(r"\d+(\.\d+)*", self.public)
        self.release = tuple(int(x) for x in nums.group(0).split(".")) if nums else (0,)
        self.base_version = ".".join(map(str, self.release))
        self.major, self.minor, self.micro = (self.release + (0, 0, 0))[:3]

    def _key(self, other):
        other = other if isinstance(other, _MgVersion) else _MgVersion(other)
        n = max(len(self.release), len(other.release))
        return self.release + (0,) * (n - len(self.release)), other.release + (0,) * (n - len(other.release))

    def __eq__(self, other):
        a, b = self._key(other)
        return a == b

    def __lt__(self, other):
        a, b = self._key(other)
        return a < b

    def __le__(self, other):
        a, b = self._key(other)
        return a <= b

    def __gt__(self, other):
        a, b = self._key(other)
        return a > b

    def __ge__(self, other):
        a, b = self._key(other)
        return a >= b

    def __hash__(self):                 # equal versions ("2.1" == "2.1.0") hash alike
        rel = self.release
        while len(rel) > 1 and rel[-1] == 0:
            rel = rel[:-1]
        return hash(rel)

    def __str__(self):
        return self.public


def _mg_torch_min_version(version, check_equality=True):
    """Megatron `is_torch_min_version` / DeepSpeed `required_torch_version(min_version=...)` on the running torch."""
    have = _MgVersion(_mg_torch.__version__)
    return have >= version if check_equality else have > version
