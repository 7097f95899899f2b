"""The Unitree G1 (29 motors) in one table: names, motor order, limits, default poses, gains, and the
bodies and points that motion tracking follows.

Every other module addresses joints by name and asks this table for indices. Sources: motor order
and effort/velocity limits from unitree_ros2 / BeyondMimic's g1.py, position limits from the G1 URDF
(as used by ASAP), ASAP 23-DoF gains and default pose from ASAP's ``g1_29dof_anneal_23dof.yaml``, wrist
hold gains from ASAP's deploy config.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

NUM_MOTORS = 29
"""Body motors on the 29-DoF G1; LowCmd/LowState carry 35 slots, 29..34 are not body motors."""
NUM_MOTOR_SLOTS = 35

# Armature (rotor inertia through the gearbox, kg m^2) per actuator model, from BeyondMimic.
ARMATURE = MappingProxyType(
    {
        "5020": 0.003609725,
        "7520-14": 0.010177520,
        "7520-22": 0.025101925,
        "4010": 0.00425,
        "2x5020": 2 * 0.003609725,  # ankle and waist roll/pitch: two 5020 motors through a linkage
    }
)


@dataclass(frozen=True)
class Joint:
    """One G1 joint. Units: rad, rad/s, N m."""

    name: str
    motor_index: int
    """Slot in ``LowCmd.motor_cmd`` / ``LowState.motor_state`` (Unitree SDK order)."""
    actuator: str
    """Actuator model, a key of ``ARMATURE``."""
    effort_limit: float
    velocity_limit: float
    lower: float
    upper: float


def _j(name: str, idx: int, act: str, effort: float, vel: float, lo: float, hi: float) -> Joint:
    return Joint(name, idx, act, effort, vel, lo, hi)


# fmt: off
JOINTS: tuple[Joint, ...] = (
    _j("left_hip_pitch_joint",       0, "7520-14", 88.0, 32.0, -2.5307, 2.8798),
    _j("left_hip_roll_joint",        1, "7520-22", 139.0, 20.0, -0.5236, 2.9671),
    _j("left_hip_yaw_joint",         2, "7520-14", 88.0, 32.0, -2.7576, 2.7576),
    _j("left_knee_joint",            3, "7520-22", 139.0, 20.0, -0.087267, 2.8798),
    _j("left_ankle_pitch_joint",     4, "2x5020", 50.0, 37.0, -0.87267, 0.5236),
    _j("left_ankle_roll_joint",      5, "2x5020", 50.0, 37.0, -0.2618, 0.2618),
    _j("right_hip_pitch_joint",      6, "7520-14", 88.0, 32.0, -2.5307, 2.8798),
    _j("right_hip_roll_joint",       7, "7520-22", 139.0, 20.0, -2.9671, 0.5236),
    _j("right_hip_yaw_joint",        8, "7520-14", 88.0, 32.0, -2.7576, 2.7576),
    _j("right_knee_joint",           9, "7520-22", 139.0, 20.0, -0.087267, 2.8798),
    _j("right_ankle_pitch_joint",   10, "2x5020", 50.0, 37.0, -0.87267, 0.5236),
    _j("right_ankle_roll_joint",    11, "2x5020", 50.0, 37.0, -0.2618, 0.2618),
    _j("waist_yaw_joint",           12, "7520-14", 88.0, 32.0, -2.618, 2.618),
    _j("waist_roll_joint",          13, "2x5020", 50.0, 37.0, -0.52, 0.52),
    _j("waist_pitch_joint",         14, "2x5020", 50.0, 37.0, -0.52, 0.52),
    _j("left_shoulder_pitch_joint", 15, "5020", 25.0, 37.0, -3.0892, 2.6704),
    _j("left_shoulder_roll_joint",  16, "5020", 25.0, 37.0, -1.5882, 2.2515),
    _j("left_shoulder_yaw_joint",   17, "5020", 25.0, 37.0, -2.618, 2.618),
    _j("left_elbow_joint",          18, "5020", 25.0, 37.0, -1.0472, 2.0944),
    _j("left_wrist_roll_joint",     19, "5020", 25.0, 37.0, -1.972222, 1.972222),
    _j("left_wrist_pitch_joint",    20, "4010", 5.0, 22.0, -1.614430, 1.614430),
    _j("left_wrist_yaw_joint",      21, "4010", 5.0, 22.0, -1.614430, 1.614430),
    _j("right_shoulder_pitch_joint", 22, "5020", 25.0, 37.0, -3.0892, 2.6704),
    _j("right_shoulder_roll_joint", 23, "5020", 25.0, 37.0, -2.2515, 1.5882),
    _j("right_shoulder_yaw_joint",  24, "5020", 25.0, 37.0, -2.618, 2.618),
    _j("right_elbow_joint",         25, "5020", 25.0, 37.0, -1.0472, 2.0944),
    _j("right_wrist_roll_joint",    26, "5020", 25.0, 37.0, -1.972222, 1.972222),
    _j("right_wrist_pitch_joint",   27, "4010", 5.0, 22.0, -1.614430, 1.614430),
    _j("right_wrist_yaw_joint",     28, "4010", 5.0, 22.0, -1.614430, 1.614430),
)
# fmt: on

JOINT_BY_NAME = MappingProxyType({j.name: j for j in JOINTS})
MOTOR_ORDER: tuple[str, ...] = tuple(j.name for j in JOINTS)
"""Unitree SDK / URDF / MuJoCo order: ``LowCmd.motor_cmd[i]`` drives ``MOTOR_ORDER[i]``."""

# Isaac Lab articulation (breadth-first) order used by BeyondMimic/unitree_rl_lab ONNX files:
# the SDK motor index of Isaac Lab joint k.
_ISAACLAB_TO_MOTOR = (0, 6, 12, 1, 7, 13, 2, 8, 14, 3, 9, 15, 22, 4, 10, 16, 23, 5, 11, 17, 24,
                      18, 25, 19, 26, 20, 27, 21, 28)
ISAACLAB_ORDER: tuple[str, ...] = tuple(MOTOR_ORDER[i] for i in _ISAACLAB_TO_MOTOR)

WRIST_JOINTS: tuple[str, ...] = tuple(n for n in MOTOR_ORDER if "wrist" in n)
ASAP23_ORDER: tuple[str, ...] = tuple(n for n in MOTOR_ORDER if n not in WRIST_JOINTS)
"""ASAP's "29-DoF with wrists annealed" policy order: motor order without the 6 wrist joints."""

