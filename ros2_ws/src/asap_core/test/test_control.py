"""The control tick without ROS: modes, commands, policy, faults, hot swap, against known numbers."""

from __future__ import annotations

import functools
import itertools
from pathlib import Path

import numpy as np
import pytest

from asap_core import g1, remote
from asap_core.artifact import load_artifact
from asap_core.control import ControlCfg, Controller, LoadedPolicy, RobotState
from asap_core.modes import Event, Mode
from asap_core.testing import policies

N = 23
close = functools.partial(np.testing.assert_allclose, rtol=1e-6, atol=1e-6)  # float32 network output
MOTORS = g1.MOTOR_ORDER
POLICY_IDX = np.array([MOTORS.index(n) for n in g1.names("asap23")])
WRIST_IDX = np.array([MOTORS.index(n) for n in g1.WRIST_JOINTS])
DEFAULT_MOTOR = g1.default_pose(MOTORS, "asap")  # ASAP default; wrists 0
KP_POLICY, KD_POLICY = g1.gains(g1.names("asap23"), "asap")
MOTION_S = 0.2  # 10 ticks at 50 Hz


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("policies")
    return {
        "zero": policies.write(d / "zero.onnx", policies.constant(N, 0.0), motion_s=MOTION_S),
        "plus": policies.write(d / "plus.onnx", policies.constant(N, 0.4), motion_s=MOTION_S),
        "nan": policies.write(d / "nan.onnx", policies.nan_after(N, 0.5), motion_s=MOTION_S),
    }


def load(files: dict[str, Path], name: str) -> LoadedPolicy:
    return LoadedPolicy(load_artifact(files[name]))


def state(q: np.ndarray | None = None, dq: np.ndarray | None = None, buttons: tuple[str, ...] = (),
          quat: tuple = (1.0, 0.0, 0.0, 0.0), mode_machine: int = 5) -> RobotState:
    return RobotState(q=DEFAULT_MOTOR.copy() if q is None else q, dq=np.zeros(29) if dq is None else dq,
                      quat_wxyz=np.array(quat), gyro_b=np.zeros(3),
                      remote=remote.decode(remote.encode(keys=remote.keys_mask(*buttons))),
                      mode_machine=mode_machine)


def test_ramp_interpolates_from_measured_to_default_then_holds(files: dict) -> None:
    c = Controller(ControlCfg(ramp_s=0.1), load(files, "zero"))  # 5 ticks
    start = DEFAULT_MOTOR.copy()
    start[POLICY_IDX[3]] += 0.2  # left knee 0.2 rad off its default
    s = state(start)
    out = c.tick(s, 0.001)
    assert out.mode is Mode.ZERO_TORQUE and not out.command.kp.any() and not out.command.kd.any()
    out = c.tick(s, 0.001, [Event.REQUEST_RAMP])
    assert out.results[0].accepted and out.mode is Mode.RAMP
    # first RAMP tick: fraction 1/5 of the way: 0.2 * (1 - 1/5) = 0.16 above the default
    assert out.command.q[3] == pytest.approx(DEFAULT_MOTOR[3] + 0.16)
    close(out.command.kp[POLICY_IDX], KP_POLICY)  # hold gains = policy gains
    close(out.command.kp[WRIST_IDX], 4.0)  # wrists: ASAP's wrist hold gains
    qs = [c.tick(s, 0.001).command.q[3] - DEFAULT_MOTOR[3] for _ in range(4)]
    close(qs, [0.12, 0.08, 0.04, 0.0], atol=1e-12)
    assert c.mode is Mode.HOLD
    out = c.tick(s, 0.001)
    assert out.mode is Mode.HOLD
    close(out.command.q, DEFAULT_MOTOR)


def test_policy_runs_the_motion_then_holds(files: dict) -> None:
    c = Controller(ControlCfg(ramp_s=0.02), load(files, "plus"))
    s = state()
    c.tick(s, 0.001, [Event.REQUEST_RAMP])
    c.tick(s, 0.001)
    assert c.mode is Mode.HOLD
    phases = []
    out = c.tick(s, 0.001, [Event.REQUEST_POLICY])
    while True:
        assert out.mode is Mode.POLICY and not out.fault
        phases.append(out.phase)
        # action 0.4 -> target = default + 0.25 * 0.4 on every policy joint; wrists stay at 0
        close(out.q_target, DEFAULT_MOTOR[POLICY_IDX] + 0.1)
        close(out.command.q[WRIST_IDX], 0.0)
        close(out.action, 0.4)
        close(out.command.kd[POLICY_IDX], KD_POLICY)
        assert out.observation.shape == (380,)
        if c.mode is not Mode.POLICY:
            break
        out = c.tick(s, 0.001)
    close(phases, np.arange(11) / 10)  # 0 .. 1 over 0.2 s at 50 Hz
    out = c.tick(s, 0.001)
    assert out.mode is Mode.HOLD  # holds the last policy target
    close(out.command.q[POLICY_IDX], DEFAULT_MOTOR[POLICY_IDX] + 0.1)


