"""The pure admission order (workflows/pure/admission_queue.py) and the worker's admission settings
(overnight/core/admission.py), without a server."""

from __future__ import annotations

import pytest

from overnight.core.admission import (
    AdmissionRequest,
    AdmissionSettings,
    key_fingerprint,
    parse_admission,
    terms_for,
)
from overnight.core.grants import BadSetting
from overnight.core.models import RunSpec
from workflows.pure.admission_queue import (
    Places,
    ask,
    give_back,
    in_places,
    is_full,
    let_in,
    take_back,
)


def request(holder: str, **fields: object) -> AdmissionRequest:
    return AdmissionRequest.model_validate({"holder": holder, "max_runs": 2, **fields})


def pool_of(limit: int | None, *requests: AdmissionRequest) -> Places:
    places = Places()
    for one in requests:
        ask(places, one.model_copy(update={"max_runs": limit}))
    return places


def test_runs_go_in_up_to_the_limit_first_come_first_served() -> None:
    places = pool_of(2, request("a"), request("b"), request("c"))
    assert let_in(places) == ["a", "b"]
    assert is_full(places) and let_in(places) == []
    give_back(places, "a")
    assert let_in(places) == ["c"]
    assert places.admitted_total == 3 and places.most_held == 2


def test_priority_1_goes_before_priority_5_whoever_came_first() -> None:
    places = pool_of(1, request("hold"), request("low1", priority=5), request("low2", priority=5))
    assert let_in(places) == ["hold"]
    ask(places, request("high", priority=1, max_runs=1))
    ask(places, request("mid", priority=3, max_runs=1))
    order = []
    for holder in ["hold", "high", "mid", "low1"]:
        give_back(places, holder)
        order += let_in(places)
    assert order == ["high", "mid", "low1", "low2"]


def test_one_owners_200_runs_do_not_starve_another_owners_5() -> None:
    flood = [request(f"a{i}", owner="team-a") for i in range(200)]
    places = pool_of(10, *flood)
    assert len(let_in(places)) == 10
    for i in range(5):
        ask(places, request(f"b{i}", owner="team-b", max_runs=10))
    admitted: list[str] = []
    for i in range(5):  # five places free, one at a time
        give_back(places, f"a{i}")
        admitted += let_in(places)
    assert admitted == ["b0", "b1", "b2", "b3", "b4"]


def test_owners_holding_as_many_take_turns() -> None:
    places = pool_of(1, *[request(f"a{i}", owner="a") for i in range(3)], request("b0", owner="b"))
    ask(places, request("b1", owner="b", max_runs=1))
    order = let_in(places)
    for _ in range(4):
        give_back(places, order[-1])
        order += let_in(places)
    assert order == ["a0", "b0", "a1", "b1", "a2"]


def test_a_full_key_holds_up_only_the_runs_on_that_key() -> None:
    keyed = [request(f"k{i}", key="key-1", max_runs_per_key=1, max_runs=5) for i in range(3)]
    places = Places()
    for one in [*keyed, request("local", max_runs=5, max_runs_per_key=1)]:
        ask(places, one)
    assert let_in(places) == ["k0", "local"]
    assert is_full(places)
    give_back(places, "k0")
    assert let_in(places) == ["k1"]


def test_asking_twice_counts_once_and_a_holder_asking_again_is_answered() -> None:
    places = pool_of(1, request("a"), request("a"))
    assert len(places.waiting) == 1
    assert let_in(places) == ["a"]
    assert ask(places, request("a", max_runs=1)) is True
    assert len(places.holding) == 1 and places.waiting == []


def test_closed_holders_are_taken_back_and_a_waiting_run_may_withdraw() -> None:
    places = pool_of(1, request("a"), request("b"), request("c"))
    let_in(places)
    assert give_back(places, "c") is True  # cancelled while queued
    assert take_back(places, ["a", "not-a-holder"]) == ["a"]
    assert let_in(places) == ["b"] and places.taken_back_total == 1


def test_no_limit_lets_everyone_in() -> None:
    places = pool_of(None, *[request(f"r{i}") for i in range(100)])
    assert len(let_in(places)) == 100


