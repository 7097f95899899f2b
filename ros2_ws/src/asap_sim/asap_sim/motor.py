"""The G1 joint drive: what each motor does with its latest LowCmd slot.

Per motor and physics step, as the real drive (and unitree_mujoco) computes it::

    tau = torque_scale * clip(kp_scale*kp*(q_cmd - q) + kd_scale*kd*(dq_cmd - dq) + tau_ff,
                              -effort_limit, effort_limit)

and ``tau = 0`` where ``mode == 0`` (motor off). The law runs inside MuJoCo (``asap_sim.model``'s drive
actuators, stepped in C by the twin and by every training backend); this module turns commands into the
actuators' ``ctrl`` (:func:`drive_ctrl`) and keeps the law in numpy (:func:`pd_torque`) as the reference
the engine is tested against. ``torque_scale`` and the effort limits are properties of the model (a
profile's motor strength); ``kp_scale``/``kd_scale`` travel in ctrl, so they may differ per environment.
Arrays have shape ``(..., 29)`` in ``g1.MOTOR_ORDER``. Actuation latency is whole physics steps.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from asap_core import g1
from asap_core.arrays import as_float, broadcast, concat, copy, namespace, where
from asap_sim.profiles import DynamicsProfile

EFFORT_LIMIT = g1.joint_array("effort_limit", g1.MOTOR_ORDER)
"""N m per joint, motor order (from asap_core.g1)."""


@dataclass(frozen=True, eq=False, kw_only=True)
class MotorCommand:
    """The body slots of a LowCmd as arrays of shape ``(..., 29)``, motor order."""

    mode: np.ndarray
    """0 = motor off (no torque), anything else = on."""
    q: np.ndarray
    """rad."""
    dq: np.ndarray
    """rad/s."""
    tau: np.ndarray
    """Feed-forward torque, N m."""
    kp: np.ndarray
    """N m/rad."""
    kd: np.ndarray
    """N m s/rad."""

    @classmethod
    def off(cls, batch: tuple[int, ...] = ()) -> MotorCommand:
        """Every motor off (what the robot does before any command arrives)."""
        zeros = np.zeros((*batch, g1.NUM_MOTORS))
        return cls(mode=zeros.copy(), q=zeros.copy(), dq=zeros.copy(), tau=zeros.copy(),
                   kp=zeros.copy(), kd=zeros)

    @classmethod
    def position(cls, q: np.ndarray, kp: np.ndarray, kd: np.ndarray) -> MotorCommand:
        """Every motor on, tracking ``q`` with zero velocity target and no feed-forward (numpy arrays,
        or torch tensors with ``kp``/``kd`` tensors too). ``kp``/``kd`` broadcast: shared, not copied."""
        q = as_float(q)
        xp = namespace(q)
        zeros = xp.zeros_like(q)
        return cls(mode=xp.ones_like(q), q=q, dq=zeros, tau=zeros, kp=xp.broadcast_to(kp, q.shape),
                   kd=xp.broadcast_to(kd, q.shape))


@dataclass(frozen=True, eq=False, kw_only=True)
class MotorParams:
    """How the drives scale the command's gains (from a dynamics profile, or randomized per environment);
    arrays broadcast to (..., 29)."""

    kp_scale: np.ndarray
    kd_scale: np.ndarray

    @classmethod
    def from_profile(cls, profile: DynamicsProfile) -> MotorParams:
        """The profile's kp/kd scales."""
        return cls(kp_scale=profile.kp_scale, kd_scale=profile.kd_scale)


def drive_ctrl(cmd: MotorCommand, params: MotorParams) -> np.ndarray:
    """The drive actuators' ctrl for ``cmd``: ``(..., 3*29)`` = ``[bias | kp | kd]`` (``asap_sim.model.
    DRIVE_TERMS``), ``bias = kp*q + kd*dq + tau``, gains scaled by ``params``, all zero where a motor is
    off (whatever else its slot holds). numpy arrays or torch tensors (:mod:`asap_core.arrays`)."""
    on = cmd.mode != 0
    kp = where(on, params.kp_scale * cmd.kp, 0.0)
    kd = where(on, params.kd_scale * cmd.kd, 0.0)
    bias = where(on, kp * cmd.q + kd * cmd.dq + cmd.tau, 0.0)
    return concat(broadcast(bias, kp, kd))