def test_last_action_feeds_the_next_observation(files: dict) -> None:
    c = Controller(ControlCfg(ramp_s=0.02), load(files, "plus"))
    s = state()
    c.tick(s, 0.001, [Event.REQUEST_RAMP])
    c.tick(s, 0.001)
    first = c.tick(s, 0.001, [Event.REQUEST_POLICY]).observation
    second = c.tick(s, 0.001).observation
    third = c.tick(s, 0.001).observation
    close(first[:N], 0.0)  # a_{t-1} = 0 at the start (history reset)
    close(second[:N], 0.4)
    # history_actor (from index 72) holds the previous ticks' "actions" term: a_{t-2}, a_{t-3}, ...
    close(second[72:72 + N], 0.0)
    close(third[72:72 + N], 0.4)
    close(third[72 + N:72 + 2 * N], 0.0)


def test_excitation_noise_is_applied_recorded_and_fed_back(files: dict) -> None:
    c = Controller(ControlCfg(ramp_s=0.02, action_noise_std=0.05, action_noise_seed=3), load(files, "zero"))
    s = state()
    c.tick(s, 0.001, [Event.REQUEST_RAMP])
    c.tick(s, 0.001)
    outs = [c.tick(s, 0.001, [Event.REQUEST_POLICY])] + [c.tick(s, 0.001) for _ in range(8)]
    noise = np.array([o.action for o in outs])  # the policy always says 0
    expected = np.random.default_rng(3).normal(0.0, 0.05, noise.shape)  # the same draws, in order
    close(noise, expected)
    for o in outs:
        close(o.q_target, DEFAULT_MOTOR[POLICY_IDX] + 0.25 * o.action)  # what the motors get
    for prev, o in itertools.pairwise(outs):
        close(o.observation[:N], prev.action)  # the noisy action is the next tick's last action


def test_nan_output_damps_in_the_same_tick(files: dict) -> None:
    c = Controller(ControlCfg(ramp_s=0.02), load(files, "nan"))
    s = state()
    c.tick(s, 0.001, [Event.REQUEST_RAMP])
    c.tick(s, 0.001)
    modes = [c.tick(s, 0.001, [Event.REQUEST_POLICY]).mode]
    while modes[-1] is Mode.POLICY:
        out = c.tick(s, 0.001)
        modes.append(out.mode)
    # phases 0 .. 0.5 are finite (sqrt(0) = 0); phase 0.6 is the 7th policy tick
    assert modes == [Mode.POLICY] * 6 + [Mode.DAMPING]
    assert "non-finite" in out.fault and "left_hip_pitch_joint" in out.fault
    assert not out.command.kp.any() and (out.command.kd == 8.0).all()
    assert c.fault == out.fault
    later = c.tick(s, 0.001, [Event.REQUEST_RAMP])
    assert later.mode is Mode.DAMPING and not later.results[0].accepted and later.fault == ""
    assert c.tick(s, 0.001, [Event.RESET]).mode is Mode.ZERO_TORQUE and c.fault == ""


def test_stale_state_trips_damping_in_active_modes_only(files: dict) -> None:
    c = Controller(ControlCfg(ramp_s=0.02), load(files, "zero"))
    s = state()
    assert c.tick(s, 0.2).mode is Mode.ZERO_TORQUE  # not active: no fault
    refused = c.tick(s, 0.2, [Event.REQUEST_RAMP]).results[0]
    assert not refused.accepted and "no fresh LowState" in refused.reason
    c.tick(s, 0.001, [Event.REQUEST_RAMP])
    c.tick(s, 0.049)  # 49 ms: still fine
    out = c.tick(s, 0.051)
    assert out.mode is Mode.DAMPING and "stale" in out.fault
    assert c.tick(None, None).mode is Mode.DAMPING


def test_start_guard_and_variant_and_pose_guards(files: dict) -> None:
    c = Controller(ControlCfg(ramp_s=0.02, policy_start_tolerance_rad=0.3), load(files, "zero"))
    s = state()
    out = c.tick(s, 0.001, [Event.REQUEST_RAMP], start_block="another /lowcmd publisher: /rogue")
    assert out.mode is Mode.ZERO_TORQUE and out.results[0].reason == "another /lowcmd publisher: /rogue"
    out = c.tick(state(mode_machine=4), 0.001, [Event.REQUEST_RAMP])
    assert not out.results[0].accepted and "g1_23dof_rev_1_0" in out.results[0].reason
    c.tick(s, 0.001, [Event.REQUEST_RAMP])
    c.tick(s, 0.001)
    off = DEFAULT_MOTOR.copy()
    off[MOTORS.index("right_elbow_joint")] += 0.4
    out = c.tick(state(off), 0.001, [Event.REQUEST_POLICY])
    assert out.mode is Mode.HOLD and "right_elbow_joint off by 0.40 rad > 0.30" in out.results[0].reason