def test_settings_come_from_the_environment_off_by_default() -> None:
    assert parse_admission({}) == AdmissionSettings()
    assert parse_admission({"OVERNIGHT_MAX_RUNS": "0"}).max_runs is None
    got = parse_admission(
        {
            "OVERNIGHT_MAX_RUNS": "50",
            "OVERNIGHT_MAX_RUNS_PER_KEY": "96",
            "OVERNIGHT_ADMISSION_CHECK_SECONDS": "5",
        }
    )
    assert (got.max_runs, got.max_runs_per_key, got.check_seconds) == (50, 96, 5)
    for bad in ({"OVERNIGHT_MAX_RUNS": "many"}, {"OVERNIGHT_ADMISSION_CHECK_SECONDS": "0"}):
        with pytest.raises(BadSetting, match=next(iter(bad))):
            parse_admission(bad)


def test_terms_name_the_pool_and_count_runtime_runs_against_the_key() -> None:
    spec = RunSpec(run_id="r1", repo="/r", agent_dir="/a", command="c")
    assert terms_for(spec, AdmissionSettings(), "q", None) is None
    assert terms_for(spec, AdmissionSettings(max_runs_per_key=5), "q", "key-x") is None
    terms = terms_for(spec, AdmissionSettings(max_runs=5), "q", "key-x")
    assert terms is not None and terms.workflow_id == "overnight-admission-q"
    assert terms.key is None
    runtime = spec.model_copy(update={"provider": "runtime"})
    keyed = terms_for(runtime, AdmissionSettings(max_runs_per_key=5), "q", "key-x")
    assert keyed is not None and (keyed.key, keyed.max_runs_per_key) == ("key-x", 5)


def test_a_key_fingerprint_says_nothing_of_the_key() -> None:
    secret = "rt_live_0123456789abcdef"
    assert secret not in key_fingerprint(secret)
    assert key_fingerprint(secret) == key_fingerprint(secret) != key_fingerprint(secret + "x")


@pytest.mark.parametrize("fields", [{"priority": 0}, {"priority": 6}, {"owner": "x" * 65}])
def test_a_spec_outside_the_priorities_or_owner_bounds_is_refused(
    fields: dict[str, object],
) -> None:
    with pytest.raises(ValueError, match=next(iter(fields))):
        RunSpec.model_validate({"repo": "/r", "agent_dir": "/a", "command": "c", **fields})


def test_a_pool_taking_its_workers_limits_ignores_the_requests_and_bounds_their_order() -> None:
    from workflows.pure.admission_queue import set_limits

    places = Places()
    set_limits(
        places,
        AdmissionSettings(max_runs=1, max_priority=2, urgent_owners=["oncall"], owners=["a"]),
    )
    forged = request("x", max_runs=None, priority=1, owner="fresh")
    ask(places, forged, take_limits=False)
    ask(places, request("y", priority=1, owner="oncall"), take_limits=False)
    ask(places, request("z", priority=4, owner="a"), take_limits=False)
    assert places.max_runs == 1
    assert [(w.holder, w.owner, w.priority) for w in places.waiting] == [
        ("x", "", 2),
        ("y", "", 2),  # urgent, but not one of the pool's owners: counted as none
        ("z", "a", 4),
    ]
    # Pools begun before took the latest request's limits, and bound nothing.
    old = Places()
    ask(old, forged)
    assert old.max_runs is None and (old.waiting[0].owner, old.waiting[0].priority) == ("fresh", 1)


def test_a_pool_takes_every_limit_and_bound_its_worker_has() -> None:
    from workflows.pure.admission_queue import set_limits

    places = Places()
    settings = AdmissionSettings(
        max_runs=4, max_runs_per_key=2, check_seconds=7, max_priority=3, urgent_owners=["oncall"]
    )
    set_limits(places, settings)
    assert (places.max_runs, places.max_runs_per_key, places.check_seconds) == (4, 2, 7)
    assert (places.max_priority, places.urgent_owners, places.owners) == (3, ["oncall"], None)
    # Any owner may be named: an urgent one keeps its priority, the others are bounded.
    ask(places, request("x", priority=1, owner="oncall"), take_limits=False)
    ask(places, request("y", priority=1, owner="anyone"), take_limits=False)
    assert [(w.owner, w.priority) for w in places.waiting] == [("oncall", 1), ("anyone", 3)]


