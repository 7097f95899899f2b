"""The G1 joint drive as pure numpy, batched: what each motor does with its latest LowCmd slot.

Per motor and physics step, as the real drive (and unitree_mujoco) computes it::

    tau = torque_scale * clip(kp_scale*kp*(q_cmd - q) + kd_scale*kd*(dq_cmd - dq) + tau_ff,
                              -effort_limit, effort_limit)

and ``tau = 0`` where ``mode == 0`` (motor off). Arrays have shape ``(..., 29)`` in
``g1.MOTOR_ORDER``: one robot is ``(29,)``, a batch of N environments ``(N, 29)``; the parameters
broadcast, so they may be per joint ``(29,)`` or per environment ``(N, 29)``. Actuation latency is
a :class:`CommandDelay` in whole physics steps.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from asap_core import g1
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
        """Every motor on, tracking ``q`` with zero velocity target and no feed-forward."""
        q = np.asarray(q, dtype=np.float64)
        zeros = np.zeros_like(q)
        return cls(mode=np.ones_like(q), q=q, dq=zeros, tau=zeros.copy(),
                   kp=np.broadcast_to(kp, q.shape).copy(), kd=np.broadcast_to(kd, q.shape).copy())


@dataclass(frozen=True, eq=False, kw_only=True)
class MotorParams:
    """How the drives differ from the command (from a dynamics profile); arrays broadcast to (..., 29)."""

    kp_scale: np.ndarray
    kd_scale: np.ndarray
    torque_scale: np.ndarray
    effort_limit: np.ndarray = field(default_factory=EFFORT_LIMIT.copy)
    """N m."""

    @classmethod
    def from_profile(cls, profile: DynamicsProfile) -> MotorParams:
        """The profile's kp/kd/torque scales with the G1 effort limits."""
        return cls(kp_scale=profile.kp_scale, kd_scale=profile.kd_scale,
                   torque_scale=profile.torque_scale)


class DriveLaw:
    """:func:`pd_torque` for one command, with everything that does not depend on the joint state
    folded in once: per physics step only ``bias - kp*q - kd*dq``, the clip and the scale remain
    (the drives hold one command for many physics steps: 4-10 per 50 Hz policy tick in training,
    one per state in the twin)."""

    __slots__ = ("bias", "gain", "kd", "kp", "limit")

    def __init__(self, cmd: MotorCommand, params: MotorParams) -> None:
        on = cmd.mode != 0  # a motor that is off applies nothing, whatever else its slot holds
        self.kp = np.where(on, params.kp_scale * cmd.kp, 0.0)
        self.kd = np.where(on, params.kd_scale * cmd.kd, 0.0)
        self.bias = np.where(on, self.kp * cmd.q + self.kd * cmd.dq + cmd.tau, 0.0)
        self.gain = np.where(on, params.torque_scale, 0.0)
        self.limit = params.effort_limit

    def torque(self, q: np.ndarray, dq: np.ndarray) -> np.ndarray:
        """Joint torques (N m, shape of ``q``) at joint state ``q``, ``dq``."""
        tau = self.bias - self.kp * q
        tau -= self.kd * dq
        return self.gain * np.minimum(np.maximum(tau, -self.limit), self.limit)


def pd_torque(cmd: MotorCommand, q: np.ndarray, dq: np.ndarray, params: MotorParams) -> np.ndarray:
    """Joint torques (N m, shape of ``q``) the drives apply for ``cmd`` at joint state ``q``, ``dq``."""
    return DriveLaw(cmd, params).torque(q, dq)


def latency_steps(latency_ms: float, physics_dt: float) -> int:
    """Whole physics steps nearest to a latency (e.g. 30 ms at dt 0.002 s = 15 steps)."""
    return round(latency_ms / 1000.0 / physics_dt)


class CommandDelay:
    """A FIFO that hands back the command pushed ``steps`` pushes ago (push once per physics step).

    Until ``steps`` commands have gone through, it returns ``initial`` (motors off by default).
    """

    def __init__(self, steps: int, initial: MotorCommand | None = None) -> None:
        if steps < 0:
            raise ValueError(f"latency steps must be >= 0, got {steps}")
        self.steps = steps
        first = initial if initial is not None else MotorCommand.off()
        self._queue: deque[MotorCommand] = deque([first] * steps, maxlen=steps + 1)

    def push(self, cmd: MotorCommand) -> MotorCommand:
        """Enqueue ``cmd`` and return the one that reaches the motors now."""
        self._queue.append(cmd)
        return self._queue.popleft()
