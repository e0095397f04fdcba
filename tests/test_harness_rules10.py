"""Harness rules of session 10: harmless name collisions between inlined helpers (collide.py), CUDA named
only in strings at definition time (loadtime.py)."""
from __future__ import annotations

from hypothesis import given, strategies as st

from scrapers.harness.collide import verdict
from scrapers.harness.inline import inline_candidate
from tests.test_harness_inline import _candidate

TRY_TE = "try:\n    import transformer_engine\n    HAVE_TE = True\nexcept ImportError:\n    HAVE_TE = False"


def test_same_object_by_two_import_paths_is_one_binding():
    """typing/collections.abc, torch facades and re-exports name one object: no second import line."""
    assert verdict("Callable", "import collections.abc.Callable", "import typing.Callable") == "same"
    assert verdict("Module", "import torch.nn.modules.Module", "import torch.nn.Module") == "same"
    assert verdict("OrderedDict", "import typing.OrderedDict", "import collections.OrderedDict") == "same"
    assert verdict("Metadata", "import torch.distributed.checkpoint.Metadata",
                   "import torch.distributed.checkpoint.metadata.Metadata") == "same"


def test_different_objects_still_clash():
    """`datetime` the module vs the class, `time` vs `time.time`, two different function bodies, a flag
    computed at run time: renaming would change behaviour, so inlining stops as before."""
    assert verdict("datetime", "import datetime.datetime", "import datetime") == "clash"
    assert verdict("time", "import time", "import time.time") == "clash"
    assert verdict("f", "def f():\n    return 1", "def f():\n    return 2") == "clash"
    assert verdict("HAVE", "HAVE = False", "HAVE = probe()") == "clash"
    assert verdict("warnings", "import warnings", "try:\n    import apex\nexcept ImportError:\n    warnings = 3") == "clash"
    # repository names are never imported to compare them
    assert verdict("X", "import megatron.core.utils.X", "import megatron.core.X") == "clash"


def test_type_checking_imports_and_optional_flags_coexist():
    """An `if TYPE_CHECKING:` import binds nothing at run time; availability flags set by guarded imports
    agree in one environment. 'both' means emit the new statement (it binds last)."""
    tc = "if TYPE_CHECKING:\n    from te.quant import QuantizedTensor"
    cls = "class QuantizedTensor:\n    pass"
    assert verdict("QuantizedTensor", tc, cls) == "both"
    assert verdict("QuantizedTensor", cls, tc) == "same"
    assert verdict("HAVE_TE", "HAVE_TE = False", TRY_TE) == "both"
    assert verdict("HAVE_TE", TRY_TE, TRY_TE.replace("transformer_engine", "te")) == "both"
    warn = "try:\n    import apex\nexcept ImportError:\n    import warnings\n    warnings.warn('no apex')"
    assert verdict("warnings", "import warnings", warn) == "both"
    assert verdict("HAVE_TE", TRY_TE.replace("except ImportError", "except KeyError"), "HAVE_TE = False") == "clash"


@given(st.sampled_from(["import typing.Callable", "x = 1", TRY_TE, "def g():\n    pass", "import os.path"]),
       st.sampled_from(["import collections.abc.Callable", "x = 2", "HAVE_TE = None", "class g:\n    pass",
                        "import os"]))
def test_verdict_is_reflexive_and_clash_is_symmetric(a, b):
    assert verdict("n", a, a) == "same"
    assert (verdict("n", a, b) == "clash") == (verdict("n", b, a) == "clash")


