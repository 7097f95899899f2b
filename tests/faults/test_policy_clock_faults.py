"""Fault injection: the policy node on sim time whose /clock stops or jumps back (issue 16, item 8).

A simulator reset rewinds /clock; before the fix the node then waited, silent, until sim time
caught up with its old deadline: no ticks, no re-sends, no damping. Now it re-anchors at once, and a
LowState received before the jump counts as stale (its age is unknown), so a robot that went
quiet with the rewind is damped. A stopped clock (a paused simulator) stops everything with it.
"""

from __future__ import annotations

import time

import pytest

rclpy = pytest.importorskip("rclpy")
from asap_msgs.srv import SetMode  # noqa: E402
from policy_graph import Graph, sine_policy_graph  # noqa: E402

from asap_core.modes import Mode  # noqa: E402

pytestmark = [pytest.mark.graph, pytest.mark.flaky(reruns=1)]


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory):
    with sine_policy_graph(tmp_path_factory.mktemp("clock_faults"), 30.0, "stale_damp_ms:=200.0",
                           sim_clock=True) as g:
        yield g


def _ticks_after(graph: Graph, n: int, what: str) -> None:
    first = graph.records[-1].tick
    graph.wait(lambda: graph.records[-1].tick >= first + n, 20.0, what)


def test_a_rewound_clock_re_anchors_and_the_node_keeps_ticking(graph: Graph) -> None:
    graph.to_hold()
    graph.clock.jump(-100.0)  # never caught up within the test: 100 s of sim time is 100 s of wall
    _ticks_after(graph, 20, "ticks after the clock jumped back")
    assert graph.mode() is Mode.HOLD  # states keep coming, stamped on the new clock: still fresh


def test_a_rewound_clock_with_a_silent_robot_damps(graph: Graph) -> None:
    graph.to_hold()
    t0 = time.monotonic()
    graph.fake.publishing = False
    try:
        graph.clock.jump(-100.0)
        graph.wait(lambda: any(c.is_damping for c in graph.fake.commands_since(t0)), 10.0,
                   "damping on /lowcmd")
        graph.wait(lambda: graph.mode() is Mode.DAMPING, 5.0, "DAMPING status")
        assert "stale" in graph.status.fault
    finally:
        graph.fake.publishing = True
    assert graph.set_mode(SetMode.Request.REQUEST_RESET).accepted


def test_a_stopped_clock_stops_the_ticks_and_they_resume_with_it(graph: Graph) -> None:
    graph.to_hold()
    graph.clock.running = False
    time.sleep(0.5)  # the last ticks of the running clock land
    stopped_at = len(graph.records)
    time.sleep(1.0)
    assert len(graph.records) == stopped_at, "a tick ran on a stopped clock"
    graph.clock.running = True
    _ticks_after(graph, 20, "ticks once the clock moves again")
    assert graph.mode() is Mode.HOLD and graph.status.fault == ""
