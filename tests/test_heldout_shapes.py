"""Held-out shapes (validation/eval/shapes.py): the shape space a size class derives from the published
classes, the taxonomy's per-family `shapes` rule that narrows it, and every templated family's reference
staying correct at a drawn shape (a solution must not be able to hard-code the published sizes)."""

from __future__ import annotations

import contextlib
import io
import itertools
import math
import random
import time
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from taxonomy_copy import copy_taxonomy

from mgbench.taxonomy import TaxonomyError, load_taxonomy
from mgbench.validation.eval.shapes import HELDOUT_SIZE, SIZE_CAP, SMOKE_SPAN, describe, draw, space_of

NAMES = ("m", "n", "k", "heads", "dim")


@st.composite
def classes(draw_):
    """Published size classes {smoke, full} of up to five integer parameters (each a common granule times
    a factor, full at least smoke), a rule pinning some and stepping others, and a random seed."""
    names = draw_(st.lists(st.sampled_from(NAMES), min_size=1, max_size=5, unique=True))
    smoke, full = {}, {}
    for name in names:
        g = draw_(st.sampled_from([1, 2, 3, 4, 8, 16, 64]))
        a = draw_(st.integers(1, 12))
        smoke[name], full[name] = g * a, g * a * draw_(st.integers(1, 16))
    smoke["tile"], full["tile"] = [4, 4], [8, 8]  # a list-valued size never moves
    fixed = draw_(st.lists(st.sampled_from(names), unique=True, max_size=2))
    step = draw_(st.dictionaries(st.sampled_from(names), st.integers(1, 4), max_size=2))
    return {"smoke": smoke, "full": full}, {"fixed": fixed, "step": step}, draw_(st.integers(0, 2**32))


@settings(max_examples=200, deadline=None)
@given(case=classes(), size=st.sampled_from(["smoke", "full"]))
def test_a_drawn_shape_stays_in_the_space(case, size):
    sizes, rule, seed = case
    published = sizes[size]
    space = space_of(sizes, size, rule)
    shape = draw(space, random.Random(seed))
    if shape is None:
        assert space.fixed
        return
    assert shape != published and set(shape) == set(published)
    assert describe(shape, published) != "the published shape"
    assert shape["tile"] == published["tile"]
    for name in rule["fixed"]:
        assert shape[name] == published[name], name
    assert space.keeps(shape)  # the order and divisibility relations both published classes show
    for name in set(published) - set(rule["fixed"]) - {"tile"}:
        v, x = published[name], shape[name]
        granule = math.gcd(sizes["smoke"][name], sizes["full"][name])
        step = math.lcm(granule, rule["step"].get(name, 1))
        top = v if size == "full" else SMOKE_SPAN * v
        if v < 2 or step > top:  # nothing to vary: no multiple of the step fits
            assert name not in space.ranges, (name, x, v)
        if name not in space.ranges:  # nothing to vary, or the relations leave it no value
            assert x == v, (name, x, v)
            continue
        assert x % granule == 0 and x % step == 0, (name, x, granule, step)
        assert v // 2 <= x <= top, (name, x, v)


def _size(space, shape):
    """The product over the varied parameters of value / base (the published value, or the smallest value
    when a step lifts that above it)."""
    return math.prod(Fraction(shape[n], max(space.published[n], space.choices(n)[0])) for n in space.ranges)


@settings(max_examples=200, deadline=None)
@given(case=classes())
def test_every_smoke_draw_keeps_the_granule_and_the_size_cap_and_moves(case):
    sizes, rule, seed = case
    space = space_of(sizes, "smoke", rule)
    rng = random.Random(seed)
    for _ in range(5):
        shape = draw(space, rng)
        if shape is None:
            assert space.fixed
            return
        assert shape != sizes["smoke"]
        assert _size(space, shape) <= SIZE_CAP, (shape, sizes["smoke"])
        for name in space.ranges:
            assert shape[name] % space.ranges[name][0] == 0, (name, shape[name], space.ranges[name])
            assert shape[name] <= SMOKE_SPAN * sizes["smoke"][name], (name, shape[name])


@settings(max_examples=50, deadline=None)
@given(case=classes(), size=st.sampled_from(["smoke", "full"]))
def test_a_draw_is_the_same_for_the_same_seed(case, size):
    sizes, rule, seed = case
    space = space_of(sizes, size, rule)
    assert draw(space, random.Random(seed)) == draw(space, random.Random(seed))


