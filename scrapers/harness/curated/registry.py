"""The curated input registry: one reviewed entry per mined level-4 problem.

An entry names a mined function (repository, qualified name, path glob), a verdict (`ship`: worth
solving; `skip`: not, with why), and the inputs a production caller passes it, sized from a named
model configuration (configs.yaml). Its arguments are harness spec arguments (scrapers/harness/make/specs.py
SCHEMA) whose shape and integer expressions may use the configuration's dimension names besides
`n`, `ws`, `rank`; loading substitutes the numbers, so the task runtime sees plain expressions of n, ws
and rank. `n` is the scaled size (tokens per rank, say): 8 at smoke size, `full_n` at full size.

Files: configs.yaml (the configurations) and entries/<owner>+<name>.yaml, one per repository:

    repo: NVIDIA/Megatron-LM
    entries:
      - qualname: _VocabParallelCrossEntropy
        path: megatron/core/tensor_parallel/cross_entropy.py   # optional glob, default any path
        verdict: ship
        why: vocab-parallel cross-entropy: max, sum-exp and target-logit all-reduces
        config: llama3-8b
        full_n: 4096
        args:
          vocab_parallel_logits: {kind: tensor, shape: [n, vocab//ws], dtype: bfloat16}
          target: {kind: tensor, shape: [n], dtype: int64, high: vocab, replicated: true}

A bad file or entry raises RegistryError with one line naming the file, the entry and the reason."""

from __future__ import annotations

import fnmatch
import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from mgbench.scrapers.harness.curated.exprs import ExprError, check_values, substitute
from mgbench.scrapers.harness.make.render import SMOKE_N
from mgbench.scrapers.harness.make.specs import problems

HERE = Path(__file__).parent
CONFIGS = HERE / "configs.yaml"
ENTRIES = HERE / "entries"
VERDICTS = ("ship", "skip")
ENTRY_KEYS = frozenset({"qualname", "path", "verdict", "why", "config", "full_n", "dims", "args", "attrs"})
EXPR_KEYS = ("expr", "high", "count", "fill")  # argument keys holding one integer expression (shape: a list)
CHECK_WORLD_SIZES = (2, 4, 8)


class RegistryError(ValueError):
    """A registry file or entry that cannot be used: the message names the file, the entry and why."""


@dataclass(frozen=True)
class Config:
    """A production model configuration: dimension name -> size, and where the numbers come from."""

    name: str
    dims: dict[str, int]
    source: str


@dataclass
class Entry:
    """One reviewed mined problem: which candidates it matches, the verdict, and the resolved inputs."""

    repo: str
    qualname: str
    path: str
    verdict: str
    why: str
    file: str
    config: str = ""
    full_n: int = 0
    args: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> spec argument (plain expressions)
    attrs: dict[str, dict[str, Any]] = field(default_factory=dict)  # object state the method reads

    @property
    def id(self) -> str:
        return f"{self.repo}:{self.qualname}" + ("" if self.path == "*" else f"@{self.path}")

    def matches(self, cand: dict[str, Any]) -> bool:
        prov = cand.get("provenance") or {}
        return (
            prov.get("repo") == self.repo
            and cand.get("qualname") == self.qualname
            and fnmatch.fnmatchcase(prov.get("path", ""), self.path)
        )

    def pinned(self) -> dict[str, Any]:
        """What the harness pins for a matched candidate (JSON, kept on the candidate as `curated`)."""
        return {"id": self.id, "args": self.args, "attrs": self.attrs, "full_n": self.full_n}


@dataclass
class Registry:
    configs: dict[str, Config]
    entries: list[Entry]

    def match(self, cand: dict[str, Any]) -> Entry | None:
        """The entry for a candidate; the most specific path wins (an exact path before a glob)."""
        hits = [e for e in self.entries if e.matches(cand)]
        return max(hits, key=lambda e: (e.path != "*", -e.path.count("*"), len(e.path)), default=None)

    def by_id(self) -> dict[str, Entry]:
        return {e.id: e for e in self.entries}


def _read_yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise RegistryError(f"{path}: cannot be read as YAML: {str(e).splitlines()[0]}") from None


def load_configs(path: Path = CONFIGS) -> dict[str, Config]:
    raw = _read_yaml(path) or {}
    if not isinstance(raw, dict):
        raise RegistryError(f"{path}: expected a mapping of configuration names")
    out = {}
    for name, body in raw.items():
        dims = (body or {}).get("dims") if isinstance(body, dict) else None
        if not isinstance(dims, dict) or not all(isinstance(v, int) and v > 0 for v in dims.values()):
            raise RegistryError(f"{path}: configuration {name!r}: `dims` must map names to positive integers")
        if not (body.get("source") or "").strip():
            raise RegistryError(f"{path}: configuration {name!r}: `source` (where the numbers come from) is missing")
        out[name] = Config(name, dict(dims), body["source"])
    return out