ORDERS = MappingProxyType(
    {"motor": MOTOR_ORDER, "isaaclab": ISAACLAB_ORDER, "asap23": ASAP23_ORDER}
)


def _group_values(groups: dict[str, float], default: float | None = None) -> dict[str, float]:
    """Expand {substring: value} (first match wins) to a value for every motor-order joint."""
    out: dict[str, float] = {}
    for name in MOTOR_ORDER:
        match = next((v for key, v in groups.items() if key in name), default)
        if match is None:
            raise KeyError(f"no value for joint {name!r} in groups {list(groups)}")
        out[name] = float(match)
    return out


DEFAULT_POSES = MappingProxyType(
    {
        # ASAP training default (knees slightly bent, upper body zero).
        "asap": _group_values({"hip_pitch": -0.1, "knee": 0.3, "ankle_pitch": -0.2}, default=0.0),
        # BeyondMimic / holosoma / GR00T default.
        "beyondmimic": _group_values(
            {"hip_pitch": -0.312, "knee": 0.669, "ankle_pitch": -0.363, "shoulder_pitch": 0.2,
             "left_shoulder_roll": 0.2, "right_shoulder_roll": -0.2, "elbow": 0.6},
            default=0.0,
        ),
    }
)


def _armature_gains(omega_hz: float = 10.0, zeta: float = 2.0) -> tuple[dict[str, float], dict[str, float]]:
    """BeyondMimic gains: kp = I w^2, kd = 2 zeta I w with w = 2 pi 10 Hz, zeta = 2."""
    w = 2.0 * np.pi * omega_hz
    kp = {j.name: ARMATURE[j.actuator] * w**2 for j in JOINTS}
    kd = {j.name: 2.0 * zeta * ARMATURE[j.actuator] * w for j in JOINTS}
    return kp, kd


_BM_KP, _BM_KD = _armature_gains()

# ASAP 23-DoF training gains; wrists (not in the policy) held with ASAP's deploy gains.
_ASAP_KP = _group_values({"hip": 100.0, "knee": 200.0, "ankle": 20.0, "waist": 400.0, "shoulder_pitch": 90.0,
                          "shoulder_roll": 60.0, "shoulder_yaw": 20.0, "elbow": 60.0, "wrist": 4.0})