def pd_torque(cmd: MotorCommand, q: np.ndarray, dq: np.ndarray, params: MotorParams, *,
              torque_scale: np.ndarray | float = 1.0, effort_limit: np.ndarray = EFFORT_LIMIT) -> np.ndarray:
    """Joint torques (N m, shape of ``q``) the drives apply for ``cmd`` at joint state ``q``, ``dq``: the
    law in numpy, as the engine's drive actuators compute it from the same ctrl."""
    bias, kp, kd = np.split(drive_ctrl(cmd, params), 3, axis=-1)
    return torque_scale * np.clip(bias - kp * q - kd * dq, -effort_limit, effort_limit)


def hold_pd(
    ctrl: np.ndarray,
    sensed_q: np.ndarray,
    sensed_dq: np.ndarray,
    q: np.ndarray,
    dq: np.ndarray,
    out: np.ndarray,
    lag: float = 1.0,
) -> None:
    """One physics step of the held drive of Unitree's simulator (``unitree_mujoco``: the PD torque computed
    from the joint sensors when a command arrives, then held over the step). The sensors hold the state at
    the previous step's start (what MuJoCo's sensordata holds after ``mj_step``): writes into ``out`` the
    drive actuators' ctrl for a constant torque, the PD of ``ctrl`` (:func:`drive_ctrl`) at ``sensed_q``,
    ``sensed_dq``, with no feedback of its own (``[bias - kp*q_s - kd*dq_s | 0 | 0]``); then the sensors
    move on to ``q``, ``dq``, this step's start. numpy, ``(..., 3*29)`` and ``(..., 29)``, in place.

    ``lag``: the previous step's share of the state the PD reads (1: Unitree's simulator; 0: the PD of
    this step's start, held over the step; between: a blend, to move a policy toward the full lag)."""
    n = q.shape[-1]
    q_s, dq_s = (sensed_q, sensed_dq) if lag == 1.0 else (lag * sensed_q + (1.0 - lag) * q,
                                                         lag * sensed_dq + (1.0 - lag) * dq)
    out[..., :n] = ctrl[..., :n] - ctrl[..., n : 2 * n] * q_s - ctrl[..., 2 * n :] * dq_s
    out[..., n:] = 0.0
    sensed_q[...], sensed_dq[...] = q, dq


def latency_steps(latency_ms: float, physics_dt: float) -> int:
    """Whole physics steps nearest to a latency (e.g. 30 ms at dt 0.002 s = 15 steps)."""
    return round(latency_ms / 1000.0 / physics_dt)


class ControlDelay:
    """Actuation latency of ``steps`` physics steps for ctrl that changes every ``substeps`` physics steps.

    Push the ctrl of each period (one twin state: ``substeps=1``; one policy step of a training batch:
    ``substeps=decimation``); it answers which ctrl acts during that period's physics steps. A latency
    spans at most two ctrl per period (the end of an older one, then a newer one), so a batch is stepped in
    C for each piece. Before the first ctrl arrives the motors are off (zero ctrl).
    """

    def __init__(self, steps: int, substeps: int, off: np.ndarray) -> None:
        """``off``: the ctrl acting before the first one arrives (zeros of the ctrl's shape and kind)."""
        if steps < 0 or substeps < 1:
            raise ValueError(f"latency steps must be >= 0 and substeps >= 1, got {steps}, {substeps}")
        self.substeps = substeps
        self.off = off
        self._late, self._split = divmod(steps, substeps)  # whole policy steps late, then physics steps
        self._history: deque[np.ndarray] = deque([off] * (self._late + 2), maxlen=self._late + 2)

    def clear(self, rows: np.ndarray, recent: Sequence[np.ndarray] = ()) -> None:
        """The batch entries ``rows`` start over, their motors off until their next ctrl arrives: a reset
        env of a batch must not receive the ctrl its previous episode left in flight. ``recent``: the ctrl
        they were sent before instead (one per period, oldest first, each of the batch's shape; the oldest
        held before it), acting through the latency as they would have: a start at a recorded state whose
        commands were in flight."""
        size = len(self._history)
        for k, ctrl in enumerate(self._history):
            ctrl = copy(ctrl)  # an entry may be a read-only broadcast view, or shared with other periods
            # entry k is (size - k) periods old: recent[-1] is one period old
            ctrl[rows] = recent[max(len(recent) - (size - k), 0)][rows] if recent else self.off[rows]
            self._history[k] = ctrl

    def push(self, ctrl: np.ndarray) -> list[tuple[np.ndarray, int]]:
        """Enqueue this policy step's ctrl; return ``(ctrl, physics steps)`` pieces that reach the motors
        during its ``substeps`` physics steps, in order."""
        self._history.append(ctrl)
        newer = self._history[-1 - self._late]
        if not self._split:
            return [(newer, self.substeps)]
        return [(self._history[-2 - self._late], self._split), (newer, self.substeps - self._split)]