def _resolve_arg(a: dict[str, Any], names: dict[str, int]) -> dict[str, Any]:
    """One argument with its expressions' dimension names replaced by numbers (fields too)."""
    out = dict(a)
    if "shape" in out:
        if not isinstance(out["shape"], list):
            raise ExprError(f"shape must be a list, got {out['shape']!r}")
        out["shape"] = [substitute(d, names) for d in out["shape"]]
    for k in EXPR_KEYS:
        if k in out and not (k == "count" and out.get("kind") == "module"):
            out[k] = substitute(out[k], names)
    if "fields" in out:
        out["fields"] = [_resolve_arg(f, names) for f in out["fields"]]
    return out


def _check_arg(a: dict[str, Any], full_n: int) -> None:
    """Every size (shape, high, count) is >= 1 and every integer evaluates, at both sizes and world sizes 2-8."""
    sizes = list(a.get("shape", [])) + [a[k] for k in ("high", "count") if isinstance(a.get(k), str)]
    for e in sizes:
        check_values(e, (SMOKE_N, full_n), CHECK_WORLD_SIZES, positive=True)
    for k in ("expr", "fill"):  # an int or a fill value may be 0 or negative (a dim, a rank)
        if isinstance(a.get(k), str):
            check_values(a[k], (SMOKE_N, full_n), CHECK_WORLD_SIZES, positive=False)
    for f in a.get("fields", []):
        _check_arg(f, full_n)


def _arguments(raw: Any, names: dict[str, int], full_n: int, what: str) -> dict[str, dict[str, Any]]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ExprError(f"`{what}` must map parameter names to arguments")
    out = {}
    for name, a in raw.items():
        if not isinstance(a, dict) or "kind" not in a:
            raise ExprError(f"{what} {name!r}: an argument is a mapping with a `kind`")
        arg = {"name": str(name), **_resolve_arg(a, names)}
        bad = problems(arg)
        if bad:
            raise ExprError(f"{what} {name!r}: {'; '.join(bad)}")
        try:
            _check_arg(arg, full_n)
        except ExprError as e:
            raise ExprError(f"{what} {name!r}: {e}") from None
        out[str(name)] = arg
    return out


def _entry(raw: Any, repo: str, file: Path, configs: dict[str, Config]) -> Entry:
    if not isinstance(raw, dict) or not raw.get("qualname"):
        raise ExprError("an entry is a mapping with a `qualname`")
    unknown = set(raw) - ENTRY_KEYS
    if unknown:
        raise ExprError(f"unknown keys {sorted(unknown)} (allowed: {sorted(ENTRY_KEYS)})")
    verdict = raw.get("verdict")
    if verdict not in VERDICTS:
        raise ExprError(f"verdict must be one of {VERDICTS}, got {verdict!r}")
    if not str(raw.get("why") or "").strip():
        raise ExprError("`why` (what it computes, or why it is not worth solving) is missing")
    entry = Entry(repo, str(raw["qualname"]), str(raw.get("path") or "*"), verdict, str(raw["why"]).strip(), file.name)
    if verdict == "skip":
        return entry
    config = raw.get("config")
    if config not in configs:
        raise ExprError(f"config {config!r} is not in configs.yaml ({', '.join(sorted(configs))})")
    full_n = raw.get("full_n")
    if not isinstance(full_n, int) or full_n < SMOKE_N:
        raise ExprError(f"full_n (n at size full) must be an integer >= {SMOKE_N}, got {full_n!r}")
    dims = raw.get("dims") or {}
    if not isinstance(dims, dict) or not all(isinstance(v, int) and v > 0 for v in dims.values()):
        raise ExprError("`dims` must map names to positive integers")
    names = {**configs[config].dims, **dims}
    entry.config, entry.full_n = config, full_n
    entry.args = _arguments(raw.get("args"), names, full_n, "argument")
    entry.attrs = _arguments(raw.get("attrs"), names, full_n, "attribute")
    if not entry.args and not entry.attrs:
        raise ExprError("a `ship` entry gives the inputs: `args` and/or `attrs`")
    return entry


def load_file(path: Path, configs: dict[str, Config]) -> list[Entry]:
    raw = _read_yaml(path)
    if not isinstance(raw, dict) or not isinstance(raw.get("repo"), str) or not isinstance(raw.get("entries"), list):
        raise RegistryError(f"{path}: expected `repo: owner/name` and an `entries:` list")
    out = []
    for i, e in enumerate(raw["entries"]):
        label = f"entry {i}" + (f" ({e.get('qualname')})" if isinstance(e, dict) and e.get("qualname") else "")
        try:
            out.append(_entry(e, raw["repo"], path, configs))
        except ExprError as err:
            raise RegistryError(f"{path}: {label}: {err}") from None
    return out


def load(entries_dir: Path = ENTRIES, configs_path: Path = CONFIGS) -> Registry:
    """Every configuration and entry; an entry listed twice (same repository, qualname and path) is an error."""
    configs = load_configs(configs_path)
    entries = [e for f in sorted(Path(entries_dir).glob("*.yaml")) for e in load_file(f, configs)]
    seen: dict[str, str] = {}
    for e in entries:
        if e.id in seen:
            raise RegistryError(f"{entries_dir}/{e.file}: {e.id} is listed twice (also in {seen[e.id]})")
        seen[e.id] = e.file
    return Registry(configs, entries)


@functools.cache
def default() -> Registry:
    """The registry shipped with mgbench (loaded once per process)."""
    return load()
