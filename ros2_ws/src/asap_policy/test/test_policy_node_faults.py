"""policy_node as a separate process against a test double of the G1 (test/fake_g1.py) over DDS.

The node under test is the real console entry (``python -m asap_policy.policy_node``) with its
parameters from the command line. Every assertion is on what reached /lowcmd (what the motors
were told), on the services' replies, and on /policy/record and /policy/status.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
from asap_msgs.srv import SetMode  # noqa: E402
from policy_graph import Graph, sine_policy_graph  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from unitree_hg.msg import LowCmd  # noqa: E402

from asap_core import remote  # noqa: E402
from asap_core.modes import Mode  # noqa: E402
from asap_core.testing import policies  # noqa: E402

# Real-time fault tests over DDS with three busy processes on 2 cores: a starved process can push
# one tick past a deadline. A failure is retried (fresh attempt, same assertions) up to twice;
# a test that fails three times in a row fails the suite. See the issue-4 note.
pytestmark = [pytest.mark.graph, pytest.mark.flaky(reruns=2)]
N = 23
DT = 0.02


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory):
    with sine_policy_graph(tmp_path_factory.mktemp("node"), 1.0, "stale_damp_ms:=50.0") as g:
        yield g


def test_every_command_has_a_valid_crc_and_echoes_mode_machine(graph: Graph) -> None:
    graph.to_hold()
    cmds = graph.fake.commands_since(0.0)[-2000:]  # the CRC check is the slow, independent path
    assert len(cmds) > 50
    msgs = [c.msg for c in cmds]
    assert all(c.crc_ok for c in cmds) and {m.mode_machine for m in msgs} == {5}
    assert {m.mode_pr for m in msgs} == {0} and all(m.motor_cmd[29].mode == 0 for m in msgs)


def test_policy_nan_damps_within_one_tick(graph: Graph) -> None:
    nan = policies.write(graph.tmp / "nan.onnx", policies.nan_after(N, 0.5), motion_s=0.4, name="nan")
    reply = graph.load(nan)
    assert reply.accepted, reply.message
    for _ in range(3):  # a load spike may damp first (stale state): then run the motion again
        graph.to_hold()
        first = len(graph.records)
        if not graph.set_mode(SetMode.Request.REQUEST_POLICY).accepted:
            continue
        graph.wait(lambda: graph.mode() is Mode.DAMPING, 5.0, "DAMPING after NaN")
        if "non-finite" in graph.status.fault:
            break
    assert "non-finite" in graph.status.fault
    time.sleep(0.1)
    records = graph.records[first:]
    bad = next(r for r in records if len(r.action_raw) and not np.isfinite(r.action_raw).all())
    # the tick whose network output was NaN is already a DAMPING tick, and the one before was POLICY
    assert bad.mode == Mode.DAMPING
    previous = next(r for r in reversed(records) if r.tick == bad.tick - 1)
    assert previous.mode == Mode.POLICY and np.isfinite(previous.action_raw).all()
    # the NaN never reached a motor
    assert all(np.isfinite(c.q).all() and np.isfinite(c.kp).all() for c in graph.fake.commands_since(0.0))


def test_lowstate_loss_damps_within_the_timeout(graph: Graph) -> None:
    graph.to_hold()
    first = len(graph.records)
    graph.fake.publishing = False
    time.sleep(0.005)
    t_stop = graph.fake.last_state_t
    try:
        graph.wait(lambda: any(c.is_damping for c in graph.fake.commands_since(t_stop)), 2.0,
                   "a damping command on /lowcmd")
    finally:
        graph.fake.publishing = True
    # the records travel over DDS like everything else: wait for the DAMPING one to arrive
    graph.wait(lambda: any(r.mode == Mode.DAMPING for r in graph.records[first:]), 2.0, "a DAMPING record")
    # In the node's own time (its records, one per tick): the ticks that reused the last state
    # before damping. 50 ms stale limit at 20 ms ticks: ages ~0-20, 20-40, 40-60 ms -> at most the
    # 4th tick on that state damps (one tick of margin for the sub-tick phase of the loss).
    records = graph.records[first:]
    damp = next(r for r in records if r.mode == Mode.DAMPING)
    same_state = [r for r in records if r.lowstate_tick == damp.lowstate_tick and r.tick <= damp.tick]
    assert len(same_state) <= 4, [(r.tick, r.mode) for r in same_state]
    assert all(r.mode != Mode.DAMPING for r in same_state[:-1])
    assert "stale" in graph.status.fault


def test_estop_combo_on_the_remote_damps(graph: Graph) -> None:
    graph.to_hold()
    t0 = time.monotonic()
    graph.fake.keys = remote.keys_mask("L2", "B")
    try:
        graph.wait(lambda: any(c.is_damping for c in graph.fake.commands_since(t0)), 2.0, "damping")
    finally:
        graph.fake.keys = 0
    assert graph.set_mode(SetMode.Request.REQUEST_RAMP).accepted is False  # latched
    assert graph.set_mode(SetMode.Request.REQUEST_RESET).accepted


def _bad_artifacts(tmp: Path) -> dict[str, tuple[Path, str]]:
    corrupt = tmp / "corrupt.onnx"
    corrupt.write_bytes(b"\x08\x07garbage" * 100)
    good = policies.write(tmp / "base.onnx", policies.constant(N, 0.0))
    names = policies.with_metadata(good, tmp / "names.onnx",
                           lambda d: d["joint_names"].__setitem__(0, "left_hip_pitch"))
    dims = policies.with_metadata(good, tmp / "dims.onnx",
                          lambda d: d["observation"].__setitem__("terms", d["observation"]["terms"][:4]))
    return {"corrupt": (corrupt, "not an ONNX model"), "names": (names, "not G1 joints: ['left_hip_pitch']"),
            "dims": (dims, "observation.dim")}


def test_invalid_artifacts_are_refused_while_the_policy_keeps_running(graph: Graph) -> None:
    good = policies.write(graph.tmp / "long.onnx", policies.sine(N, 0.2), motion_s=8.0, name="long")
    bad = _bad_artifacts(graph.tmp)  # made before the clock matters
    assert graph.load(good).accepted
    graph.to_hold()
    assert graph.set_mode(SetMode.Request.REQUEST_POLICY).accepted
    graph.wait(lambda: graph.mode() is Mode.POLICY, 2.0, "POLICY")
    missed_before = graph.status.missed_ticks
    first = len(graph.records)
    for name, (path, words) in bad.items():
        reply = graph.load(path)
        assert not reply.accepted, name
        assert words in reply.message, (name, reply.message)
        assert graph.mode() is Mode.POLICY
    time.sleep(0.1)
    records = graph.records[first:]
    ticks = [r.tick for r in records]
    assert ticks == list(range(ticks[0], ticks[0] + len(ticks))), "a tick record is missing"
    assert all(r.mode == Mode.POLICY and r.policy_sha256 == records[0].policy_sha256 for r in records)
    assert graph.status.missed_ticks == missed_before
    assert graph.set_mode(SetMode.Request.REQUEST_HOLD).accepted


def test_second_lowcmd_publisher_blocks_leaving_zero_torque(graph: Graph) -> None:
    graph.to_hold()
    graph.set_mode(SetMode.Request.REQUEST_ZERO_TORQUE)
    rogue = rclpy.create_node("rogue_controller")
    rogue.create_publisher(LowCmd, "/lowcmd", QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE))
    try:
        graph.wait(lambda: "another /lowcmd publisher" in graph.status.fault, 10.0, "conflict detected")
        first_record = len(graph.records)
        reply = graph.set_mode(SetMode.Request.REQUEST_RAMP)
        assert not reply.accepted and "rogue_controller" in reply.message
        time.sleep(0.3)
        assert graph.mode() is Mode.ZERO_TORQUE
        # the node never left ZERO_TORQUE (its own per-tick records) ...
        assert {Mode(r.mode) for r in graph.records[first_record:]} == {Mode.ZERO_TORQUE}
        # ... and what reaches the robot is zero torque. The stand-in robot takes commands in order but
        # can fall behind (a 500 Hz stream into a Python executor; stamps are processing times), so
        # judge the newest commands once it has caught up to the zero-torque stream
        graph.wait(lambda: graph.fake.commands_since(0.0)[-1].is_zero_torque, 10.0, "the robot catching up")
        time.sleep(0.2)
        newest = graph.fake.commands_since(0.0)[-20:]
        assert all(c.is_zero_torque for c in newest), [float(c.kp.max()) for c in newest]
    finally:
        rogue.destroy_node()
    graph.wait(lambda: graph.status.fault == "", 10.0, "conflict cleared")
    assert graph.set_mode(SetMode.Request.REQUEST_RAMP).accepted
