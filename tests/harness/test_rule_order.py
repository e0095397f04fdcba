"""Which search rules fire, in which order, for real error texts (rule_order_cases.py), and how the
registry's priorities and exclusivity combine proposals."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mgbench.scrapers.harness.inputs.candidate import Candidate
from mgbench.scrapers.harness.inputs.failure import Failure
from mgbench.scrapers.harness.inputs.rules.base import Rule, Trigger
from mgbench.scrapers.harness.inputs.rules.order import RULES, fired, ordered, propose, propose_named
from mgbench.scrapers.harness.inputs.rules.values import _index_dtype
from mgbench.scrapers.harness.make.specs import spec_problems
from tests.harness.rule_order_cases import CASES, FN, cand_of, err, spec_of, t


@pytest.mark.parametrize("case", sorted(CASES))
def test_rules_fire_in_registry_order_for_a_real_error(case):
    spec, error, cand, want = CASES[case]
    assert fired(spec, error, cand) == want
    named = propose_named(spec, Failure.of(error), Candidate.of(cand))
    order = [r.name for r in RULES]
    assert [order.index(n) for n, _ in named] == sorted(order.index(n) for n, _ in named)  # grouped, in order
    assert [s for _, s in named] == propose(spec, error, cand)


def test_every_rule_of_the_table_is_registered_once_with_its_own_priority():
    names = [r.name for r in RULES]
    assert len(names) == len(set(names))
    assert [r.priority for r in RULES] == sorted({r.priority for r in RULES})
    fired_somewhere = {n for s, e, c, want in CASES.values() for n in want}
    assert fired_somewhere <= set(names)
    assert len(fired_somewhere) >= 25  # the table reaches most of the registry


def test_two_rules_with_one_priority_or_one_name_are_refused():
    nothing = lambda spec, f, cand: []  # noqa: E731
    with pytest.raises(ValueError, match="share priority 5"):
        ordered([Rule("a", 5, nothing), Rule("b", 5, nothing)])
    with pytest.raises(ValueError, match="named twice"):
        ordered([Rule("a", 5, nothing), Rule("a", 6, nothing)])


def _toy(exclusive_fires: bool, exclusive_output: list[str]) -> list[Rule]:
    """Three rules tagging the spec: an early one, an exclusive middle one, a late one."""

    def tag(label: str):
        return lambda spec, f, cand: [{**spec, "tag": label}]

    return ordered(
        [
            Rule("late", 30, tag("late")),
            Rule(
                "middle",
                20,
                lambda spec, f, cand: [{**spec, "tag": x} for x in exclusive_output],
                Trigger(words=("boom",) if exclusive_fires else ("never said",)),
                exclusive=True,
            ),
            Rule("early", 10, tag("early")),
        ]
    )


def _run(rules: list[Rule]) -> list[tuple[str, str]]:
    f = Failure.of(err("RuntimeError", "boom"))
    return [(n, s["tag"]) for n, s in propose_named(spec_of(t("x")), f, Candidate.of(cand_of()), rules)]


def test_an_exclusive_rule_appends_after_earlier_rules_and_stops_later_ones():
    assert _run(_toy(True, ["m1", "m2"])) == [("early", "early"), ("middle", "m1"), ("middle", "m2")]


def test_an_exclusive_rule_that_fires_with_nothing_still_stops_later_rules():
    assert _run(_toy(True, [])) == [("early", "early")]


def test_an_exclusive_rule_that_does_not_fire_lets_later_rules_run():
    assert _run(_toy(False, ["m1"])) == [("early", "early"), ("late", "late")]


def test_missing_argument_keeps_an_earlier_rules_proposal_and_skips_the_shape_rules():
    """A RuntimeError would draw the generic shape rule; the exclusive missing-argument rule stops it, after
    the earlier rule that made the complaining callable a no-op."""
    spec = spec_of(t("x"), FN)
    e = err("RuntimeError", "gelu() missing 1 required positional argument: 'input'", "y = act()")
    named = propose_named(spec, Failure.of(e), Candidate.of(cand_of(params=["x", "act"])))
    assert [n for n, _ in named] == ["wrong_call", "missing_argument"]
    assert named[0][1]["args"][1] == {"name": "act", "kind": "fn", "value": "noop"}
    assert [a["name"] for a in named[1][1]["args"]] == ["x", "act", "input"]


@pytest.mark.parametrize(
    "msg, fires",
    [
        ("index 5 is out of bounds for dimension 0 with size 4", True),  # "index" alone fires
        ("expected scalar type Long but found Float", True),
        ("expected scalar type Int but found Float", True),  # an int word and "float"
        ("expected scalar type Int but found Double", False),  # an int word without "float"
        ("tensors used as indices must be integer tensors", False),
        ("mat1 and mat2 shapes cannot be multiplied (1x8 and 4x4)", False),
    ],
)
def test_the_index_dtype_condition_keeps_its_original_precedence(msg, fires):
    """`(int-dtype word and "float") or "long" or "index"`: the cascade's unparenthesized condition."""
    f = Failure.of(err("RuntimeError", msg))
    assert _index_dtype({}, f, Candidate.of(cand_of())) is fires


FRAGMENTS = sorted(
    {w for s, e, c, want in CASES.values() for w in e["msg"].split()}
    | {
        "missing",
        "required",
        "positional",
        "argument:",
        "'y'",
        "object",
        "has",
        "no",
        "attribute",
        "'Tensor'",
        "'NoneType'",
        "not",
        "subscriptable",
        "iterable",
        "callable",
        "index",
        "long",
        "float",
        "bfloat16",
        "division",
        "by",
        "zero",
        "world_size",
        "times",
        "split",
        "divisible",
        "expected",
        "must",
        "be",
    }
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    words=st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=12),
    typ=st.sampled_from(["TypeError", "RuntimeError", "AttributeError", "KeyError", "NameError"]),
    case=st.sampled_from(sorted(CASES)),
)
def test_any_failure_gets_proposals_in_priority_order_ending_at_the_first_exclusive_rule(words, typ, case):
    spec, error, cand, _ = CASES[case]
    f = Failure.of({**error, "type": typ, "msg": " ".join(words)})
    named = propose_named(spec, f, Candidate.of(cand))
    rank = {r.name: i for i, r in enumerate(RULES)}
    assert [rank[n] for n, _ in named] == sorted(rank[n] for n, _ in named)
    exclusive = [r.name for r in RULES if r.exclusive and r.trigger.fires(spec, f, Candidate.of(cand))]
    if exclusive:  # nothing from a rule after the first exclusive rule that fired
        assert all(rank[n] <= rank[exclusive[0]] for n, _ in named)
    assert all(spec_problems(s) == [] for _, s in named)
