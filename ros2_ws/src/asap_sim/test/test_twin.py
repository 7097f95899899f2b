"""The ROS-free twin: band, standing, determinism, sensor content, and every shipped profile's gap."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from asap_core import g1
from asap_core.artifact import load_artifact
from asap_core.control import ControlCfg, Controller, LoadedPolicy
from asap_core.modes import Event, Mode
from asap_core.testing import policies
from asap_sim.motor import MotorCommand, MotorParams, pd_torque
from asap_sim.node_tick import node_tick
from asap_sim.profiles import load_profile, shipped_profiles
from asap_sim.twin import Twin, TwinConfig, quat_to_rpy

STEPS_PER_S = 500
ANKLES = [i for i, n in enumerate(g1.MOTOR_ORDER) if "ankle" in n]


def _hold_pose(twin: Twin, pose: str, gains: str) -> None:
    kp, kd = g1.gains(g1.MOTOR_ORDER, gains)
    twin.set_command(MotorCommand.position(g1.default_pose(g1.MOTOR_ORDER, pose), kp, kd))


def test_quat_to_rpy_hand_values() -> None:
    half = np.pi / 8  # 45 deg about one axis: (cos 22.5, sin 22.5 along the axis)
    c, s = np.cos(half), np.sin(half)
    np.testing.assert_allclose(quat_to_rpy(np.array([c, s, 0, 0])), [np.pi / 4, 0, 0], atol=1e-12)
    np.testing.assert_allclose(quat_to_rpy(np.array([c, 0, s, 0])), [0, np.pi / 4, 0], atol=1e-12)
    np.testing.assert_allclose(quat_to_rpy(np.array([c, 0, 0, s])), [0, 0, np.pi / 4], atol=1e-12)


def test_initial_state_is_a_robot_at_rest_on_its_feet() -> None:
    twin = Twin()
    s = twin.read_state()
    assert s.tick == 0 and s.band_held
    np.testing.assert_array_equal(s.q, g1.default_pose(g1.MOTOR_ORDER, "asap"))
    _hold_pose(twin, "asap", "asap")
    twin.step(STEPS_PER_S)  # the band and the floor carry it, the drives hold the pose
    s = twin.read_state()
    assert s.tick == 1000
    np.testing.assert_allclose(s.q, g1.default_pose(g1.MOTOR_ORDER, "asap"), atol=0.12)  # wrists kp 4 sag
    np.testing.assert_allclose(s.imu_quat_wxyz, [1, 0, 0, 0], atol=0.02)
    np.testing.assert_allclose(s.acc_b, [0, 0, 9.81], atol=0.3)  # specific force at rest: gravity up
    assert s.foot_contact.all()


def test_band_holds_a_robot_with_motors_off() -> None:
    twin = Twin()
    z0 = twin.read_state().base_pos_w[2]
    twin.step(2 * STEPS_PER_S)
    s = twin.read_state()
    assert abs(s.base_pos_w[2] - z0) < 0.05 and np.abs(s.rpy[:2]).max() < 0.3


def test_released_robot_with_motors_off_collapses() -> None:
    twin = Twin()
    z0 = twin.read_state().base_pos_w[2]
    twin.release_band()
    twin.step(STEPS_PER_S)
    assert twin.read_state().base_pos_w[2] < z0 - 0.3


def test_hold_catches_a_falling_robot_where_it_is() -> None:
    twin = Twin()
    twin.release_band()
    twin.step(STEPS_PER_S // 5)
    caught = twin.read_state().base_pos_w.copy()
    twin.hold_band()
    twin.step(2 * STEPS_PER_S)
    s = twin.read_state()
    assert np.isfinite(s.q).all() and s.band_held
    assert np.abs(s.base_pos_w - caught).max() < 0.05 and np.abs(s.rpy[:2]).max() < 0.3


def test_reset_keeping_time_puts_a_fallen_robot_back_in_the_band() -> None:
    twin = Twin(config=TwinConfig(band_held=False))
    start = twin.read_state()
    twin.step(STEPS_PER_S)  # motors off, no band: it collapses
    fallen = twin.read_state()
    assert fallen.base_pos_w[2] < start.base_pos_w[2] - 0.3
    twin.reset(keep_time=True, band_held=True)
    s = twin.read_state()
    assert s.tick == fallen.tick and s.band_held  # time runs on, ticks never go back
    np.testing.assert_array_equal(s.base_pos_w, start.base_pos_w)
    np.testing.assert_array_equal(s.q, start.q)
    assert not s.dq.any() and not s.base_lin_vel_w.any()
    twin.step(STEPS_PER_S)
    assert abs(twin.read_state().base_pos_w[2] - start.base_pos_w[2]) < 0.05  # the band holds it
    twin.reset()  # the default: the clock back to 0 and the band as configured
    assert twin.read_state().tick == 0 and not twin.band_held


def test_stance_gains_stand_10_s_released() -> None:
    """BeyondMimic's standby (its pose with stiff hold gains) stands unassisted."""
    twin = Twin(config=TwinConfig(initial_pose="beyondmimic"))
    _hold_pose(twin, "beyondmimic", "stiff_hold")
    twin.step(STEPS_PER_S // 2)
    z0 = twin.read_state().base_pos_w[2]
    twin.release_band()
    twin.step(10 * STEPS_PER_S)
    assert abs(twin.read_state().base_pos_w[2] - z0) < 0.05


def test_asap_gains_alone_do_not_balance_the_asap_pose() -> None:
    """Physics, not a twin bug: ankle kp 20 N m/rad cannot hold a CoM ~5 cm ahead of the ankles.

    The ASAP policy balances actively; a plain PD on its default pose tips over within seconds.
    If this ever stands, the twin has become unrealistically stiff.
    """
    twin = Twin()
    _hold_pose(twin, "asap", "asap")
    twin.step(STEPS_PER_S // 2)
    z0 = twin.read_state().base_pos_w[2]
    twin.release_band()
    twin.step(3 * STEPS_PER_S)
    assert twin.read_state().base_pos_w[2] < z0 - 0.3


def _noisy_rollout(seed: int | None) -> list[np.ndarray]:
    twin = Twin(load_profile("latency"), TwinConfig(seed=seed))
    rng = np.random.default_rng(123)
    kp, kd = g1.gains(g1.MOTOR_ORDER, "asap")
    out = []
    for _ in range(20):
        q = g1.default_pose(g1.MOTOR_ORDER, "asap") + rng.uniform(-0.1, 0.1, g1.NUM_MOTORS)
        twin.set_command(MotorCommand.position(q, kp, kd))
        twin.step(5)
        s = twin.read_state()
        out.append(np.concatenate([s.q, s.dq, s.gyro_b, s.acc_b, s.tau_est]))
    return out


def test_same_seed_same_commands_same_states() -> None:
    a, b = _noisy_rollout(None), _noisy_rollout(None)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    c = _noisy_rollout(99)
    assert not np.array_equal(a[-1], c[-1]), "the seed does not reach the sensor noise"


def test_sensor_noise_lands_on_each_channel_with_its_own_std(tmp_path) -> None:
    """One draw per state feeds four channels: each must get its profile's std (read without stepping,
    the spread of the readings is the noise alone)."""
    path = tmp_path / "noisy.yaml"
    path.write_text("joint_pos_noise_std: 0.01\njoint_vel_noise_std: 0.2\ngyro_noise_std: 0.05\n"
                    "accelerometer_noise_std: 0.5\n")
    twin = Twin(load_profile(str(path)), TwinConfig(seed=3))
    reads = [twin.read_state() for _ in range(3000)]
    for field, std in (("q", 0.01), ("dq", 0.2), ("gyro_b", 0.05), ("acc_b", 0.5)):
        spread = np.std([getattr(r, field) for r in reads], axis=0)
        np.testing.assert_allclose(spread, std, rtol=0.1, err_msg=field)


def test_a_new_command_drives_the_motors_from_the_next_step() -> None:
    """The drive law is built once per command: a new command must replace it at once."""
    twin = Twin(config=TwinConfig(lift=0.15))
    q0 = g1.default_pose(g1.MOTOR_ORDER, "asap")
    kp, kd = g1.gains(g1.MOTOR_ORDER, "asap")
    twin.set_command(MotorCommand.position(q0, kp, kd))
    twin.step(10)
    for offset in (0.1, -0.05):
        q, dq = twin.data.qpos[twin.idx.qpos].copy(), twin.data.qvel[twin.idx.qvel].copy()
        command = MotorCommand.position(q0 + offset, kp, kd)
        twin.set_command(command)
        twin.step(1)
        expected = pd_torque(command, q, dq, MotorParams.from_profile(twin.profile),
                             torque_scale=twin.profile.torque_scale)
        np.testing.assert_allclose(twin.read_state().tau_est, expected, rtol=1e-12, atol=1e-9)


def test_held_drive_acts_on_the_previous_steps_sensors() -> None:
    """Unitree's simulator: each step's torque is the PD of the joint state at the start of the step
    before (what MuJoCo's sensors hold after that step), held; the engine drive uses the current one."""
    torques = {}
    for drive in ("engine", "held"):
        twin = Twin(config=TwinConfig(lift=0.15, physics_dt=0.005, drive=drive))
        q0 = g1.default_pose(g1.MOTOR_ORDER, "asap")
        kp, kd = g1.gains(g1.MOTOR_ORDER, "asap")
        command = MotorCommand.position(q0 + 0.1, kp, kd)
        twin.set_command(command)
        starts, applied = [], []
        for _ in range(4):
            starts.append((twin.data.qpos[twin.idx.qpos].copy(), twin.data.qvel[twin.idx.qvel].copy()))
            twin.step(1)
            applied.append(twin.read_state().tau_est)
        law = MotorParams.from_profile(twin.profile)
        sensed = [starts[0], *starts[:-1]] if drive == "held" else starts  # held: one step late
        for (q, dq), tau in zip(sensed, applied, strict=True):
            expected = pd_torque(command, q, dq, law, torque_scale=twin.profile.torque_scale)
            np.testing.assert_allclose(tau, expected, rtol=1e-12, atol=1e-9)
        torques[drive] = np.array(applied)
    assert np.abs(torques["held"][2:] - torques["engine"][2:]).max() > 1.0  # N m: the delay shows


def _ringing_after_a_kick(drive: str, physics_dt: float, gains: str, pose: str) -> float:
    """In the band, no policy: hold ``pose`` with a gain set for 0.5 s, add a joint-velocity kick (1 rad/s
    RMS, seeded), then the RMS over 0.2-1 s after it of the largest |dq| of any joint (rad/s)."""
    twin = Twin(config=TwinConfig(physics_dt=physics_dt, drive=drive, initial_pose=pose))
    _hold_pose(twin, pose, gains)
    twin.step(round(0.5 / physics_dt))
    twin.data.qvel[twin.idx.qvel] += np.random.default_rng(0).normal(0.0, 1.0, g1.NUM_MOTORS)
    peaks = []
    for k in range(round(1.0 / physics_dt)):
        twin.step(1)
        if k * physics_dt >= 0.2:
            peaks.append(np.abs(twin.read_state().dq).max())
    return float(np.sqrt(np.mean(np.square(peaks))))


@pytest.mark.parametrize("pose", ["asap", "beyondmimic"])
def test_the_held_drive_at_5_ms_rings_with_asap_gains_and_settles_with_its_own(pose: str) -> None:
    """Why the shipped policy's HOLD asks hundreds of N m on Unitree's simulator at its default 5 ms and not
    at 2 ms: the one-step-late PD is itself unstable with ASAP's kd (hip and waist pitch ring at ~25 Hz,
    tens of rad/s, with a constant command). The ``unitree_mujoco_5ms`` gain set settles a kick there
    within 25 % of ASAP's gains on the G1's own drive (PD every 2 ms; measured: 0.48 vs 0.41 rad/s at
    ASAP's pose, 0.55 vs 0.62 at BeyondMimic's)."""
    on_the_robot = _ringing_after_a_kick("engine", 0.002, "asap", pose)
    assert on_the_robot < 1.0
    assert _ringing_after_a_kick("held", 0.005, "asap", pose) > 10.0
    assert _ringing_after_a_kick("held", 0.002, "asap", pose) < 1.0
    assert _ringing_after_a_kick("held", 0.005, "unitree_mujoco_5ms", pose) < 1.25 * on_the_robot


def _hold_on_the_held_drive_at_5_ms(policy_file: Path, hold_gains: str) -> tuple[float, float]:
    """The node's tick (asap_core.control) takes the twin in the band, on the held drive at 5 ms, through
    RAMP into HOLD and holds 2 s: (the largest torque the drives applied in HOLD as a share of the
    joint's effort limit, where they clip it: 1 = saturated; the largest |dq| in HOLD in rad/s)."""
    twin = Twin(config=TwinConfig(physics_dt=0.005, drive="held"))
    control = Controller(ControlCfg(hold_gains=hold_gains), LoadedPolicy(load_artifact(policy_file)))
    limit = g1.joint_array("effort_limit", g1.MOTOR_ORDER)
    torque_share, speed = 0.0, 0.0
    requests = [Event.REQUEST_ZERO_TORQUE, Event.REQUEST_ZERO_TORQUE, Event.REQUEST_RAMP]
    hold_ticks = 0
    while hold_ticks < 100:
        out = node_tick(control, twin, twin.read_state(), requests.pop(0) if requests else None)
        assert out.mode is not Mode.DAMPING, control.fault
        for _ in range(4):  # 20 ms of 5 ms steps
            twin.step(1)
            if out.mode is Mode.HOLD:
                state = twin.read_state()
                torque_share = max(torque_share, float((np.abs(state.tau_est) / limit).max()))
                speed = max(speed, float(np.abs(state.dq).max()))
        hold_ticks += out.mode is Mode.HOLD
    return torque_share, speed


def test_hold_on_unitree_sims_5_ms_drive_with_its_gain_set(tmp_path: Path) -> None:
    """What issue 19 saw on Unitree's simulator (HOLD asking 240-300 N m of a knee): the node's HOLD with
    the policy's (ASAP's) gains rings the one-step-late PD into the joints' effort limits (24 rad/s), and
    the ``unitree_mujoco_5ms`` gain set (the unitree_mujoco bringup profile's ``hold_gains``) holds the
    pose still (0.01 rad/s) at a tenth of them."""
    policy = policies.write(tmp_path / "zero.onnx", policies.constant(len(g1.names("asap23")), 0.0))
    share, speed = _hold_on_the_held_drive_at_5_ms(policy, "policy")
    assert share > 0.99 and speed > 10.0
    share, speed = _hold_on_the_held_drive_at_5_ms(policy, "unitree_mujoco_5ms")
    assert share < 0.5 and speed < 0.5


def _step_response(profile_name: str) -> np.ndarray:
    """On the gantry (feet in the air): hold the ASAP pose, step every joint +0.2 rad, record true q."""
    twin = Twin(load_profile(profile_name), TwinConfig(lift=0.15))
    q0 = g1.default_pose(g1.MOTOR_ORDER, "asap")
    kp, kd = g1.gains(g1.MOTOR_ORDER, "asap")
    twin.set_command(MotorCommand.position(q0, kp, kd))
    twin.step(STEPS_PER_S // 4)
    twin.set_command(MotorCommand.position(q0 + 0.2, kp, kd))
    trace = []
    for _ in range(STEPS_PER_S // 4):
        twin.step(1)
        trace.append(twin.data.qpos[twin.idx.qpos] - (q0 + 0.2))
    return np.array(trace)


@pytest.fixture(scope="module")
def nominal_response() -> np.ndarray:
    return _step_response("nominal")


@pytest.mark.parametrize("name", [n for n in shipped_profiles() if n != "nominal"])
def test_every_shipped_profile_changes_the_dynamics(name: str, nominal_response: np.ndarray) -> None:
    deviation = np.abs(_step_response(name) - nominal_response).max()
    assert deviation > 0.01, f"{name}: the step response differs from nominal by only {deviation:.4f} rad"


def test_weak_ankles_track_a_step_worse(nominal_response: np.ndarray) -> None:
    rise = slice(0, STEPS_PER_S // 25)  # the first 40 ms: half the torque, a slower rise
    weak = np.abs(_step_response("weak_ankles")[rise, ANKLES]).mean()
    nominal = np.abs(nominal_response[rise, ANKLES]).mean()
    assert weak > 1.25 * nominal, f"ankle tracking error {weak:.4f} vs nominal {nominal:.4f} rad"


def test_latency_delays_the_response(nominal_response: np.ndarray) -> None:
    def quarter_rise_ms(err: np.ndarray) -> float:
        progress = (err - err[0]).mean(axis=1) / 0.2  # 0 at the step, 1 when every joint arrived
        return 2.0 * (int(np.argmax(progress > 0.25)) + 1)

    delayed, nominal = quarter_rise_ms(_step_response("latency")), quarter_rise_ms(nominal_response)
    assert 25.0 <= delayed - nominal <= 40.0, f"quarter rise at {delayed} ms vs nominal {nominal} ms"