_ASAP_KD = _group_values({"hip": 2.5, "knee": 5.0, "ankle_pitch": 0.2, "ankle_roll": 0.1, "waist": 5.0,
                          "shoulder_pitch": 2.0, "shoulder_roll": 1.0, "shoulder_yaw": 0.4, "elbow": 1.0,
                          "wrist": 0.2})
# ASAP's kd rescaled for Unitree's simulator at its default 5 ms step, whose PD uses the previous step's
# sensors: with ASAP's kd that one-step-late PD rings by itself (hip and waist pitch, ~25 Hz). Factors from
# a coordinate search over these joint groups (x0.25 ... x1.4) for the fastest decay of a joint-velocity
# kick in the band (ASAP and BeyondMimic poses): RMS peak |dq| over 0.2-1 s after it 15.3 rad/s with
# ASAP's kd, 0.55 with these, 0.62 for ASAP's kd on the G1's own drive (PD every 2 ms).
_HELD_5MS_KD_FACTOR = _group_values({"hip_pitch": 0.25, "waist_yaw": 0.25, "waist_pitch": 0.25,
                                     "shoulder_pitch": 1.4, "wrist_pitch": 1.4}, default=1.0)

GAINS = MappingProxyType(
    {
        "asap": (_ASAP_KP, _ASAP_KD),
        # Unitree's simulator at SIMULATE_DT = 0.005 (see _HELD_5MS_KD_FACTOR): its HOLD, and the gains of
        # the policy fine-tuned for it (training/policies/arm_swing_unitree_sim)
        "unitree_mujoco_5ms": (_ASAP_KP, {n: kd * _HELD_5MS_KD_FACTOR[n] for n, kd in _ASAP_KD.items()}),
        # Passive damping used by every Unitree-derived stack: no stiffness, kd = 8.
        "damping": (_group_values({}, default=0.0), _group_values({}, default=8.0)),
        # Stiff stand/hold (motion_tracking_controller standby, holosoma stiff startup).
        "stiff_hold": (
            _group_values({"hip_pitch": 350.0, "hip": 200.0, "knee": 300.0, "ankle_pitch": 300.0,
                           "ankle_roll": 150.0, "waist": 200.0}, default=40.0),
            _group_values({"knee": 10.0, "hip": 5.0, "ankle": 5.0, "waist": 5.0}, default=3.0),
        ),
        "beyondmimic": (_BM_KP, _BM_KD),
    }
)


def names(order: str) -> tuple[str, ...]:
    """Joint names in a named order: ``motor``, ``isaaclab`` or ``asap23``."""
    try:
        return ORDERS[order]
    except KeyError:
        raise KeyError(f"unknown joint order {order!r}; known: {sorted(ORDERS)}") from None


def mirror(name: str) -> str:
    """The joint (or link) on the other side of the robot (``left_knee_joint`` -> ``right_knee_joint``);
    a name on the sagittal plane (the waist) is its own mirror."""
    for side, other in (("left_", "right_"), ("right_", "left_")):
        if name.startswith(side):
            return other + name[len(side) :]
    return name


def joint_array(field: str, joint_names: tuple[str, ...] | list[str]) -> np.ndarray:
    """A per-joint attribute of the table (e.g. ``effort_limit``) for the given names, float64."""
    return np.array([getattr(JOINT_BY_NAME[n], field) for n in joint_names], dtype=np.float64)


def default_pose(joint_names: tuple[str, ...] | list[str], pose: str = "asap") -> np.ndarray:
    """Default joint positions (rad) of a named pose for the given joints."""
    table = DEFAULT_POSES[pose]
    return np.array([table[n] for n in joint_names], dtype=np.float64)


def gains(joint_names: tuple[str, ...] | list[str], gain_set: str = "asap") -> tuple[np.ndarray, np.ndarray]:
    """(kp, kd) arrays of a named gain set for the given joints."""
    if gain_set not in GAINS:
        raise KeyError(f"unknown gain set {gain_set!r}; known: {sorted(GAINS)}")
    kp, kd = GAINS[gain_set]
    return (np.array([kp[n] for n in joint_names], dtype=np.float64),
            np.array([kd[n] for n in joint_names], dtype=np.float64))