def test_a_simulator_mode_machine_is_accepted_only_when_configured(files: dict) -> None:
    """unitree_mujoco reports mode_machine 0: refused by default, accepted with sim_mode_machine=0."""
    out = Controller(ControlCfg(), load(files, "zero")).tick(state(mode_machine=0), 0.001,
                                                             [Event.REQUEST_RAMP])
    assert not out.results[0].accepted and "unknown G1 mode_machine 0" in out.results[0].reason
    cfg = ControlCfg(sim_mode_machine=0)
    assert Controller(cfg, load(files, "zero")).tick(state(mode_machine=0), 0.001,
                                                     [Event.REQUEST_RAMP]).mode is Mode.RAMP
    out = Controller(cfg, load(files, "zero")).tick(state(mode_machine=4), 0.001, [Event.REQUEST_RAMP])
    assert not out.results[0].accepted and "g1_23dof_rev_1_0" in out.results[0].reason


def test_no_policy_ramps_to_the_passive_pose_and_refuses_policy() -> None:
    c = Controller(ControlCfg(ramp_s=0.02))
    s = state(np.zeros(29))
    c.tick(s, 0.001, [Event.REQUEST_RAMP])
    out = c.tick(s, 0.001)
    close(out.command.q, DEFAULT_MOTOR)
    assert "no policy loaded" in c.tick(s, 0.001, [Event.REQUEST_POLICY]).results[0].reason


def test_velocity_and_tilt_faults_and_estop(files: dict) -> None:
    for bad in (state(dq=np.full(29, 60.0)), state(quat=(np.cos(0.6), np.sin(0.6), 0.0, 0.0)),
                state(buttons=("L2", "B"))):
        c = Controller(ControlCfg(ramp_s=0.02), load(files, "zero"))
        c.tick(state(), 0.001, [Event.REQUEST_RAMP])
        out = c.tick(bad, 0.001)
        assert out.mode is Mode.DAMPING, bad
    assert "velocity" in Controller(ControlCfg(), None).safety.state_fault(
        np.zeros(29), np.full(29, 60.0), np.array([1.0, 0, 0, 0]))


def test_estop_from_zero_torque_latches(files: dict) -> None:
    c = Controller(ControlCfg(), load(files, "zero"))
    assert c.tick(state(buttons=("L2", "B")), 0.001).mode is Mode.DAMPING
    assert c.tick(state(), 0.001).mode is Mode.DAMPING
    assert c.tick(state(buttons=("L2", "start")), 0.001).mode is Mode.ZERO_TORQUE


def test_torque_aware_clamp_in_hold(files: dict) -> None:
    c = Controller(ControlCfg(ramp_s=0.02), load(files, "zero"))
    c.tick(state(), 0.001, [Event.REQUEST_RAMP])
    c.tick(state(), 0.001)
    pushed = DEFAULT_MOTOR.copy()
    pushed[4] += 0.3  # left ankle pitch pushed 0.3 rad: reach = 50 / 20 = 2.5 rad, not clamped
    pushed[12] += 0.5  # waist yaw pushed 0.5 rad: reach = 88 / 400 = 0.22 rad -> clamped
    out = c.tick(state(pushed), 0.001)
    assert out.command.q[4] == pytest.approx(DEFAULT_MOTOR[4])
    assert out.command.q[12] == pytest.approx(DEFAULT_MOTOR[12] + 0.5 - 0.22)


def test_hot_swap_blends_and_resets_history(files: dict) -> None:
    c = Controller(ControlCfg(ramp_s=0.02), load(files, "zero"))
    s = state()
    c.tick(s, 0.001, [Event.REQUEST_RAMP])
    c.tick(s, 0.001)
    c.tick(s, 0.001, [Event.REQUEST_POLICY])
    c.tick(s, 0.001)
    new = load(files, "plus")
    c.stage(new, blend_ticks=4)
    assert c.swap_pending
    offsets = []
    for i in range(5):
        out = c.tick(s, 0.001)
        assert out.mode is Mode.POLICY
        offsets.append(out.q_target[0] - DEFAULT_MOTOR[0])
        if i == 0:
            assert c.policy is new and not c.swap_pending
            close(out.observation[:N], 0.0)  # last action reset
            close(out.observation[72:72 + 304], 0.0)  # history reset
    close(offsets, [0.025, 0.05, 0.075, 0.1, 0.1])
