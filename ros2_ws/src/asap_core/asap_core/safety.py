"""The safety layer between a policy and the motors: target clamps, state detectors, watchdog.

Pure functions over numpy arrays plus :class:`SafetyFilter`, which binds them to a joint list
(limits from ``asap_core.g1``) once. Detectors return a cause string ("" = fine) so the node can
latch DAMPING and log the cause once; nothing here raises at run time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from asap_core import g1


@dataclass(frozen=True, kw_only=True)
class SafetyCfg:
    """Thresholds of the safety layer."""

    stale_warn_s: float = 0.010
    """LowState older than this is reported (WARN)."""
    stale_damp_s: float = 0.050
    """LowState older than this (or none at all) trips DAMPING in an active mode."""
    velocity_limit_factor: float = 1.5
    """Trip when any |dq| exceeds this multiple of the joint's rated velocity limit."""
    max_tilt_rad: float = 1.0
    """Trip when the pelvis z axis leans further than this from vertical."""
    position_margin_rad: float = 0.0
    """Targets are clamped into [lower + margin, upper - margin]."""


class Staleness(IntEnum):
    """How old the newest LowState is."""

    FRESH = 0
    WARN = 1
    STALE = 2


def staleness(age_s: float | None, cfg: SafetyCfg) -> Staleness:
    """Classify the age of the newest LowState (None: none received yet).

    A negative age beyond ``stale_damp_s`` means the state was received before the (sim) clock
    jumped back: its real age is unknown, so it counts as stale (a dead robot must not look fresh
    until sim time catches up). Small negative ages are receive-time races and count as fresh."""
    if age_s is None or not np.isfinite(age_s) or abs(age_s) > cfg.stale_damp_s:
        return Staleness.STALE
    return Staleness.WARN if age_s > cfg.stale_warn_s else Staleness.FRESH


def non_finite(names: Sequence[str], values: np.ndarray) -> list[str]:
    """Names whose value is NaN or infinite."""
    return [names[int(i)] for i in np.flatnonzero(~np.isfinite(values))]


def clamp_torque_aware(q_des: np.ndarray, q: np.ndarray, kp: np.ndarray, effort_limit: np.ndarray,
                       kd: np.ndarray, dq: np.ndarray) -> np.ndarray:
    """Keep kp·|q_des - q| + kd·|dq| <= effort_limit, so the PD never asks more than the motor can give.

    The damping term counts whatever its sign: when a joint moves fast, the stiffness gets only the
    torque the damping leaves, and at kd·|dq| >= effort_limit the target collapses onto the measured
    q (pure damping). Joints with kp <= 0 are not position-controlled and pass through.
    """
    budget = np.maximum(effort_limit - kd * np.abs(dq), 0.0)
    with np.errstate(divide="ignore"):
        reach = np.where(kp > 0, budget / np.where(kp > 0, kp, 1.0), np.inf)
    return q_des.clip(q - reach, q + reach)


def tilt_rad(quat_wxyz: np.ndarray) -> float:
    """Angle between the pelvis z axis and the world vertical (0 upright, pi upside down)."""
    x, y = float(quat_wxyz[1]), float(quat_wxyz[2])
    cos_tilt = 1.0 - 2.0 * (x * x + y * y)  # world z component of the body z axis
    return float(np.arccos(np.clip(cos_tilt, -1.0, 1.0)))


@dataclass(frozen=True)
class SafetyFilter:
    """Limits of a fixed joint list (usually all 29 motors in motor order) and the checks on them."""

    joint_names: tuple[str, ...]
    lower: np.ndarray
    upper: np.ndarray
    effort_limit: np.ndarray
    velocity_limit: np.ndarray
    cfg: SafetyCfg

    @classmethod
    def for_joints(cls, joint_names: Sequence[str], cfg: SafetyCfg) -> SafetyFilter:
        """Bind the G1 table's limits for ``joint_names``."""
        names = tuple(joint_names)
        m = cfg.position_margin_rad
        return cls(names, g1.joint_array("lower", names) + m, g1.joint_array("upper", names) - m,
                   g1.joint_array("effort_limit", names), g1.joint_array("velocity_limit", names), cfg)

    def targets(self, q_des: np.ndarray, q: np.ndarray, dq: np.ndarray, kp: np.ndarray,
                kd: np.ndarray) -> np.ndarray:
        """Safe position targets: torque-aware clamp around the measured q, then joint limits.

        The limit clamp comes last, so a target never leaves the joint range even when the
        measured position already has.
        """
        safe = clamp_torque_aware(q_des, q, kp, self.effort_limit, kd, dq)
        return safe.clip(self.lower, self.upper)

    def state_fault(self, q: np.ndarray, dq: np.ndarray, quat_wxyz: np.ndarray) -> str:
        """Why the measured state is unsafe ("" when it is fine): non-finite, too fast, tilted."""
        bad = non_finite(self.joint_names, q) + non_finite(self.joint_names, dq)
        if bad or not np.all(np.isfinite(quat_wxyz)):
            return f"non-finite LowState for {sorted(set(bad)) or 'the IMU quaternion'}"
        limit = self.cfg.velocity_limit_factor * self.velocity_limit
        fast = np.flatnonzero(np.abs(dq) > limit)
        if fast.size:
            i = fast[np.argmax(np.abs(dq[fast]) / limit[fast])]
            return (f"joint velocity {self.joint_names[i]} |dq|={abs(dq[i]):.1f} rad/s > "
                    f"{limit[i]:.1f}")
        tilt = tilt_rad(quat_wxyz)
        if tilt > self.cfg.max_tilt_rad:
            return f"tilt {tilt:.2f} rad > {self.cfg.max_tilt_rad:.2f}"
        return ""