def gain_set_of(joint_names: tuple[str, ...] | list[str], kp: np.ndarray, kd: np.ndarray) -> str:
    """The name of the gain set whose gains for these joints are ``kp``, ``kd`` (e.g. an artifact's,
    to build the env it was trained in); ``KeyError`` where none or several are (sets that differ only
    in joints not given)."""
    found = [name for name in GAINS
             if all(np.allclose(a, b) for a, b in zip(gains(joint_names, name), (kp, kd), strict=True))]
    if not found:
        raise KeyError(f"no gain set of asap_core.g1.GAINS has these kp/kd; known: {sorted(GAINS)}")
    if len(found) > 1:
        raise KeyError(f"gain sets {found} all have these kp/kd on these joints: name the set")
    return found[0]


KP_CEILING_SATURATION_RAD = 0.05
"""kp ceiling: a stiffness that saturates the motor (``effort_limit``) at a position error below
this is a bang-bang controller, not a PD. The stiffest published G1 gains (ASAP's waist, 400 on a
50 N m joint: saturation at 0.125 rad) stay 2.5x below the ceiling; 1e6 is refused."""
KD_CEILING_SATURATION_SPEED = 0.02
"""kd ceiling: a damping that saturates the motor below this fraction of its rated velocity. Loose
on purpose: Unitree's damping mode (kd 8 on every joint, 5 N m wrists included) stays within it."""


def gain_ceilings(joint_names: tuple[str, ...] | list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(kp_max, kd_max) per joint: the largest gains any artifact or gain set may command."""
    effort = joint_array("effort_limit", joint_names)
    velocity = joint_array("velocity_limit", joint_names)
    return effort / KP_CEILING_SATURATION_RAD, effort / (KD_CEILING_SATURATION_SPEED * velocity)


# --- Bodies and tracked points ----------------------------------------------------------------
# Training's rewards, critic and metrics, the monitor's skeleton and the forward kinematics
# (asap_sim.kinematics) all name the same bodies of the G1 model; ASAP's choice of them is a robot fact.

RIGID_BODIES: tuple[str, ...] = (
    "pelvis",
    "left_hip_pitch_link",
    "left_hip_roll_link",
    "left_hip_yaw_link",
    "left_knee_link",
    "left_ankle_pitch_link",
    "left_ankle_roll_link",
    "right_hip_pitch_link",
    "right_hip_roll_link",
    "right_hip_yaw_link",
    "right_knee_link",
    "right_ankle_pitch_link",
    "right_ankle_roll_link",
    "waist_yaw_link",
    "waist_roll_link",
    "torso_link",
    "left_shoulder_pitch_link",
    "left_shoulder_roll_link",
    "left_shoulder_yaw_link",
    "left_elbow_link",
    "right_shoulder_pitch_link",
    "right_shoulder_roll_link",
    "right_shoulder_yaw_link",
    "right_elbow_link",
)
"""ASAP's 24 rigid bodies of the 23-DoF G1, in its (depth-first) order."""

EXTENDED_POINTS = MappingProxyType(
    {
        # ASAP's extend_config: offsets in the parent body frame (m).
        "left_hand_link": ("left_elbow_link", (0.25, 0.0, 0.0)),
        "right_hand_link": ("right_elbow_link", (0.25, 0.0, 0.0)),
        "head_link": ("torso_link", (0.0, 0.0, 0.42)),
    }
)
"""name → (parent body, offset in the parent frame): hands 0.25 m along the elbow x axis, head 0.42 m
above the torso origin."""

TRACKED_POINTS: tuple[str, ...] = RIGID_BODIES + tuple(EXTENDED_POINTS)
"""The 27 points of ASAP's rewards, critic and metrics (24 bodies + 3 extended)."""

LOWER_BODY: tuple[str, ...] = RIGID_BODIES[:16]
"""Pelvis, legs, waist and torso: the loose (σ = 0.1) half of the body-position reward."""
UPPER_BODY: tuple[str, ...] = RIGID_BODIES[16:] + tuple(EXTENDED_POINTS)
"""Arm links, hands and head: the tight (σ = 0.03) half."""
FEET: tuple[str, ...] = ("left_ankle_roll_link", "right_ankle_roll_link")
"""The foot bodies, left then right."""


def point_indices(names: tuple[str, ...] | list[str]) -> list[int]:
    """Indices of named points in :data:`TRACKED_POINTS`, as a list: it indexes numpy arrays and tensors
    alike, and torch.compile takes it as a constant (a numpy array would break its graph)."""
    missing = [n for n in names if n not in TRACKED_POINTS]
    if missing:
        raise KeyError(f"not tracked points: {missing}; tracked: {TRACKED_POINTS}")
    return [TRACKED_POINTS.index(n) for n in names]