def test_two_helper_files_with_equivalent_imports_are_both_inlined(tmp_path):
    """Two repository files importing `Callable` from typing and from collections.abc and guarding the same
    optional dependency used to stop the second helper ("name collision"); now both are inlined and the
    prelude runs."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "a.py").write_text(
        f"from typing import Callable\n{TRY_TE}\n\n\ndef apply(f: Callable, x):\n    return f(x) if not HAVE_TE else x\n")
    (tmp_path / "pkg" / "b.py").write_text(
        "from collections.abc import Callable\nHAVE_TE = False\n\n\n"
        "def twice(f: Callable, x):\n    return f(f(x)) if not HAVE_TE else x\n")
    text = ("import torch\nfrom pkg.a import apply\nfrom pkg.b import twice\n\n\n"
            "def f(x):\n    return apply(torch.neg, x) + twice(torch.neg, x)\n")
    rec = inline_candidate(_candidate("f"), text, tmp_path)
    assert rec.names == ["apply", "twice"] and not rec.skipped
    assert rec.prelude.count("import Callable") == 1
    ns: dict = {}
    exec("import torch\n" + rec.prelude + "\n" + text.split("\n", 3)[3], ns)
    import torch
    x = torch.ones(2)
    assert ns["HAVE_TE"] is False and torch.equal(ns["f"](x), x * 0)


def test_cuda_in_strings_and_comments_is_not_a_gpu_call():
    """Docstrings of dataclass fields and `device="cuda"` defaults used to stop inlining (Megatron
    TransformerConfig: 71 candidates); a real CUDA or Triton call at definition time still does."""
    from scrapers.harness.loadtime import gpu_call
    assert not gpu_call('"""If True, sets torch.backends.cuda.matmul.allow_tf32"""')
    assert not gpu_call('device = "cuda"  # cuda by default')
    assert not gpu_call('def f(d=torch.device("cuda")):\n    pass')
    assert not gpu_call("torch.cuda.is_available()")
    assert gpu_call("torch.cuda.current_device()")
    assert gpu_call("triton.jit")
    assert gpu_call('x = """a\ncuda\nb""" + torch.cuda.Stream()')


def test_config_class_whose_docstrings_mention_cuda_is_inlined(tmp_path):
    """A dataclass whose field docstrings mention CUDA is inlined; one whose field default calls CUDA is not."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "cfg.py").write_text(
        "from dataclasses import dataclass\nimport torch\n\n\n@dataclass\nclass Config:\n    tp: int = 1\n"
        '    """Tensor-parallel size; sets torch.backends.cuda.matmul.allow_tf32."""\n    scale: float = 2.0\n\n\n'
        "@dataclass\nclass GpuConfig:\n    dev: int = torch.cuda.current_device()\n")
    text = ("import torch\nfrom pkg.cfg import Config\n\n\n"
            "def f(x, group=None):\n    return x * Config().scale\n")
    rec = inline_candidate(_candidate("f"), text, tmp_path)
    assert rec.names == ["Config"] and not rec.skipped
    gpu = text.replace("Config", "GpuConfig")
    rec = inline_candidate(_candidate("g"), gpu, tmp_path)
    assert "GPU call at definition time" in rec.skipped["pkg.cfg.GpuConfig"]


def test_loggers_typevars_and_flag_guarded_blocks_coexist():
    """Two files' loggers or TypeVars of one name keep the first; `if HAVE_TE:` blocks are flag-guarded
    like `try` imports; an `if` on anything else still clashes."""
    assert verdict("logger", "logger = logging.getLogger(__name__)", "logger = get_logger(__name__)") == "same"
    assert verdict("T", 'T = TypeVar("T")', 'T = TypeVar("T", int, str)') == "same"
    assert verdict("T", 'T = TypeVar("T")', 'T = logging.getLogger("T")') == "clash"
    assert verdict("H", "H = False", "if HAVE_TE:\n    H = True") == "both"
    assert verdict("H", "H = False", "if cond:\n    H = True") == "clash"