def test_an_urgent_owner_among_the_pools_owners_keeps_its_priority() -> None:
    from workflows.pure.admission_queue import set_limits

    places = Places()
    set_limits(
        places, AdmissionSettings(max_priority=2, urgent_owners=["oncall"], owners=["oncall"])
    )
    ask(places, request("page", priority=1, owner="oncall"), take_limits=False)
    assert (places.waiting[0].owner, places.waiting[0].priority) == ("oncall", 1)


def test_a_pool_begun_before_takes_every_limit_of_the_latest_request() -> None:
    places = Places()
    ask(places, request("a", max_runs=3, max_runs_per_key=2, check_seconds=9))
    assert (places.max_runs, places.max_runs_per_key, places.check_seconds) == (3, 2, 9)


def test_asking_says_whether_the_holder_already_holds_a_place() -> None:
    places = pool_of(1, request("a"))
    assert ask(places, request("b", max_runs=1)) is False  # new: it waits
    assert ask(places, request("b", max_runs=1)) is False  # waiting still: counted once
    assert [w.holder for w in places.waiting] == ["a", "b"]
    let_in(places)
    assert ask(places, request("a", max_runs=1)) is True


def test_a_holder_is_in_places_while_it_holds_or_waits_for_one() -> None:
    places = pool_of(1, request("a"), request("b"))
    let_in(places)
    assert in_places(places, "a") and in_places(places, "b")
    assert not in_places(places, "c")
    give_back(places, "b")
    assert not in_places(places, "b")


def test_giving_back_says_whether_the_holder_had_a_place_or_a_turn() -> None:
    places = pool_of(1, request("a"), request("b"))
    let_in(places)
    assert give_back(places, "a") is True  # held one
    assert give_back(places, "b") is True  # waited for one
    assert give_back(places, "b") is False  # nothing left to give
    assert give_back(places, "stranger") is False


def test_places_taken_back_are_counted_over_the_pools_life() -> None:
    places = pool_of(None, request("a"), request("b"), request("c"))
    let_in(places)
    assert take_back(places, ["a"]) == ["a"] and take_back(places, ["b", "c"]) == ["b", "c"]
    assert places.taken_back_total == 3


def test_a_pool_with_no_one_waiting_is_not_full() -> None:
    places = pool_of(1, request("a"))
    let_in(places)
    assert not is_full(places) and not is_full(Places())


def test_a_key_limit_of_two_lets_two_runs_on_the_key_in_and_holds_the_third() -> None:
    places = Places()
    for i in range(3):
        ask(places, request(f"k{i}", key="key-1", max_runs_per_key=2, max_runs=None))
    assert let_in(places) == ["k0", "k1"]
    assert is_full(places)


def test_runs_on_a_key_with_no_key_limit_all_go_in() -> None:
    places = Places()
    for i in range(3):
        ask(places, request(f"k{i}", key="key-1", max_runs=5))
    assert let_in(places) == ["k0", "k1", "k2"]


def test_an_owner_holding_none_goes_before_one_holding_a_place_though_let_in_later() -> None:
    places = pool_of(2, request("a1", owner="a"))
    let_in(places)
    ask(places, request("b1", owner="b", max_runs=2))
    let_in(places)
    give_back(places, "b1")  # b was let in last, and holds nothing now
    ask(places, request("a2", owner="a", max_runs=2))
    ask(places, request("b2", owner="b", max_runs=2))
    assert let_in(places) == ["b2"]


def test_owners_holding_as_many_go_by_who_was_let_in_longest_ago_not_by_who_asked_first() -> None:
    places = pool_of(2, request("x1", owner="x"))
    let_in(places)
    ask(places, request("y1", owner="y", max_runs=2))
    let_in(places)
    ask(places, request("y2", owner="y", max_runs=2))  # y asks first ...
    ask(places, request("x2", owner="x", max_runs=2))
    give_back(places, "x1")
    give_back(places, "y1")
    assert let_in(places) == ["x2", "y2"]  # ... x was let in longest ago
