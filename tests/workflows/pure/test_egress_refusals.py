"""What the run's network refused (workflows/pure/egress.py): each sandbox's counts as its
provider reported them, kept per sandbox so a new sandbox counts afresh, and the run's figure
their sum, the most refused host first."""

from __future__ import annotations

from tests.workflows.pure.test_decide import running
from workflows.pure.egress import refused_totals, take_refusals


def test_each_sandbox_keeps_its_own_counts_and_the_run_sums_them() -> None:
    s = running()
    take_refusals(s, "box-1", {"evil.example": 2, "pypi.org": 1})
    take_refusals(s, "box-2", {"evil.example": 3})
    assert s.sandbox.egress_refused == {
        "box-1": {"evil.example": 2, "pypi.org": 1},
        "box-2": {"evil.example": 3},
    }
    assert refused_totals(s) == {"evil.example": 5, "pypi.org": 1}


def test_a_sandboxs_counts_only_grow_a_smaller_report_keeps_the_larger() -> None:
    s = running()
    take_refusals(s, "box-1", {"a.example": 5, "b.example": 1})
    take_refusals(s, "box-1", {"a.example": 2, "b.example": 4, "c.example": 1})
    assert s.sandbox.egress_refused == {"box-1": {"a.example": 5, "b.example": 4, "c.example": 1}}


def test_no_sandbox_or_no_counts_changes_nothing() -> None:
    s = running()
    take_refusals(s, None, {"a.example": 1})
    take_refusals(s, "box-1", {})
    take_refusals(s, "box-1", None)
    assert s.sandbox.egress_refused == {}
    take_refusals(s, "box-1", {"a.example": 0})  # a host asked for and never refused
    assert s.sandbox.egress_refused == {"box-1": {}}


def test_the_most_refused_host_comes_first_and_ties_go_by_name() -> None:
    s = running()
    take_refusals(s, "box-1", {"b.example": 2, "z.example": 9, "a.example": 2, "c.example": 1})
    assert list(refused_totals(s).items()) == [
        ("z.example", 9),
        ("a.example", 2),
        ("b.example", 2),
        ("c.example", 1),
    ]
