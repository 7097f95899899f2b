"""The drive model against hand-computed numbers: PD law, scaling, clipping, motor off, latency."""

from __future__ import annotations

import numpy as np
import pytest

from asap_core import g1
from asap_sim.motor import (
    EFFORT_LIMIT,
    ControlDelay,
    MotorCommand,
    MotorParams,
    drive_ctrl,
    hold_pd,
    latency_steps,
    pd_torque,
)

KNEE = g1.MOTOR_ORDER.index("left_knee_joint")  # effort limit 139 N m
ANKLE = g1.MOTOR_ORDER.index("left_ankle_pitch_joint")  # effort limit 50 N m
ONES = np.ones(g1.NUM_MOTORS)


def _command(q=0.0, dq=0.0, tau=0.0, kp=0.0, kd=0.0, mode=1.0) -> MotorCommand:
    return MotorCommand(mode=mode * ONES, q=q * ONES, dq=dq * ONES, tau=tau * ONES, kp=kp * ONES,
                        kd=kd * ONES)


def _params(kp_scale=1.0, kd_scale=1.0) -> MotorParams:
    return MotorParams(kp_scale=kp_scale * ONES, kd_scale=kd_scale * ONES)


def test_pd_law() -> None:
    # 10*(1 - 0.5) + 2*(0 - 1) + 3 = 5 - 2 + 3 = 6 N m
    tau = pd_torque(_command(q=1.0, tau=3.0, kp=10.0, kd=2.0), 0.5 * ONES, ONES, _params())
    assert tau[KNEE] == pytest.approx(6.0)


def test_profile_scales() -> None:
    # 0.5 * (2*10*0.5 + 0.5*2*(0 - 1) + 3) = 0.5 * (10 - 1 + 3) = 6 N m
    tau = pd_torque(_command(q=1.0, tau=3.0, kp=10.0, kd=2.0), 0.5 * ONES, ONES,
                    _params(kp_scale=2.0, kd_scale=0.5), torque_scale=0.5)
    assert tau[KNEE] == pytest.approx(6.0)


def test_clipped_to_effort_limit_then_scaled() -> None:
    # 1000*(1 - 0) = 1000 -> clip to 139 (knee) / 50 (ankle); torque_scale 0.5 halves the cap
    tau = pd_torque(_command(q=1.0, kp=1000.0), 0 * ONES, 0 * ONES, _params())
    assert tau[KNEE] == pytest.approx(139.0) and tau[ANKLE] == pytest.approx(50.0)
    assert np.all(np.abs(tau) <= EFFORT_LIMIT)
    weak = pd_torque(_command(q=-1.0, kp=1000.0), 0 * ONES, 0 * ONES, _params(), torque_scale=0.5)
    assert weak[ANKLE] == pytest.approx(-25.0)


def test_mode_zero_is_off() -> None:
    tau = pd_torque(_command(q=1.0, tau=5.0, kp=10.0, mode=0.0), 0 * ONES, ONES, _params())
    assert np.all(tau == 0.0)
    assert not drive_ctrl(_command(q=1.0, tau=5.0, kp=10.0, kd=1.0, mode=0.0), _params()).any()


def test_drive_ctrl_layout() -> None:
    # bias = kp*q + kd*dq + tau = 20*1 + 1*2 + 3 = 25 (kp scaled 2x)
    ctrl = drive_ctrl(_command(q=1.0, dq=2.0, tau=3.0, kp=10.0, kd=1.0), _params(kp_scale=2.0))
    n = g1.NUM_MOTORS
    assert ctrl.shape == (3 * n,)
    np.testing.assert_allclose(ctrl[:n], 25.0)
    np.testing.assert_allclose(ctrl[n : 2 * n], 20.0)
    np.testing.assert_allclose(ctrl[2 * n :], 1.0)


def test_batched_with_per_env_parameters() -> None:
    n = 4
    cmd = MotorCommand.position(np.ones((n, g1.NUM_MOTORS)), kp=10.0 * ONES, kd=0.0 * ONES)
    kp_scale = np.linspace(0.25, 1.0, n)[:, None] * np.ones((n, g1.NUM_MOTORS))
    params = MotorParams(kp_scale=kp_scale, kd_scale=ONES)
    tau = pd_torque(cmd, np.zeros((n, g1.NUM_MOTORS)), np.zeros((n, g1.NUM_MOTORS)), params)
    assert tau.shape == (n, g1.NUM_MOTORS) and drive_ctrl(cmd, params).shape == (n, 3 * g1.NUM_MOTORS)
    np.testing.assert_allclose(tau[:, KNEE], 10.0 * np.linspace(0.25, 1.0, n))


def test_off_command_has_batch_shape() -> None:
    off = MotorCommand.off(batch=(3,))
    assert off.q.shape == (3, g1.NUM_MOTORS) and not off.mode.any()


@pytest.mark.parametrize(("ms", "dt", "steps"), [(0.0, 0.002, 0), (30.0, 0.002, 15), (20.0, 0.005, 4),
                                                 (3.0, 0.002, 2)])
def test_latency_steps(ms: float, dt: float, steps: int) -> None:
    assert latency_steps(ms, dt) == steps


def _per_physics_step(ctrls: list[np.ndarray], steps: int, substeps: int) -> list[float]:
    """What reaches the motors at each physics step, by definition: the ctrl pushed ``steps`` physics
    steps earlier (each ctrl holds for ``substeps``), zero before the first."""
    held = [c[0] for c in ctrls for _ in range(substeps)]
    return [0.0] * steps + held[: len(held) - steps]


