"""``run.settle_order``: rows released in the order they were sent, within bounds."""

from __future__ import annotations

import pytest

from reverify_assets.run.settle_order import SettleOrder


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def line(key: int) -> bytes:
    return b"%d\n" % key


@pytest.mark.parametrize(
    ("settles", "released"),
    [
        ([0, 1, 2, 3], [[0], [1], [2], [3]]),  # in order: each at once
        ([1, 2, 0, 3], [[], [], [0, 1, 2], [3]]),  # early ones wait for the first
        ([3, 2, 1, 0], [[], [], [], [0, 1, 2, 3]]),
    ],
)
def test_rows_are_released_in_the_order_they_were_sent(settles: list[int], released: list[list[int]]) -> None:
    order = SettleOrder()
    for key in range(4):
        order.sent(key)
    assert [order.settled(key, line(key)) for key in settles] == [[line(k) for k in keys] for keys in released]
    assert order.in_order and order.drain() == []


def test_a_row_with_nothing_to_write_still_lets_the_others_go() -> None:
    order = SettleOrder()
    for key in range(3):
        order.sent(key)
    assert order.settled(1, line(1)) == []
    assert order.settled(0, None) == [line(1)]  # a failure: its line goes to the sidecar, not here
    assert order.settled(2, line(2)) == [line(2)]


@pytest.mark.parametrize("bound", ["rows", "bytes", "time"])
def test_one_slow_row_does_not_hold_the_others_past_a_bound(bound: str) -> None:
    clock = Clock()
    order = SettleOrder(max_held=3, max_held_bytes=1000, max_wait_s=2.0, clock=clock)
    for key in range(6):
        order.sent(key)
    clock.now = 10.0  # long after the start: the wait counts from when a row was first held
    assert order.settled(1, line(1)) == [] and order.settled(2, line(2)) == []
    if bound == "rows":
        assert order.settled(3, line(3)) == []
        assert order.settled(4, line(4)) == [line(k) for k in (1, 2, 3, 4)]  # four held: over the bound
    elif bound == "bytes":
        assert order.settled(3, b"x" * 1000) == [line(1), line(2), b"x" * 1000]
    else:
        clock.now = 11.5
        assert not order.overdue()
        clock.now = 12.5
        assert order.overdue()  # what the verify loop asks on its timer, when no row settles meanwhile
        assert order.give_up() == [line(1), line(2)]
    assert not order.in_order  # the file will be sorted at the end
    assert order.settled(0, line(0)) == [line(0)]  # from now on each as it settles
    assert order.settled(5, None) == []


def test_the_wait_starts_again_for_each_row_waited_for() -> None:
    clock = Clock()
    order = SettleOrder(max_wait_s=2.0, clock=clock)
    for key in range(4):
        order.sent(key)
    order.settled(2, line(2))  # waits for 0 and 1, from t=0
    clock.now = 1.5
    assert order.settled(0, line(0)) == [line(0)]  # 2 now waits for 1, from t=1.5
    clock.now = 3.0
    assert not order.overdue()
    assert order.settled(1, line(1)) == [line(1), line(2)] and order.in_order


def test_the_rows_waiting_when_the_run_stops_are_kept_in_the_order_sent() -> None:
    order = SettleOrder()
    for key in range(4):
        order.sent(key)
    order.settled(3, line(3))
    order.settled(1, None)
    order.settled(2, line(2))
    assert order.drain() == [line(2), line(3)]
    assert order.drain() == []
