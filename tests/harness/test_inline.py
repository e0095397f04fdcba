"""The candidate's source: extraction (class-level statements) and inlining of repository-local helpers
(scrapers/harness/make/inline.py): transitive helpers, star re-exports, script-style imports, line budget,
third-party annotations."""

from __future__ import annotations

import textwrap

from mgbench.scrapers.harness.make.inline import inline_candidate
from mgbench.scrapers.harness.make.render import prepare
from mgbench.scrapers.harness.make.splice import apply
from tests.harness.helpers import CANDIDATES, _candidate, _setup, entry_candidate


def test_transitive_helpers_are_inlined_with_their_spans(tmp_path):
    src, _ = _setup(tmp_path)
    rec = inline_candidate(_candidate("reduce_scaled"), CANDIDATES["reduce_scaled"], src / "mined")
    assert rec.names == ["scale_sum"] and not rec.skipped
    spans = {(s["path"], s["line_start"], s["line_end"]) for s in rec.spans}
    # re-export followed from pkg/__init__.py; constants and the aliased helper come along, `unused` does not
    assert spans == {("pkg/ops.py", 8, 9), ("pkg/consts.py", 1, 1), ("pkg/norm.py", 3, 3), ("pkg/norm.py", 6, 7)}
    assert "normalize = _norm" in rec.prelude and "def unused" not in rec.prelude and "OTHER" not in rec.prelude
    text = apply(CANDIDATES["reduce_scaled"], rec)
    assert "from pkg import" not in text and text.index("import torch.distributed") < text.index("def _norm")
    prep = prepare(text)
    assert not prep.missing and "import math" in prep.body


def test_script_style_import_of_a_test_helper_is_found_above_the_importing_file(tmp_path):
    src, _ = _setup(tmp_path)
    cand = _candidate("t")
    cand["provenance"]["path"] = "tests/unit/runtime/test_x.py"
    text = "import torch\nfrom unit.helpers import double\n\n\ndef t(x):\n    return double(x)\n"
    rec = inline_candidate(cand, text, src / "mined")
    assert rec.names == ["double"] and rec.spans[0]["path"] == "tests/unit/helpers.py"


def test_third_party_dependency_stays_missing_with_reason(tmp_path):
    src, _ = _setup(tmp_path)
    rec = inline_candidate(_candidate("reduce_lib"), CANDIDATES["reduce_lib"], src / "mined")
    # `kernel` needs the third-party decorator when it is defined: not inlined, the reason is kept
    assert "pkg.gpu.kernel" in rec.skipped and "fancy_gpu_lib" in rec.skipped["pkg.gpu.kernel"]
    assert rec.names == ["via_lib"]
    prep = prepare(apply(CANDIDATES["reduce_lib"], rec))
    assert "fancy_gpu_lib" in prep.missing and "pkg.gpu.kernel" in prep.missing


STAR_REPO = {
    "lib/__init__.py": "",
    "lib/nn/__init__.py": "from .layer import *\nfrom .loss import *\n",
    "lib/nn/layer/__init__.py": "from .linear import *\n",
    "lib/nn/layer/linear.py": "import torch\n\n__all__ = ['ShardLinear']\n\n\nclass ShardLinear:\n"
    "    def __init__(self, scale):\n        self.scale = scale\n\n"
    "    def __call__(self, x):\n        return x * self.scale\n",
    "lib/nn/loss.py": "def _private():\n    return 0\n",
}


def test_star_reexport_is_followed_to_the_defining_file(tmp_path):
    """`from lib.nn import ShardLinear` where lib/nn re-exports `from .layer import *` (two levels): the class
    is inlined from lib/nn/layer/linear.py with its span; a name nothing binds stays missing."""
    from mgbench.scrapers.harness.make.inline import inline_candidate
    from tests.harness.helpers import _candidate

    for rel, text in STAR_REPO.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    text = "import torch\nfrom lib.nn import ShardLinear, Missing\n\n\ndef f(x):\n    return ShardLinear(2.0)(x)\n"
    rec = inline_candidate(_candidate("f"), text, tmp_path)
    assert rec.names == ["ShardLinear"] and rec.spans[0]["path"] == "lib/nn/layer/linear.py"
    assert rec.spans[0]["line_start"] == 6 and "not found" in rec.skipped["lib.nn.Missing"]


def test_line_budget_failure_of_one_candidate_does_not_block_the_helper_for_others(tmp_path):
    """The line budget is per candidate: a helper that did not fit after a large import of candidate A is
    still inlined for candidate B (it used to be remembered as failed for the whole checkout)."""
    from mgbench.scrapers.harness.make.inline import inline_candidate
    from tests.harness.helpers import _candidate

    big = "TABLE = [\n" + "".join(f"    {i},\n" for i in range(30)) + "]\n"
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "big.py").write_text(big)
    (tmp_path / "pkg" / "small.py").write_text("def helper(x):\n    return x * 2\n")
    a = (
        "import torch\nfrom pkg.big import TABLE\nfrom pkg.small import helper\n\n\ndef a(x):\n    return "
        "helper(x)[TABLE[0]]\n"
    )
    b = "import torch\nfrom pkg.small import helper\n\n\ndef b(x):\n    return helper(x)\n"
    ra = inline_candidate(_candidate("a"), a, tmp_path, max_lines=33)
    assert ra.names == ["TABLE"] and "closure over" in ra.skipped["pkg.small.helper"]
    rb = inline_candidate(_candidate("b"), b, tmp_path, max_lines=33)
    assert rb.names == ["helper"] and not rb.skipped
    # a whole-module import needs what the candidate uses of it: one candidate's missing attribute is not cached
    whole = "import torch\nimport pkg.small as S\n\n\ndef {f}(x):\n    return S.{attr}(x)\n"
    rc = inline_candidate(_candidate("c"), whole.format(f="c", attr="nothing_here"), tmp_path)
    assert "not defined" in rc.skipped["pkg.small"]
    rd = inline_candidate(_candidate("d"), whole.format(f="d", attr="helper"), tmp_path)
    assert rd.names == ["S"] and not rd.skipped