def test_a_power_of_two_size_has_many_held_out_values_at_smoke():
    """n smoke 4096, full 2**25: granule 4096. Half to twice the smoke value left one held-out n (8192), so a
    solution hard-coded for {4096, 8192} passed; the smoke space must offer several, and draws reach them."""
    space = space_of({"smoke": {"n": 4096}, "full": {"n": 33554432}}, "smoke")
    held_out = set(space.choices("n")) - {4096}
    assert held_out == {4096 * k for k in range(2, 9)}
    drawn = {draw(space, random.Random(seed))["n"] for seed in range(200)}
    assert len(drawn) >= 4 and drawn <= held_out, sorted(drawn)


@pytest.mark.parametrize(
    "smoke, least",
    [
        ({"m": 64, "n": 128, "k": 32}, 15),  # powers of two: half to twice gave 7 shapes, the cap leaves 15
        ({"m": 48, "n": 80, "k": 24}, 100),
    ],
)
def test_several_parameters_give_many_held_out_shapes_within_the_cap(smoke, least):
    space = space_of({"smoke": smoke, "full": {"m": 4096, "n": 8192, "k": 4096}}, "smoke")
    every = [dict(zip(smoke, c, strict=True)) for c in itertools.product(*(space.choices(n) for n in smoke))]
    admissible = {tuple(s.items()) for s in every if s != smoke and space.keeps(s) and _size(space, s) <= SIZE_CAP}
    drawn = {tuple(draw(space, random.Random(seed)).items()) for seed in range(600)}
    assert drawn <= admissible and len(drawn) >= least, (len(drawn), len(admissible))


@pytest.mark.parametrize("size", ["smoke", "full"])
def test_a_drawn_shape_keeps_the_relations_both_published_classes_show(size):
    """A minimum below a maximum, kv heads dividing heads, a rank below a matrix side: a template may rely
    on them (kv_transfer_paged, varlen_ring_attention, powersgd), and the wide smoke range would break them."""
    sizes = {
        "smoke": {"min_len": 3, "max_len": 17, "heads": 4, "kv_heads": 2, "m": 12, "rank": 2},
        "full": {"min_len": 256, "max_len": 1024, "heads": 32, "kv_heads": 8, "m": 4096, "rank": 4},
    }
    space = space_of(sizes, size)
    for seed in range(300):
        s = draw(space, random.Random(seed))
        assert s["min_len"] < s["max_len"] and s["heads"] % s["kv_heads"] == 0 and s["rank"] < s["m"], s


def test_a_relation_one_class_breaks_is_not_kept():
    sizes = {"smoke": {"a": 3, "b": 17}, "full": {"a": 256, "b": 128}}  # a < b at smoke only
    space = space_of(sizes, "smoke")
    assert not space.relations
    assert any((s := draw(space, random.Random(seed)))["a"] > s["b"] for seed in range(300))


@settings(max_examples=100, deadline=None)
@given(case=classes())
def test_the_full_space_never_exceeds_the_published_shape(case):
    sizes, rule, seed = case
    shape = draw(space_of(sizes, "full", rule), random.Random(seed))
    for name, v in sizes["full"].items():
        assert shape is None or name == "tile" or shape[name] <= v


@pytest.mark.parametrize(
    "sizes, rule",
    [
        ({"smoke": {"n": 1, "tile": [2]}, "full": {"n": 1, "tile": [4]}}, None),  # nothing integer >= 2
        ({"smoke": {"n": 64, "h": 8}, "full": {"n": 4096, "h": 32}}, {"fixed": ["n", "h"]}),
        ({"smoke": {"n": 64}, "full": {"n": 64}}, None),  # full: granule 64, range [64, 64]
    ],
)
def test_a_space_with_nothing_to_vary_draws_none(sizes, rule):
    space = space_of(sizes, "full", rule)
    assert space.fixed and draw(space, random.Random(0)) is None


def test_a_step_coarsens_the_granule():
    space = space_of({"smoke": {"n": 48}, "full": {"n": 96}}, "smoke", {"step": {"n": 32}})
    assert space.choices("n") == [96, 192, 288, 384]  # lcm(48, 32) = 96, within [24, 8 * 48]
    space = space_of({"smoke": {"n": 48}, "full": {"n": 96}}, "full", {"step": {"n": 32}})
    assert space.choices("n") == [96]  # within [48, 96]


# ---- the taxonomy rule ---------------------------------------------------------------------------


def _load_with(tmp_path: Path, rule: str) -> str:
    root = copy_taxonomy(tmp_path, ("collectives.yaml",))
    path = root / "families" / "collectives.yaml"
    old = "    divisible: {n: world}\n"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, old + f"    shapes: {rule}\n", 1))
    return str(root)


