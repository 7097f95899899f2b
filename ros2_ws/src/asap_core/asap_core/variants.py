"""What ``LowState.mode_machine`` and ``mode_pr`` mean, as data.

The G1 reports its hardware variant in ``mode_machine`` and ignores any LowCmd whose
``mode_machine`` differs, so commands must echo the value read from LowState (hard-coding 5
is ASAP's #1 user problem, LeCAR-Lab/ASAP#76). Values from unitree_rl_lab's G1 wrapper and
Newton's asset table.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from types import MappingProxyType


class ModePr(IntEnum):
    """``mode_pr``: how ankle and waist roll/pitch slots are interpreted."""

    PR = 0
    """Series (pitch/roll) joints; the firmware maps them onto the parallel linkage. RL uses this."""
    AB = 1
    """The two parallel linkage motors A/B are commanded directly."""


@dataclass(frozen=True)
class RobotVariant:
    """One ``mode_machine`` value."""

    mode_machine: int
    name: str
    body_dof: int
    waist_locked: bool = False


VARIANTS = MappingProxyType(
    {
        1: RobotVariant(1, "g1_23dof", 23),
        2: RobotVariant(2, "g1_29dof", 29),
        3: RobotVariant(3, "g1_29dof", 29),
        4: RobotVariant(4, "g1_23dof_rev_1_0", 23),
        5: RobotVariant(5, "g1_29dof_rev_1_0", 29),
        6: RobotVariant(6, "g1_29dof_lock_waist", 29, waist_locked=True),
        9: RobotVariant(9, "g1_dual_arm_14dof", 14),
    }
)

SIM_MODE_MACHINE = 5
"""What the simulated twin reports by default: a 29-DoF rev 1.0 G1 (as unitree_mujoco does)."""


class UnknownVariantError(ValueError):
    """``mode_machine`` value with no known meaning."""


def variant(mode_machine: int) -> RobotVariant:
    """Look up a ``mode_machine`` value."""
    try:
        return VARIANTS[int(mode_machine)]
    except KeyError:
        raise UnknownVariantError(
            f"unknown G1 mode_machine {mode_machine}; known: "
            + ", ".join(f"{k}={v.name}" for k, v in VARIANTS.items())
        ) from None


def supports_full_body(mode_machine: int) -> bool:
    """Whether a variant has every joint the 29-motor table drives (legs, waist, wrists)."""
    v = variant(mode_machine)
    return v.body_dof == 29 and not v.waist_locked
