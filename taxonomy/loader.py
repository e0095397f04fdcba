"""Read the taxonomy YAML files and validate every entry, failing with one-line errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from mgbench import dtypes
from mgbench.taxonomy.compose import load_compositions, mesh_layout
from mgbench.taxonomy.model import (
    AUDIT_VERDICTS,
    CORE_SUITE,
    Dim,
    Family,
    Peer,
    PeerAudit,
    PlanAxis,
    Realization,
    Taxonomy,
    TaxonomyError,
    Tradeoff,
    Variant,
    Workload,
)

TAXONOMY_DIR = Path(__file__).resolve().parent
TEMPLATES_DIR = TAXONOMY_DIR.parent / "templates" / "families"
DTYPES = dtypes.NAMES  # the task dtypes (mgbench.dtypes)
SIZE_CLASSES_REQUIRED = ("smoke", "full")
FAMILY_KEYS = {
    "id",
    "level",
    "template",
    "workload",
    "plan",
    "realization",
    "dtypes",
    "world_sizes",
    "sizes",
    "variants",
    "scales",
    "divisible",
    "shapes",
    "description",
    "params",
    "forbid_collectives",
    "peers",
    "models",
    "tradeoffs",
    "suite",
}
VARIANT_META_KEYS = ("peers", "description", "suite")  # variant keys that are metadata, not template params
REQUIRED_FAMILY_KEYS = ("id", "level", "template", "workload", "realization", "dtypes", "sizes", "description")


def _read_yaml(path: Path, top_key: str) -> list[dict[str, Any]]:
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise TaxonomyError(f"{path}:{where}: not valid YAML ({getattr(e, 'problem', e)})") from None
    if not isinstance(data, dict) or not isinstance(data.get(top_key), list):
        raise TaxonomyError(f"{path}: expected a mapping with a list under '{top_key}'")
    for i, entry in enumerate(data[top_key]):
        if not isinstance(entry, dict):
            raise TaxonomyError(f"{path}: entry #{i + 1}: expected a mapping, got {type(entry).__name__}")
    return data[top_key]


def _check_type(path: Path, eid: str, key: str, value: Any, typ: type | tuple[type, ...]) -> None:
    if not isinstance(value, typ) or (isinstance(value, bool) and typ is int):
        want = typ.__name__ if isinstance(typ, type) else "/".join(t.__name__ for t in typ)
        raise TaxonomyError(f"{path}: entry '{eid}': '{key}' must be {want}, got {type(value).__name__} {value!r}")


def _check_size_values(path: Path, eid: str, where: str, classes: dict[str, Any]) -> None:
    """Every size of every class is an int or a list of ints (a shape, e.g. a tile [t, h, w]); a
    quoted "4096" is a string: the entry says so, not a TypeError in the generator."""
    for cls, vals in classes.items():
        _check_type(path, eid, f"{where}.{cls}", vals, dict)
        for key, val in vals.items():
            if isinstance(val, list) and val:
                for i, dim in enumerate(val):
                    _check_type(path, eid, f"{where}.{cls}.{key}[{i}]", dim, int)
            else:
                _check_type(path, eid, f"{where}.{cls}.{key}", val, int)


# The keys an entry of dims/workloads/realizations/tradeoffs.yaml may have (a stray key is a YAML slip, e.g.
# an unquoted comma in a flow mapping: `{name: a (b, c)}` makes the key 'c)').
SIMPLE_KEYS = {
    "dims": {"id", "name", "mesh"},
    "workloads": {"id", "name"},
    "realizations": {"id", "name"},
    "tradeoffs": {"id", "name", "meaning"},
}


def _simple(path: Path, top: str, cls: type) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, e in enumerate(_read_yaml(path, top)):
        eid = e.get("id", f"#{i + 1}")
        _check_type(path, str(eid), "id", e.get("id"), str)
        if eid in out:
            raise TaxonomyError(f"{path}: entry '{eid}': duplicate id")
        if unknown := sorted(set(e) - SIMPLE_KEYS.get(top, set(e))):
            raise TaxonomyError(
                f"{path}: entry '{eid}': unknown key {unknown[0]!r} (known: "
                f"{', '.join(sorted(SIMPLE_KEYS[top]))}; quote a name holding a comma)"
            )
        if cls is Dim:
            mesh = e.get("mesh", {})
            _check_type(path, eid, "mesh", mesh, dict)
            bad = set(mesh) - {"min_size", "max_size", "power_of_two"}
            if bad:
                raise TaxonomyError(f"{path}: entry '{eid}': unknown mesh constraint {sorted(bad)[0]!r}")
            for k in ("min_size", "max_size"):
                if mesh.get(k) is not None:
                    _check_type(path, eid, f"mesh.{k}", mesh[k], int)
                    if mesh[k] < 1:
                        raise TaxonomyError(f"{path}: entry '{eid}': mesh.{k} must be >= 1")
            out[eid] = Dim(
                eid,
                str(e.get("name", eid)),
                mesh.get("min_size", 1),
                mesh.get("max_size"),
                bool(mesh.get("power_of_two", False)),
            )
        elif cls is Tradeoff:
            meaning = " ".join(str(e.get("meaning") or "").split())
            if not meaning:
                raise TaxonomyError(f"{path}: entry '{eid}': a trade-off needs a one-line 'meaning'")
            out[eid] = Tradeoff(eid, str(e.get("name", eid)), meaning)
        else:
            out[eid] = cls(eid, str(e.get("name", eid)))
    return out


def _tradeoff_defaults(path: Path, raw: Any, tax: Taxonomy) -> dict[str, list[str]]:
    """`by_realization` of tradeoffs.yaml: the trade-offs of a level-4 task per realization it uses."""
    if not isinstance(raw, dict):
        raise TaxonomyError(f"{path}: expected a mapping 'by_realization' (realization id -> trade-off ids)")
    for rid, tags in raw.items():
        if rid not in tax.realizations:
            raise TaxonomyError(f"{path}: entry 'by_realization.{rid}': unknown realization {rid!r}")
        _check_tradeoffs(path, f"by_realization.{rid}", tags, tax)
    if lacking := [r for r in tax.realizations if r not in raw]:
        raise TaxonomyError(f"{path}: entry 'by_realization': realization {lacking[0]!r} has no default trade-offs")
    return {r: list(t) for r, t in raw.items()}


def _check_tradeoffs(path: Path, eid: str, tags: Any, tax: Taxonomy) -> list[str]:
    """A non-empty list of distinct ids of the trade-off vocabulary (taxonomy/tradeoffs.yaml)."""
    known = ", ".join(tax.tradeoffs)
    if tags is None or tags == []:
        raise TaxonomyError(
            f"{path}: entry '{eid}': no trade-off tags: add 'tradeoffs: [...]' with what a fast solution "
            f"must get right (known: {known})"
        )
    _check_type(path, eid, "tradeoffs", tags, list)
    for t in tags:
        if t not in tax.tradeoffs:
            raise TaxonomyError(
                f"{path}: entry '{eid}': unknown trade-off {t!r} (known: {known}; taxonomy/tradeoffs.yaml)"
            )
    if len(set(tags)) != len(tags):
        raise TaxonomyError(f"{path}: entry '{eid}': a trade-off appears twice in 'tradeoffs'")
    return list(tags)


def _plan(path: Path, eid: str, raw: Any, dims: dict[str, Dim]) -> list[PlanAxis]:
    _check_type(path, eid, "plan", raw, list)
    axes = []
    for ax in raw:
        if isinstance(ax, str):
            ax = {"dim": ax}
        _check_type(path, eid, "plan[]", ax, dict)
        dim, size = ax.get("dim"), ax.get("size", "world")
        if dim not in dims:
            raise TaxonomyError(f"{path}: entry '{eid}': unknown dimension {dim!r} (known: {', '.join(sorted(dims))})")
        if not (isinstance(size, int) and not isinstance(size, bool) and size >= 1) and size not in ("world", "rest"):
            raise TaxonomyError(
                f"{path}: entry '{eid}': bad mesh size {size!r} for dim {dim} (an int >= 1, 'world' or 'rest')"
            )
        if isinstance(size, int) and (why := dims[dim].admits(size)):
            raise TaxonomyError(f"{path}: entry '{eid}': bad mesh constraint: {why}")
        axes.append(PlanAxis(dim, size))
    if len({a.dim for a in axes}) != len(axes):
        raise TaxonomyError(f"{path}: entry '{eid}': a dimension appears twice in the plan")
    if sum(1 for a in axes if a.size == "rest") > 1:
        raise TaxonomyError(f"{path}: entry '{eid}': at most one plan axis may take 'rest'")
    if len({a.size == "world" for a in axes}) > 1:
        raise TaxonomyError(
            f"{path}: entry '{eid}': bad mesh constraint: size 'world' (dims sharing one "
            "axis) cannot be mixed with fixed or 'rest' axes (separate mesh axes)"
        )
    return axes


def _family(path: Path, e: dict[str, Any], tax: Taxonomy, templates_dir: Path) -> Family:
    eid = e.get("id")
    _check_type(path, f"#{eid}", "id", eid, str)
    unknown = set(e) - FAMILY_KEYS
    if unknown:
        raise TaxonomyError(f"{path}: entry '{eid}': unknown key {sorted(unknown)[0]!r}")
    for k in REQUIRED_FAMILY_KEYS:
        if k not in e:
            raise TaxonomyError(f"{path}: entry '{eid}': missing required key '{k}'")
    _check_type(path, eid, "level", e["level"], int)
    if e["level"] not in (1, 2, 3, 4):
        raise TaxonomyError(f"{path}: entry '{eid}': level must be 1..4, got {e['level']}")
    _check_type(path, eid, "template", e["template"], str)
    if not (templates_dir / e["template"]).is_file():
        raise TaxonomyError(f"{path}: entry '{eid}': missing template {e['template']!r} (looked in {templates_dir})")
    if e["workload"] not in tax.workloads:
        raise TaxonomyError(f"{path}: entry '{eid}': unknown workload {e['workload']!r}")
    real = e["realization"]
    _check_type(path, eid, "realization", real, list)
    for r in real:
        if r not in tax.realizations:
            raise TaxonomyError(f"{path}: entry '{eid}': unknown realization {r!r}")
    _check_type(path, eid, "dtypes", e["dtypes"], list)
    for d in e["dtypes"]:
        if d not in DTYPES:
            raise TaxonomyError(f"{path}: entry '{eid}': unknown dtype {d!r} (known: {', '.join(DTYPES)})")
    ws = e.get("world_sizes", [2, 4, 8])
    _check_type(path, eid, "world_sizes", ws, list)
    for w in ws:
        _check_type(path, eid, "world_sizes[]", w, int)
    sizes = e["sizes"]
    _check_type(path, eid, "sizes", sizes, dict)
    for cls in SIZE_CLASSES_REQUIRED:
        if cls not in sizes:
            raise TaxonomyError(f"{path}: entry '{eid}': sizes lacks the '{cls}' class")
    for cls, val in sizes.items():
        _check_type(path, eid, f"sizes.{cls}", val, dict)
    _check_size_values(path, eid, "sizes", sizes)
    variants = []
    for v in e.get("variants", [{"id": "base"}]):
        _check_type(path, eid, "variants[]", v, dict)
        _check_type(path, eid, "variants[].id", v.get("id"), str)
        vid = f"{eid}/{v['id']}"
        _check_type(path, vid, "description", v.get("description", ""), str)
        variants.append(
            Variant(
                v["id"],
                {k: x for k, x in v.items() if k != "id" and k not in VARIANT_META_KEYS},
                peers=_peer_claims(path, vid, v.get("peers", {}), tax),
                description=" ".join(str(v.get("description", "")).split()),
                suite=_suite(path, vid, v["suite"], tax) if "suite" in v else "",
            )
        )
    if len({v.id for v in variants}) != len(variants):
        raise TaxonomyError(f"{path}: entry '{eid}': duplicate variant id")
    scales = e.get("scales", {})
    _check_type(path, eid, "scales", scales, dict)
    for name, sc in scales.items():
        _check_type(path, eid, f"scales.{name}", sc, dict)
        _check_size_values(path, eid, f"scales.{name}", sc)
    for v in variants:
        _check_type(path, f"{eid}/{v.id}", "sizes", v.params.get("sizes", {}), dict)
        _check_size_values(path, f"{eid}/{v.id}", "sizes", v.params.get("sizes", {}))
    divisible = e.get("divisible", {})
    _check_type(path, eid, "divisible", divisible, dict)
    plan = _plan(path, eid, e.get("plan", []), tax.dims)
    try:
        layout = mesh_layout(plan, tax.compositions)
    except ValueError as err:
        raise TaxonomyError(f"{path}: entry '{eid}': {err}") from None
    plan_dims = {a.dim for a in plan}
    for key in divisible:
        if lacking := [cls for cls, vals in sizes.items() if key not in vals]:
            raise TaxonomyError(
                f"{path}: entry '{eid}': divisible names size '{key}', which "
                f"sizes.{lacking[0]} lacks (sizes: {', '.join(sorted(sizes[lacking[0]]))})"
            )
    for key, by in divisible.items():
        ok = (
            isinstance(by, int)
            or by == "world"
            or (isinstance(by, str) and by in plan_dims)
            or (isinstance(by, list) and by and all(isinstance(d, str) and d in plan_dims for d in by))
        )
        if not ok:
            raise TaxonomyError(
                f"{path}: entry '{eid}': bad mesh constraint: divisible.{key} must be an int, "
                f"'world', a dim of the plan or a list of plan dims (their product), got {by!r}"
            )
    shapes = _shapes_rule(path, eid, e.get("shapes", {}), sizes, scales, variants)
    tradeoffs = _check_tradeoffs(path, eid, e.get("tradeoffs"), tax)
    suite = _suite(path, eid, e.get("suite", CORE_SUITE), tax)
    family_claims = _peer_claims(path, eid, e.get("peers", {}), tax)
    for v in variants:
        s = v.suite or suite
        if s != CORE_SUITE and not (family_claims.get(s) or v.peers.get(s)):
            raise TaxonomyError(
                f"{path}: entry '{eid}/{v.id}': suite {s!r} reproduces that peer's problems: claim one "
                f"with `peers: {{{s}: [N]}}`"
            )
    models = e.get("models", [])
    _check_type(path, eid, "models", models, list)
    for m in models:
        if not (isinstance(m, dict) and set(m) == {"project", "file"} and all(isinstance(x, str) for x in m.values())):
            raise TaxonomyError(
                f"{path}: entry '{eid}': each of 'models' must be {{project: str, file: str}}, got {m!r}"
            )
    return Family(
        id=eid,
        level=e["level"],
        template=e["template"],
        workload=e["workload"],
        plan=plan,
        realization=list(real),
        dtypes=list(e["dtypes"]),
        world_sizes=list(ws),
        sizes=sizes,
        variants=variants,
        scales=scales,
        divisible=divisible,
        shapes=shapes,
        description=str(e["description"]).strip(),
        source_file=str(path),
        params=dict(e.get("params", {})),
        forbid_collectives=bool(e.get("forbid_collectives")),
        layout=layout,
        peers=family_claims,
        models=list(models),
        tradeoffs=tradeoffs,
        suite=suite,
    )


def _suite(path: Path, eid: str, raw: Any, tax: Taxonomy) -> str:
    """`suite:` of a family or variant: CORE_SUITE or a peer id (taxonomy/peers/<id>.yaml)."""
    _check_type(path, eid, "suite", raw, str)
    if raw != CORE_SUITE and raw not in tax.peers:
        known = ", ".join([CORE_SUITE, *sorted(tax.peers)])
        raise TaxonomyError(f"{path}: entry '{eid}': unknown suite {raw!r} (known: {known})")
    return raw


SHAPES_KEYS = ("fixed", "step")


def _shapes_rule(path: Path, eid: str, raw: Any, sizes: dict, scales: dict, variants: list[Variant]) -> dict[str, Any]:
    """`shapes: {fixed: [name, ...], step: {name: k}}`: the size parameters a held-out shape may not move, and
    the coarser steps of those it may (validation/eval/shapes.py); every name a size parameter of the family
    (of its sizes, scales or variant sizes), every step an int >= 1."""
    _check_type(path, eid, "shapes", raw, dict)
    if unknown := sorted(set(raw) - set(SHAPES_KEYS)):
        raise TaxonomyError(f"{path}: entry '{eid}': unknown key 'shapes.{unknown[0]}' (known: fixed, step)")
    known = {k for cls in sizes.values() for k in cls}
    known |= {k for sc in scales.values() for cls in sc.values() for k in cls}
    known |= {k for v in variants for cls in v.params.get("sizes", {}).values() for k in cls}
    fixed, step = raw.get("fixed", []), raw.get("step", {})
    _check_type(path, eid, "shapes.fixed", fixed, list)
    _check_type(path, eid, "shapes.step", step, dict)
    for name in [*fixed, *step]:
        _check_type(path, eid, "shapes names", name, str)
        if name not in known:
            raise TaxonomyError(
                f"{path}: entry '{eid}': shapes names {name!r}, which is not a size parameter of the family "
                f"(sizes: {', '.join(sorted(known))})"
            )
    for name, k in step.items():
        _check_type(path, eid, f"shapes.step.{name}", k, int)
        if k < 1:
            raise TaxonomyError(f"{path}: entry '{eid}': shapes.step.{name} must be a positive int, got {k}")
    rule: dict[str, Any] = {}
    if fixed:
        rule["fixed"] = list(fixed)
    if step:
        rule["step"] = dict(step)
    return rule


def _peer_claims(path: Path, eid: str, raw: Any, tax: Taxonomy) -> dict[str, list[int]]:
    """`peers: {pkb: [13, 46]}` of a family or variant: known peers, problems that peer has."""
    _check_type(path, eid, "peers", raw, dict)
    claims: dict[str, list[int]] = {}
    for peer_id, problems in raw.items():
        if peer_id not in tax.peers:
            raise TaxonomyError(
                f"{path}: entry '{eid}': unknown peer {peer_id!r} (known: {', '.join(sorted(tax.peers)) or 'none'})"
            )
        _check_type(path, eid, f"peers.{peer_id}", problems, list)
        for n in problems:
            _check_type(path, eid, f"peers.{peer_id}[]", n, int)
            if n not in tax.peers[peer_id].problems:
                raise TaxonomyError(f"{path}: entry '{eid}': {peer_id} has no problem {n}")
        claims[peer_id] = sorted(problems)
    return claims


def _peers(root: Path) -> dict[str, Peer]:
    """The peer benchmarks of taxonomy/peers/*.yaml: {peer: {id, name, source}, problems: [{n, name}]}."""
    peers: dict[str, Peer] = {}
    for path in sorted((root / "peers").glob("*.yaml")):
        head = (yaml.safe_load(path.read_text()) or {}).get("peer")
        if not isinstance(head, dict) or not isinstance(head.get("id"), str):
            raise TaxonomyError(f"{path}: expected a 'peer' mapping with an id, name and source")
        problems: dict[int, str] = {}
        audit: dict[int, PeerAudit] = {}
        for i, p in enumerate(_read_yaml(path, "problems")):
            n = p.get("n")
            _check_type(path, f"#{i + 1}", "n", n, int)
            if n in problems:
                raise TaxonomyError(f"{path}: entry '#{i + 1}': duplicate problem {n}")
            problems[n] = str(p.get("name", n))
            if "audit" in p:
                audit[n] = _peer_audit(path, n, p)
        peers[head["id"]] = Peer(
            head["id"],
            str(head.get("name", head["id"])),
            str(head.get("source", "")),
            problems,
            str(head.get("audited", "")),
            audit,
        )
    return peers


def _peer_audit(path: Path, n: int, p: dict[str, Any]) -> PeerAudit:
    """A problem's `audit: full|partial|none` and `differs` (required unless full)."""
    verdict, differs = p["audit"], p.get("differs", "")
    if verdict not in AUDIT_VERDICTS:
        raise TaxonomyError(f"{path}: problem {n}: audit {verdict!r} is not one of {', '.join(AUDIT_VERDICTS)}")
    if verdict != "full" and not (isinstance(differs, str) and differs.strip()):
        raise TaxonomyError(f"{path}: problem {n}: audit {verdict} needs `differs`: what differs from the peer")
    return PeerAudit(verdict, str(differs))


def tradeoff_vocabulary(root: Path | str | None = None) -> dict[str, Tradeoff]:
    """The trade-off vocabulary alone (taxonomy/tradeoffs.yaml, in file order), for readers that need
    the names and meanings without loading the families (the dataset card)."""
    return _simple((Path(root) if root else TAXONOMY_DIR) / "tradeoffs.yaml", "tradeoffs", Tradeoff)


def load_taxonomy(root: Path | str | None = None, templates_dir: Path | str | None = None) -> Taxonomy:
    """Load dims, workloads, realizations and every families/*.yaml under `root`.

    Family templates are looked up in `templates_dir` (default: templates/families)."""
    root = Path(root) if root else TAXONOMY_DIR
    templates_dir = Path(templates_dir) if templates_dir else TEMPLATES_DIR
    tax = Taxonomy(
        dims=_simple(root / "dims.yaml", "dims", Dim),
        workloads=_simple(root / "workloads.yaml", "workloads", Workload),
        realizations=_simple(root / "realizations.yaml", "realizations", Realization),
        families={},
        peers=_peers(root),
    )
    trade_path = root / "tradeoffs.yaml"
    if not trade_path.is_file():
        raise TaxonomyError(f"{trade_path}: missing (the trade-off vocabulary every family is tagged from)")
    tax.tradeoffs = _simple(trade_path, "tradeoffs", Tradeoff)
    tax.tradeoff_defaults = _tradeoff_defaults(
        trade_path, (yaml.safe_load(trade_path.read_text()) or {}).get("by_realization"), tax
    )
    comp_path = root / "compositions.yaml"
    if not comp_path.is_file():
        raise TaxonomyError(f"{comp_path}: missing (the composition rules of the taxonomy)")
    tax.compositions = load_compositions(comp_path, tax.dims, _read_yaml(comp_path, "compositions"))
    for path in sorted((root / "families").glob("*.yaml")):
        for e in _read_yaml(path, "families"):
            fam = _family(path, e, tax, templates_dir)
            if fam.id in tax.families:
                raise TaxonomyError(
                    f"{path}: entry '{fam.id}': duplicate id (also in {tax.families[fam.id].source_file})"
                )
            tax.families[fam.id] = fam
    return tax