def test_failed_import_of_a_definition_is_replaced_when_the_definition_is_inlined(tmp_path):
    """A placeholder import of `pkg.cfg.Config` (an earlier import of it failed) is replaced when the
    definition is later inlined with a neighbour from its file, and an import of it after the definition
    adds nothing (DeepSpeed `is_moe_param`: used to be 'name collision: is_moe_param (import ... vs def')."""
    from scrapers.harness.inline import _Inliner
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "cfg.py").write_text(
        "class Config:\n    scale = 3.0\n\n\ndef helper(x):\n    return x * Config.scale\n")
    inl = _Inliner(str(tmp_path), 1000)
    inl.import_line("pkg.cfg", "Config", "Config", missing=True)
    assert inl.missing == {"Config"}
    inl.provide("pkg/cfg.py", "helper")
    assert inl.missing == set() and [p[4] for p in inl.pieces] == [["Config"], ["Config"], ["helper"]]
    inl.import_line("pkg.cfg", "Config", "Config", missing=True)      # after the definition: nothing
    assert len(inl.pieces) == 3 and inl.missing == set()
    import torch
    ns: dict = {}
    exec("".join(p[3] for p in inl.pieces[1:]), ns)
    assert torch.equal(ns["helper"](torch.ones(2)), torch.full((2,), 3.0))


def test_tensor_spread_as_mapping_and_list_called_as_function_are_mended():
    """`{**extra}` with `extra` guessed as a tensor ('Tensor' object is not a mapping) becomes an empty dict;
    a per-rank list that is called ('list' object is not callable) becomes a function."""
    from scrapers.harness.mutate import propose
    from tests.test_harness_inline import _candidate
    t = {"name": "extra", "kind": "tensor", "shape": ["n"], "dtype": "float32", "replicated": False}
    spec = {"args": [{"name": "x", "kind": "tensor", "shape": ["n"], "dtype": "float32", "replicated": False}, t],
            "attrs": [], "globals": []}
    err = {"type": "TypeError", "msg": "'Tensor' object is not a mapping", "line": "opts = {**extra, 'a': 1}"}
    got = [a for s in propose(spec, err, _candidate("f")) for a in s["args"] if a["name"] == "extra"]
    assert {"name": "extra", "kind": "namespace", "dict": True, "fields": []} in got
    fn = {**t, "name": "hook", "kind": "tensors", "count": "ws"}
    spec["args"][1] = fn
    err = {"type": "TypeError", "msg": "'list' object is not callable", "line": "y = hook(x)"}
    got = [a for s in propose(spec, err, _candidate("f")) for a in s["args"] if a["name"] == "hook"]
    assert any(a["kind"] == "fn" for a in got) and not any(a["kind"] == "fn" for s in propose(
        spec, {**err, "msg": "'dict' object is not callable"}, _candidate("f")) for a in s["args"])


TC_PRELUDE = '''import torch
import torch.distributed as dist
from typing import TYPE_CHECKING, Optional
if TYPE_CHECKING:
    from transformer_engine.pytorch.quantized_tensor import QuantizedTensor


class _Identity(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor: QuantizedTensor, scale: Optional[QuantizedTensor] = None) -> QuantizedTensor:
        return tensor.detach()


class QuantizedTensor(torch.Tensor):
    pass


def f(x, group=None):
    dist.all_reduce(x, group=group)
    return _Identity.apply(x)
'''


def test_type_checking_names_in_annotations_are_quoted():
    """Flattened files lose their `from __future__ import annotations`: an annotation naming a TYPE_CHECKING
    import evaluated before the class is defined raised NameError at load (TransformerEngine
    `_IdentityFunc`); such annotations are quoted, other text stays."""
    from scrapers.harness.render import prepare
    from tests.test_harness_rules8 import _load
    import pytest
    with pytest.raises(NameError, match="QuantizedTensor"):
        _load(TC_PRELUDE)
    prep = prepare(TC_PRELUDE)
    assert "tensor: 'QuantizedTensor', scale: 'Optional[QuantizedTensor]' = None) -> 'QuantizedTensor':" in prep.body
    assert "class QuantizedTensor(torch.Tensor):" in prep.body
    ns = _load(prep.body)
    assert ns["_Identity"].forward.__annotations__["tensor"] == "QuantizedTensor"