@pytest.mark.parametrize(
    "rule, reason",
    [
        ("{fixed: [bogus]}", "shapes names 'bogus', which is not a size parameter of the family (sizes: n)"),
        ("{step: {bogus: 2}}", "shapes names 'bogus', which is not a size parameter of the family"),
        ("{fix: [n]}", "unknown key 'shapes.fix' (known: fixed, step)"),
        ("{step: {n: 0}}", "shapes.step.n must be a positive int, got 0"),
        ("{step: {n: 1.5}}", "'shapes.step.n' must be int, got float"),
        ("{fixed: n}", "'shapes.fixed' must be list, got str"),
        ("{fixed: [[n]]}", "'shapes names' must be str, got list"),
    ],
)
def test_a_bad_shapes_rule_is_one_line_naming_file_and_family(tmp_path, rule, reason):
    root = _load_with(tmp_path, rule)
    with pytest.raises(TaxonomyError) as e:
        load_taxonomy(root)
    msg = str(e.value)
    assert "\n" not in msg and "collectives.yaml" in msg and "entry 'all_reduce'" in msg and reason in msg, msg


def test_the_cli_stops_on_a_bad_rule_with_exit_2(tmp_path):
    from mgbench.cli import main

    root = _load_with(tmp_path, "{fixed: [bogus]}")
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        assert main(["taxonomy", "--taxonomy", root]) == 2
    lines = err.getvalue().strip().splitlines()
    assert len(lines) == 1 and "collectives.yaml" in lines[0] and "'all_reduce'" in lines[0], lines


def test_the_rule_reaches_the_manifest_record(tmp_path):
    from mgbench.generator.spec import expand

    tax = load_taxonomy(_load_with(tmp_path, "{step: {n: 2}}"))
    specs, _ = expand(tax, families=["all_reduce", "all_gather"])
    rules = {s.family: s.to_dict()["shapes"] for s in specs}
    assert rules == {"all_reduce": {"step": {"n": 2}}, "all_gather": {}}


# ---- every family at a held-out shape ------------------------------------------------------------


def _one_task_per_family(out: Path) -> list[dict]:
    """The first task (manifest order) of every templated family of every suite, rendered into `out` with its
    manifest."""
    from mgbench.generator.manifest import record_for
    from mgbench.generator.render import render_module
    from mgbench.generator.spec import expand
    from mgbench.store import load_manifest, write_manifest

    specs, _ = expand(load_taxonomy(), levels=[1, 2, 3], suites=None)  # every suite
    first = {}
    for spec in specs:  # sorted by task id: the manifest order
        first.setdefault(spec.family, spec)
    (out / "tasks").mkdir(parents=True)
    records = []
    for spec in first.values():
        source = render_module(spec)
        rel = f"tasks/{spec.task_id}.py"
        (out / rel).write_text(source)
        records.append(record_for(spec, rel, source).entry())
    write_manifest(out / "manifest.jsonl", records)
    return load_manifest(out)


@pytest.mark.sandboxed
def test_every_family_is_correct_at_a_held_out_shape(tmp_path):
    from mgbench.validation.pool import RankPool
    from mgbench.validation.run import check_task

    t0 = time.monotonic()
    tasks = _one_task_per_family(tmp_path)
    by_ws: dict[int, list] = {}
    for t in tasks:
        ws = 2 if 2 in t["world_sizes"] else min(t["world_sizes"])
        space = space_of(t["sizes"], "smoke", t.get("shapes"))
        shape = draw(space, random.Random(f"0:{t['task_id']}"))
        assert shape is not None, f"{t['task_id']}: no held-out shape (every size pinned): hard-codable"
        by_ws.setdefault(ws, []).append((t, shape))
    failures = []
    for ws, items in sorted(by_ws.items()):
        pool = RankPool(ws, "gloo", pg_timeout_s=120).__enter__()
        try:
            for t, shape in items:
                res = check_task(pool, t, HELDOUT_SIZE, "cpu", 0, 60.0, shape=shape)
                if res.status != "passed":
                    failures.append(f"ws={ws} {t['task_id']} [{describe(shape, t['sizes']['smoke'])}]: {res.reason}")
                    pool.close()
                    pool = RankPool(ws, "gloo", pg_timeout_s=120).__enter__()
        finally:
            pool.close()
    assert not failures, "\n".join(failures)
    print(f"{len(tasks)} families at a held-out shape in {time.monotonic() - t0:.1f} s")