@pytest.mark.parametrize(("steps", "substeps"), [(0, 1), (3, 1), (0, 4), (3, 4), (4, 4), (9, 4), (15, 10)])
def test_control_delay_matches_the_per_physics_step_definition(steps: int, substeps: int) -> None:
    ctrls = [np.full(3, float(i + 1)) for i in range(8)]
    delay = ControlDelay(steps, substeps, np.zeros(3))
    applied = []
    for c in ctrls:
        pieces = delay.push(c)
        assert 1 <= len(pieces) <= 2 and sum(n for _, n in pieces) == substeps
        applied += [float(ctrl[0]) for ctrl, n in pieces for _ in range(n)]
    assert applied == _per_physics_step(ctrls, steps, substeps)


def test_cleared_rows_start_over_as_a_new_delay_line() -> None:
    """A reset env gets no ctrl its last episode left in flight; the other envs keep theirs."""
    steps, substeps = 5, 4  # one whole period late, then one physics step
    delay, fresh = (ControlDelay(steps, substeps, np.zeros((3, 2))) for _ in range(2))
    for i in range(3):
        delay.push(np.broadcast_to(np.full(2, float(i + 1)), (3, 2)))  # read-only, as a batch pushes
    delay.clear(np.array([1]))
    new = np.full((3, 2), 9.0)
    pieces = delay.push(new)
    assert [n for _, n in pieces] == [1, 3]
    assert [float(c[1, 0]) for c, _ in pieces] == [float(c[1, 0]) for c, _ in fresh.push(new)] == [0.0, 0.0]
    assert [float(c[0, 0]) for c, _ in pieces] == [2.0, 3.0]  # untouched rows: still one period late


def test_cleared_rows_can_start_with_the_ctrl_sent_before_them() -> None:
    """A row cleared with the ctrl it was sent before (oldest first) goes on as a delay line that was
    pushed those; with fewer than the line holds, the oldest one given was held before it."""
    steps, substeps = 5, 4  # one whole period late, then one physics step: pieces of 2 older ctrl
    ctrl = lambda v: np.broadcast_to(np.full(2, float(v)), (3, 2))  # noqa: E731
    delay = ControlDelay(steps, substeps, np.zeros((3, 2)))
    for i in range(3):
        delay.push(ctrl(i + 1))
    delay.clear(np.array([1]), [ctrl(7), ctrl(8)])
    delay.clear(np.array([2]), [ctrl(8)])
    two, one = (ControlDelay(steps, substeps, np.zeros((3, 2))) for _ in range(2))
    for c in (7, 8):
        two.push(ctrl(c))
    for c in (8, 8):
        one.push(ctrl(c))
    pieces = delay.push(ctrl(9))
    assert [float(c[1, 0]) for c, _ in pieces] == [float(c[1, 0]) for c, _ in two.push(ctrl(9))] == [7.0, 8.0]
    assert [float(c[2, 0]) for c, _ in pieces] == [float(c[2, 0]) for c, _ in one.push(ctrl(9))] == [8.0, 8.0]
    assert [float(c[0, 0]) for c, _ in pieces] == [2.0, 3.0]  # untouched rows: still one period late


def test_zero_delay_is_pass_through() -> None:
    ctrl = np.ones(3)
    assert ControlDelay(0, 10, np.zeros(3)).push(ctrl) == [(ctrl, 10)]


def test_negative_delay_rejected() -> None:
    with pytest.raises(ValueError, match=">= 0"):
        ControlDelay(-1, 1, np.zeros(3))


def test_drive_ctrl_on_torch_tensors_equals_numpy() -> None:
    """Training computes the ctrl of a batch on its device with the same function."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    n = g1.NUM_MOTORS
    cmd = MotorCommand(mode=(rng.random((4, n)) > 0.3) * 1.0, q=rng.normal(size=(4, n)),
                       dq=rng.normal(size=(4, n)), tau=rng.normal(size=(4, n)), kp=rng.uniform(0, 100, n),
                       kd=rng.uniform(0, 5, n))
    params = MotorParams(kp_scale=rng.uniform(0.9, 1.1, (4, n)), kd_scale=rng.uniform(0.9, 1.1, n))
    as_torch = lambda obj: type(obj)(**{k: torch.as_tensor(v) for k, v in vars(obj).items()})  # noqa: E731
    got = drive_ctrl(as_torch(cmd), as_torch(params))
    assert isinstance(got, torch.Tensor) and got.shape == (4, 3 * n)
    np.testing.assert_allclose(got.numpy(), drive_ctrl(cmd, params), atol=1e-12)


def test_the_held_drives_lag_blends_the_sensed_state_with_this_steps() -> None:
    """lag 1: the PD of the previous step's sensors (Unitree's simulator); 0: of this step's start; 0.25:
    a quarter of the way back. Hand-computed on one joint: ctrl = [kp*q* | kp | kd], q* = 0.5, kp = 10,
    kd = 2."""
    ctrl = np.array([5.0, 10.0, 2.0])  # bias kp*q*, kp, kd
    for lag, expected in ((1.0, 5.0 - 10.0 * 0.1 - 2.0 * 1.0), (0.0, 5.0 - 10.0 * 0.3 - 2.0 * 3.0),
                          (0.25, 5.0 - 10.0 * 0.25 - 2.0 * 2.5)):
        sensed_q, sensed_dq, out = np.array([0.1]), np.array([1.0]), np.zeros(3)
        hold_pd(ctrl, sensed_q, sensed_dq, np.array([0.3]), np.array([3.0]), out, lag)
        assert out == pytest.approx([expected, 0.0, 0.0])
        assert sensed_q[0] == 0.3 and sensed_dq[0] == 3.0  # the sensors move on to this step either way