STAR_FILES = {
    "pkg/__init__.py": "",
    "pkg/common.py": "import torch\nfrom torch import Tensor\n\nBATCH = 4\n\n\ndef check_equal(a, b):\n"
    "    assert torch.allclose(a, b)\n",
    "pkg/test_layer.py": "from pkg.common import *\n\n\ndef test_layer(x):\n    check_equal(x, x)\n"
    "    return x[:BATCH]\n",
}


def test_names_from_the_candidates_own_star_import_are_inlined(tmp_path):
    """A mined file that gets `torch`, `BATCH` and `check_equal` through `from pkg.common import *`: the
    scraper reports them unresolved; the inliner binds them from the star-imported module (the DeepSpeed
    ZeRO-3 optimizer got `torch` and `Tensor` this way and failed with NameError)."""
    from mgbench.scrapers.harness.make.inline import inline_candidate
    from mgbench.scrapers.harness.make.splice import apply
    from tests.harness.helpers import _candidate

    for rel, text in STAR_FILES.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    cand = _candidate("test_layer")
    cand["provenance"]["path"] = "pkg/test_layer.py"
    cand["unresolved"] = ["BATCH", "Tensor", "check_equal", "nowhere", "torch"]
    module = "def test_layer(x):\n    check_equal(x, x)\n    return x[:BATCH]\n"
    rec = inline_candidate(cand, module, tmp_path)
    assert sorted(rec.names) == ["BATCH", "Tensor", "check_equal", "torch"]
    ns: dict = {}
    exec(apply(module, rec), ns)
    import torch

    assert ns["test_layer"](torch.arange(6)).tolist() == [0, 1, 2, 3]


def test_script_style_star_import_and_private_names(tmp_path):
    """Tests import helpers script-style (`from unit.simple_model import *`, no package): found relative to
    the file; a `_private` name is not exported by `import *` and stays unresolved."""
    from mgbench.scrapers.harness.make.inline import inline_candidate
    from tests.harness.helpers import _candidate

    (tmp_path / "tests" / "unit").mkdir(parents=True)
    (tmp_path / "tests" / "unit" / "simple_model.py").write_text("import torch\n\nSCALE = 3\n_HIDDEN = 1\n")
    (tmp_path / "tests" / "unit" / "test_it.py").write_text("from unit.simple_model import *\n")
    cand = _candidate("test_it")
    cand["provenance"]["path"] = "tests/unit/test_it.py"
    cand["unresolved"] = ["SCALE", "_HIDDEN"]
    rec = inline_candidate(cand, "def test_it(x):\n    return x * SCALE + _HIDDEN\n", tmp_path)
    assert rec.names == ["SCALE"] and rec.spans[0]["path"] == "tests/unit/simple_model.py"


def test_class_level_statements_keep_the_methods_they_name():
    """`loss_scale = property(_get_loss_scale, _set_loss_scale)` in a class body: extracting any method of
    the class keeps the two accessors (they were pruned and left unresolved, a NameError at class creation)."""
    from mgbench.scrapers.extract import ExtractConfig, extract_source

    src = textwrap.dedent("""
        import torch
        import torch.distributed as dist

        class Optim:
            def __init__(self):
                self.scale = 1.0

            def _get_loss_scale(self):
                return self.scale

            def _set_loss_scale(self, v):
                self.scale = v

            loss_scale = property(_get_loss_scale, _set_loss_scale)

            def unrelated(self):
                return 0

            def reduce(self, x):
                dist.all_reduce(x)
                return x
    """)
    units = extract_source(src.encode(), "pkg/optim.py", ExtractConfig()).units
    (u,) = [u for u in units if u.qualname == "Optim.reduce"]
    assert "def _get_loss_scale" in u.module_source and "def _set_loss_scale" in u.module_source
    assert "def unrelated" not in u.module_source and not u.unresolved and u.compiles


def _inline_double(root, ops: str):
    """Inline record of an entry calling `pkg.ops.double`, whose module text is `ops`, in a fake checkout."""
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "ops.py").write_text(ops)
    text = "import torch\nfrom pkg.ops import double\n\n\ndef entry(x):\n    return double(x)\n"
    cand, _ = entry_candidate(text, "entry", params=["x"])
    cand["provenance"]["path"] = "pkg/entry.py"
    return inline_candidate(cand, text, root)


def test_helper_annotated_with_a_third_party_type_is_inlined(tmp_path):
    rec = _inline_double(
        tmp_path,
        "from typing import Optional\nimport torch\nimport fancy_lib\n\n\n"
        "def double(x: torch.Tensor, cfg: Optional[fancy_lib.Config] = None) -> torch.Tensor:\n"
        "    return x * 2\n",
    )
    assert rec.names == ["double"], rec.skipped  # before: "fancy_lib (unavailable) used at definition time"


def test_multiline_annotation_with_a_third_party_type_still_blocks_inlining(tmp_path):
    rec = _inline_double(
        tmp_path,
        "from typing import Optional, Tuple\nimport fancy_lib\n\n\n"
        "def double(x) -> Tuple[\n    Optional[fancy_lib.Config], int\n]:\n    return x * 2\n",
    )
    assert rec.names == [] and "fancy_lib" in rec.skipped["pkg.ops.double"]
