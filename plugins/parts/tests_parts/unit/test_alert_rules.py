"""Alert rules: the normalisation table, every rule type x operator, and the re-evaluation rules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ticklock_parts.alerts.rules import (
    Cursor,
    Operator,
    Rule,
    RuleError,
    RuleType,
    compliance_flag,
    evaluate,
    lifecycle_stage,
    number,
    operator,
    part_numbers,
    risk_level,
    rule_type,
)

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)


# -- normalisation ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("raw", "expected"),
    [(10, 10.0), (5.5, 5.5), ("10", 10.0), (" 1,234.50 ", 1234.5), ("$3", 3.0), ("10%", 10.0), ("-2.5", -2.5)],
)
def test_numbers_from_what_producers_send(raw: Any, expected: float) -> None:
    assert number(raw, "price") == expected


@pytest.mark.parametrize("raw", [True, None, "ten", "", "nan", "inf", [1], {"v": 1}])
def test_what_is_not_a_number(raw: Any) -> None:
    with pytest.raises(RuleError):
        number(raw, "price")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Low", "Low"),
        ("LOW", "Low"),
        ("low", "Low"),
        (" Medium ", "Medium"),
        ("MED", "Medium"),
        ("critical", "Critical"),
    ],
)
def test_risk_levels_are_title_case(raw: str, expected: str) -> None:
    assert risk_level(raw) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("yes", "YES"),
        ("YES", "YES"),
        ("Yes", "YES"),
        (True, "YES"),
        ("true", "YES"),
        ("Compliant", "YES"),
        ("no", "NO"),
        (False, "NO"),
        ("Non-Compliant", "NO"),
        ("exempt", "EXEMPT"),
    ],
)
def test_compliance_flags_are_upper_case(raw: Any, expected: str) -> None:
    assert compliance_flag(raw) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Active", "ACTIVE"),
        ("ACTIVE", "ACTIVE"),
        ("production", "ACTIVE"),
        ("Not Recommended for New Designs", "NRND"),
        ("nrnd", "NRND"),
        ("Last Time Buy", "LTB"),
        ("End of Life", "EOL"),
        ("end-of-life", "EOL"),
        ("Discontinued", "OBSOLETE"),
        ("obsolete", "OBSOLETE"),
        ("preview", "PREVIEW"),
    ],
)
def test_lifecycle_stages_have_one_name_each(raw: str, expected: str) -> None:
    assert lifecycle_stage(raw) == expected


def test_alternates_are_a_set_of_upper_case_part_numbers() -> None:
    assert part_numbers(["abc-1", " ABC-1 ", "x2", ""]) == {"ABC-1", "X2"}
    assert part_numbers("abc-1, def-2") == {"ABC-1", "DEF-2"}
    assert part_numbers([{"mpn": "m1"}, {"partNumber": "m2"}]) == {"M1", "M2"}
    assert part_numbers(None) == frozenset()
    with pytest.raises(RuleError):
        part_numbers(42)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("price_change", RuleType.PRICE_CHANGE),
        ("priceChange", RuleType.PRICE_CHANGE),
        ("PRICE_CHANGE", RuleType.PRICE_CHANGE),
        ("riskScore", RuleType.RISK),
        ("risk-level", RuleType.RISK),
        ("Compliance", RuleType.COMPLIANCE),
        ("lifecycleStage", RuleType.LIFECYCLE),
        ("new_alternate", RuleType.ALTERNATE),
    ],
)
def test_rule_type_spellings(raw: str, expected: RuleType) -> None:
    assert rule_type(raw) is expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("eq", Operator.EQ),
        ("==", Operator.EQ),
        ("NE", Operator.NE),
        ("!=", Operator.NE),
        (">", Operator.GT),
        ("GTE", Operator.GTE),
        ("<", Operator.LT),
        ("<=", Operator.LTE),
        ("Changed", Operator.CHANGED),
    ],
)
def test_operator_spellings(raw: str, expected: Operator) -> None:
    assert operator(raw) is expected


# -- every type x operator -------------------------------------------------------------------------------
def rule(kind: str, op: str, threshold: Any = None, cursor: Any = "unset", **kw: Any) -> Rule:
    return Rule(
        id="r1",
        type=kind,
        operator=op,
        threshold=threshold,
        cursor=None if cursor == "unset" else Cursor(cursor, 3),
        **kw,
    )


CASES: list[tuple[str, str, Any, Any, dict[str, Any], bool]] = [
    # type, operator, threshold, cursor value, part now, fires
    # price_change: |now - baseline| / baseline in percent; the baseline here is 100
    ("price_change", "gt", "10", 100.0, {"price": "115"}, True),
    ("price_change", "gt", 10, 100.0, {"price": 105}, False),
    ("price_change", "gte", "10%", 100.0, {"price": "90"}, True),
    ("price_change", "lt", 5, 100.0, {"price": 102}, True),
    ("price_change", "lte", 5, 100.0, {"price": 110}, False),
    ("price_change", "eq", 20, 100.0, {"price": 120}, True),
    ("price_change", "ne", 20, 100.0, {"price": 120}, False),
    ("price_change", "changed", None, 100.0, {"price": "100.5"}, True),
    ("price_change", "changed", None, 100.0, {"price": "100"}, False),
    # risk score: crossing into the condition
    ("risk", "gt", "70", 60.0, {"riskScore": "75"}, True),
    ("risk", "gt", 70, 72.0, {"riskScore": 75}, False),  # already above: no crossing
    ("risk", "gte", 70, 69.0, {"riskScore": 70}, True),
    ("risk", "lt", 30, 35.0, {"riskScore": "20"}, True),
    ("risk", "lte", 30, 30.0, {"riskScore": 10}, False),
    ("risk", "eq", 50, 40.0, {"riskScore": "50.0"}, True),
    ("risk", "ne", 50, 50.0, {"riskScore": 51}, True),
    ("risk", "changed", None, 50.0, {"riskScore": 51}, True),
    # risk level (the threshold names a level)
    ("risk", "gte", "high", "Medium", {"riskLevel": "HIGH"}, True),
    ("risk", "gt", "High", "Medium", {"riskLevel": "high"}, False),
    ("risk", "lt", "MEDIUM", "High", {"riskLevel": "low"}, True),
    ("risk", "eq", "Critical", "High", {"riskLevel": "CRITICAL"}, True),
    ("risk", "changed", "Low", "Low", {"riskLevel": "LOW"}, False),
    # compliance flags
    ("compliance", "eq", "no", "YES", {"compliance": {"RoHS": "No"}}, True),
    ("compliance", "eq", "NO", "NO", {"compliance": {"rohs": False}}, False),
    ("compliance", "ne", "yes", "YES", {"compliance": {"rohs": "no"}}, True),
    ("compliance", "changed", None, "YES", {"compliance": {"rohs": "yes"}}, False),
    ("compliance", "changed", None, "YES", {"compliance": {"rohs": "EXEMPT"}}, True),
    # lifecycle stages, ordered PREVIEW < ACTIVE < NRND < LTB < EOL < OBSOLETE
    ("lifecycle", "gte", "EOL", "ACTIVE", {"lifecycle": "End of Life"}, True),
    ("lifecycle", "gt", "active", "ACTIVE", {"lifecycle": "NRND"}, True),
    ("lifecycle", "lt", "ACTIVE", "ACTIVE", {"lifecycle": "preview"}, True),
    ("lifecycle", "lte", "NRND", "NRND", {"lifecycle": "Active"}, False),
    ("lifecycle", "eq", "Obsolete", "EOL", {"lifecycle": "discontinued"}, True),
    ("lifecycle", "ne", "ACTIVE", "ACTIVE", {"lifecycle": "ACTIVE"}, False),
    ("lifecycle", "changed", None, "ACTIVE", {"lifecycle": "nrnd"}, True),
    # alternates: what appeared since the cursor
    ("alternate", "gt", 0, ["A1"], {"alternates": ["a1", "B2"]}, True),
    ("alternate", "gt", "0", ["A1", "B2"], {"alternates": ["a1", "b2"]}, False),
    ("alternate", "gte", 2, ["A1"], {"alternates": ["A1", "B2"]}, False),
    ("alternate", "lt", 2, ["A1"], {"alternates": ["A1", "B2"]}, True),
    ("alternate", "lte", 0, ["A1", "B2"], {"alternates": ["A1"]}, True),  # changed, nothing new
    ("alternate", "lte", 0, ["A1"], {"alternates": ["A1"]}, False),  # no change at all
    ("alternate", "eq", "b2", ["A1"], {"alternates": "A1, B2"}, True),
    ("alternate", "ne", "B2", ["A1"], {"alternates": ["B2"]}, False),
    ("alternate", "changed", None, ["A1"], {"alternates": ["A1", "C3"]}, True),
]


@pytest.mark.parametrize(("kind", "op", "threshold", "was", "part", "fires"), CASES)
def test_every_rule_type_and_operator(
    kind: str, op: str, threshold: Any, was: Any, part: dict[str, Any], fires: bool
) -> None:
    baseline = 100.0 if kind == "price_change" else None
    verdict = evaluate(rule(kind, op, threshold, was, baseline=baseline), part, NOW)
    assert verdict.error is None
    assert verdict.triggered is fires
    assert bool(verdict.message) is fires


ORDER = (Operator.GT, Operator.GTE, Operator.LT, Operator.LTE)


def test_the_grid_covers_every_type_and_operator() -> None:
    covered = {(rule_type(k), operator(o)) for k, o, *_ in CASES}
    # a compliance flag has no order: those four are errors (next test)
    assert covered == {(t, o) for t in RuleType for o in Operator} - {(RuleType.COMPLIANCE, o) for o in ORDER}


@pytest.mark.parametrize("op", ORDER)
def test_an_order_on_a_compliance_flag_is_an_error(op: Operator) -> None:
    verdict = evaluate(rule("compliance", op.value, "YES", "NO"), {"compliance": {"rohs": "yes"}}, NOW)
    assert verdict.error == f"operator {op.value} does not apply to a compliance flag (eq, ne, changed do)"


# -- errors stay on the rule -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kind", "op", "threshold", "part", "error"),
    [
        ("price_jump", "gt", 5, {"price": 1}, "unknown rule type 'price_jump'"),
        ("price_change", "between", 5, {"price": 1}, "unknown operator 'between'"),
        ("price_change", "gt", "ten", {"price": 1}, "threshold 'ten' is not a number"),
        ("price_change", "gt", None, {"price": 1}, "operator gt needs a threshold"),
        ("risk", "gt", 70, {"riskScore": "high-ish"}, "risk score 'high-ish' is not a number"),
        ("risk", "gt", "Severe", {"riskScore": 1}, "threshold 'Severe' is not a number"),
        ("compliance", "gt", "YES", {"compliance": {"rohs": "yes"}}, "operator gt does not apply"),
        ("compliance", "eq", "YES", {"compliance": "yes"}, "is not a map of flags"),
        ("lifecycle", "eq", "Sunset", {"lifecycle": "ACTIVE"}, "threshold 'Sunset' is not one of"),
        ("lifecycle", "eq", "ACTIVE", {"price": 1}, "has no lifecycle"),
        ("alternate", "gt", "X1", {"alternates": []}, "needs a count"),
        (None, "eq", 1, {"price": 1}, "unknown rule type None"),
    ],
)
def test_a_rule_that_cannot_be_evaluated_gets_an_error_and_keeps_its_state(
    kind: Any, op: str, threshold: Any, part: dict[str, Any], error: str
) -> None:
    before = rule(kind, op, threshold, 1.0)
    verdict = evaluate(before, part, NOW)
    assert verdict.error is not None and error in verdict.error
    assert not verdict.triggered
    assert verdict.cursor == before.cursor


def test_no_part_data_is_an_error() -> None:
    verdict = evaluate(rule("risk", "gt", 1, 0.0), None, NOW)
    assert verdict.error == "no data for the part"


# -- re-evaluation -------------------------------------------------------------------------------------
def test_the_same_state_never_fires_twice_and_each_change_bumps_the_cursor() -> None:
    first = evaluate(rule("risk", "gt", 70, 60.0), {"riskScore": 80}, NOW)
    assert first.triggered and first.cursor == Cursor(80.0, 4) and first.previous_version == 3
    again = rule("risk", "gt", 70, 80.0, last_triggered_at=NOW - timedelta(days=1))
    second = evaluate(again, {"riskScore": "80"}, NOW)
    assert not second.triggered and second.cursor == Cursor(80.0, 3)  # unchanged: the stored cursor


def test_a_first_check_sets_the_cursor_and_fires_only_for_a_level_already_crossed() -> None:
    level = evaluate(rule("risk", "gt", 70), {"riskScore": 80}, NOW)
    assert level.triggered and level.cursor == Cursor(80.0, 0) and level.previous_version is None
    changed = evaluate(rule("lifecycle", "changed"), {"lifecycle": "EOL"}, NOW)
    assert not changed.triggered and changed.cursor == Cursor("EOL", 0)
    alternates = evaluate(rule("alternate", "gt", 0), {"alternates": ["A"]}, NOW)
    assert not alternates.triggered and alternates.cursor == Cursor(frozenset({"A"}), 0)


def test_a_first_price_is_the_baseline_and_the_baseline_moves_when_the_rule_fires() -> None:
    first = evaluate(rule("price_change", "gt", 10), {"price": 100}, NOW)
    assert not first.triggered and first.baseline == 100.0
    up = evaluate(rule("price_change", "gt", 10, 100.0, baseline=100.0), {"price": 120}, NOW)
    assert up.triggered and up.baseline == 120.0 and "+20.0%" in up.message
    creep = evaluate(rule("price_change", "gt", 10, 100.0, baseline=100.0), {"price": 105}, NOW)
    assert not creep.triggered and creep.baseline == 100.0  # small moves add up from the same baseline
    producer = evaluate(rule("price_change", "gt", 10, baseline="50"), {"price": 60}, NOW)
    assert producer.triggered  # a baseline set by the producer counts on the first check


def test_cooldown_since_the_last_trigger_holds_a_rule_back() -> None:
    cooling = rule("risk", "gt", 70, 60.0, cooldown=timedelta(hours=1), last_triggered_at=NOW - timedelta(minutes=5))
    verdict = evaluate(cooling, {"riskScore": 80}, NOW)
    assert not verdict.triggered and verdict.cursor == Cursor(80.0, 4)


def test_due_means_never_checked_or_checked_a_cooldown_ago() -> None:
    assert rule("risk", "gt", 1).due(NOW)
    assert not rule("risk", "gt", 1, last_checked_at=NOW - timedelta(minutes=59)).due(NOW)
    assert rule("risk", "gt", 1, last_checked_at=NOW - timedelta(hours=1)).due(NOW)
    assert not rule("risk", "gt", 1, active=False).due(NOW)


def test_a_stored_cursor_is_read_in_the_rules_canonical_form() -> None:
    # stored as a list (a document has no sets) and in another case: still the same value
    alternates = evaluate(rule("alternate", "gt", 0, ["b2", "a1"]), {"alternates": ["A1", "B2"]}, NOW)
    assert not alternates.triggered and alternates.cursor is not None and alternates.cursor.version == 3
    level = evaluate(rule("risk", "gte", "High", "HIGH"), {"riskLevel": "high"}, NOW)
    assert not level.triggered and level.cursor is not None and level.cursor.version == 3
