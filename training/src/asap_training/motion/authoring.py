"""Author G1 clips from a few keyframes: pelvis and feet by offsets (legs solved by IK), arms by angle.

Each keyframe gives the pelvis offset/orientation and each foot's offset from the standing pose, plus
upper-body joint angles by name. Between keyframes everything eases with a cosine; every frame the legs
are solved by damped least squares on MuJoCo Jacobians so the feet land exactly (flat, at their targets).

The shipped clips (``asap_core/clips/*.npz``, :data:`asap_core.motion.CLIP_DIR`) are regenerated with::

    asap-author --out ros2_ws/src/asap_core/asap_core/clips            # all of CLIPS
    asap-author --clip squat --out /tmp/clips                          # one
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import mujoco
import numpy as np
from numpy.typing import ArrayLike

from asap_core import g1, quat
from asap_core.g1 import FEET
from asap_core.motion import MotionClip
from asap_sim.kinematics import G1Kinematics
from asap_sim.model import standing_base_height

Vec3 = tuple[float, float, float]
LEG_JOINTS: tuple[str, ...] = g1.names("asap23")[:12]


@dataclass(frozen=True)
class Keyframe:
    """A pose at time ``t_s``; offsets are from the standing default pose (m, rad, world axes)."""

    t_s: float
    pelvis: Vec3 = (0.0, 0.0, 0.0)
    pelvis_rpy: Vec3 = (0.0, 0.0, 0.0)
    left_foot: Vec3 = (0.0, 0.0, 0.0)
    right_foot: Vec3 = (0.0, 0.0, 0.0)
    joints: Mapping[str, float] = field(default_factory=dict)
    """Waist/arm angles by name; unnamed ones keep the default pose (keyframes do not inherit them)."""


def _rpy_quat(rpy: np.ndarray) -> np.ndarray:
    r, p, y = rpy
    qx = np.array([np.cos(r / 2), np.sin(r / 2), 0, 0])
    qy = np.array([np.cos(p / 2), 0, np.sin(p / 2), 0])
    qz = np.array([np.cos(y / 2), 0, 0, np.sin(y / 2)])
    return quat.mul(qz, quat.mul(qy, qx))


def _ease(keys: Sequence[Keyframe], t: float, get: Callable[[Keyframe], ArrayLike]) -> np.ndarray:
    """Cosine-eased interpolation of ``get(keyframe)`` at time ``t`` (held outside the key range)."""
    times = [k.t_s for k in keys]
    i = int(np.clip(np.searchsorted(times, t, side="right") - 1, 0, len(keys) - 1))
    a = np.asarray(get(keys[i]), dtype=np.float64)
    if i == len(keys) - 1 or t <= times[0]:
        return a
    b = np.asarray(get(keys[i + 1]), dtype=np.float64)
    s = (t - times[i]) / (times[i + 1] - times[i])
    return a + (b - a) * 0.5 * (1.0 - np.cos(np.pi * s))


@dataclass(frozen=True, kw_only=True)
class AuthorCfg:
    """How the clips are sampled."""

    fps: float = 50.0
    """Frame rate of the written clips."""


class ClipAuthor:
    """Turns keyframes into a :class:`MotionClip` on a G1 model."""

    def __init__(self, model: mujoco.MjModel, cfg: AuthorCfg | None = None) -> None:
        """Standing pose: default joint angles, pelvis at the height that puts the soles on the floor."""
        self.model, self.fps = model, (cfg or AuthorCfg()).fps
        self.kin = G1Kinematics(model)
        self.data = mujoco.MjData(model)
        self.upper = tuple(n for n in g1.names("asap23") if n not in LEG_JOINTS)
        self.default = dict(zip(g1.names("motor"), g1.default_pose(g1.names("motor")), strict=True))
        self.leg_qpos = self.kin.qpos_indices(LEG_JOINTS)
        self.leg_dofs = np.array([model.jnt_dofadr[model.joint(n).id] for n in LEG_JOINTS])
        self.leg_lo = g1.joint_array("lower", LEG_JOINTS)
        self.leg_hi = g1.joint_array("upper", LEG_JOINTS)
        self.feet = [model.body(n).id for n in FEET]
        self.stand_pelvis = np.array([0.0, 0.0, standing_base_height(model, g1.default_pose(g1.MOTOR_ORDER))])
        self._forward(self._qpos(self.stand_pelvis, np.array([1.0, 0, 0, 0]), self.default))
        self.stand_feet = self.data.xpos[self.feet].copy()
        self.stand_feet_quat = self.data.xquat[self.feet].copy()

    def _qpos(self, root: np.ndarray, root_quat: np.ndarray, joints: Mapping[str, float]) -> np.ndarray:
        q = np.zeros(self.model.nq)
        q[:3], q[3:7] = root, root_quat
        names = list(joints)
        q[self.kin.qpos_indices(names)] = [joints[n] for n in names]
        return q

    def _forward(self, q: np.ndarray) -> None:
        self.data.qpos[:] = q
        mujoco.mj_kinematics(self.model, self.data)
        mujoco.mj_comPos(self.model, self.data)

    def solve_legs(
        self,
        q: np.ndarray,
        feet_pos: np.ndarray,
        feet_quat: np.ndarray,
        iterations: int = 60,
        damping: float = 1e-3,
    ) -> tuple[np.ndarray, float]:
        """Damped least squares on both feet (6-D each) over the 12 leg joints → (qpos, max error)."""
        jacp, jacr = np.zeros((3, self.model.nv)), np.zeros((3, self.model.nv))
        err = np.inf
        for _ in range(iterations):
            self._forward(q)
            rows, errs = [], []
            for k, b in enumerate(self.feet):
                mujoco.mj_jacBody(self.model, self.data, jacp, jacr, b)
                rows += [jacp[:, self.leg_dofs].copy(), jacr[:, self.leg_dofs].copy()]
                errs += [
                    feet_pos[k] - self.data.xpos[b],
                    quat.to_rotvec(quat.mul(feet_quat[k], quat.conj(self.data.xquat[b]))),
                ]
            jac, e = np.vstack(rows), np.concatenate(errs)
            err = float(np.abs(e).max())
            if err < 1e-6:
                break
            dq = jac.T @ np.linalg.solve(jac @ jac.T + damping * np.eye(12), e)
            q[self.leg_qpos] = np.clip(q[self.leg_qpos] + dq, self.leg_lo, self.leg_hi)
        return q, err

    def author(self, name: str, keys: Sequence[Keyframe], max_ik_error: float = 1e-3) -> MotionClip:
        """Sample the keyframes at ``fps`` and solve every frame; refuses unreachable foot targets."""
        keys = sorted(keys, key=lambda k: k.t_s)
        times = np.arange(0.0, keys[-1].t_s + 0.5 / self.fps, 1.0 / self.fps)
        q = self._qpos(self.stand_pelvis, np.array([1.0, 0, 0, 0]), self.default)
        root_pos, root_quat, joint_pos = [], [], []
        for t in times:
            q[:3] = self.stand_pelvis + _ease(keys, t, lambda k: k.pelvis)
            q[3:7] = _rpy_quat(_ease(keys, t, lambda k: k.pelvis_rpy))
            upper = _ease(keys, t, lambda k: [k.joints.get(n, self.default[n]) for n in self.upper])
            q[self.kin.qpos_indices(self.upper)] = upper
            feet = self.stand_feet + np.stack(
                [_ease(keys, t, lambda k: k.left_foot), _ease(keys, t, lambda k: k.right_foot)]
            )
            q, err = self.solve_legs(q, feet, self.stand_feet_quat)
            if err > max_ik_error:
                raise ValueError(f"clip {name!r}: feet unreachable at t={t:.2f} s (IK error {err:.4f})")
            root_pos.append(q[:3].copy())
            root_quat.append(q[3:7].copy())
            joint_pos.append(q[self.kin.qpos_indices(g1.names("asap23"))].copy())
        return MotionClip(
            name, self.fps, np.array(root_pos), np.array(root_quat), g1.names("asap23"), np.array(joint_pos)
        )


def _arms(l_pitch: float, r_pitch: float, roll: float = 0.2, elbow: float = 0.6) -> dict[str, float]:
    return {
        "left_shoulder_pitch_joint": l_pitch,
        "right_shoulder_pitch_joint": r_pitch,
        "left_shoulder_roll_joint": roll,
        "right_shoulder_roll_joint": -roll,
        "left_elbow_joint": elbow,
        "right_elbow_joint": elbow,
    }


_REST = _arms(0.2, 0.2)
CLIPS: Mapping[str, tuple[Keyframe, ...]] = MappingProxyType(
    {
        # Knees bend ~10 cm with the arms raised forward for balance, twice.
        "squat": (
            Keyframe(0.0, joints=_REST),
            Keyframe(1.0, joints=_REST),
            Keyframe(2.2, pelvis=(-0.02, 0, -0.10), joints=_arms(-0.6, -0.6, 0.1, 0.4)),
            Keyframe(2.8, pelvis=(-0.02, 0, -0.10), joints=_arms(-0.6, -0.6, 0.1, 0.4)),
            Keyframe(4.0, joints=_REST),
            Keyframe(5.2, pelvis=(-0.02, 0, -0.10), joints=_arms(-0.6, -0.6, 0.1, 0.4)),
            Keyframe(5.8, pelvis=(-0.02, 0, -0.10), joints=_arms(-0.6, -0.6, 0.1, 0.4)),
            Keyframe(7.0, joints=_REST),
            Keyframe(8.0, joints=_REST),
        ),
        # Arms swing in opposition while the weight shifts side to side; feet stay planted.
        "arm_swing": (
            Keyframe(0.0, joints=_REST),
            Keyframe(1.0, pelvis=(0, 0.04, 0), joints=_arms(-0.5, 0.7) | {"waist_yaw_joint": 0.15}),
            Keyframe(2.0, pelvis=(0, -0.04, 0), joints=_arms(0.7, -0.5) | {"waist_yaw_joint": -0.15}),
            Keyframe(3.0, pelvis=(0, 0.04, 0), joints=_arms(-0.5, 0.7) | {"waist_yaw_joint": 0.15}),
            Keyframe(4.0, pelvis=(0, -0.04, 0), joints=_arms(0.7, -0.5) | {"waist_yaw_joint": -0.15}),
            Keyframe(5.0, pelvis=(0, 0.04, 0), joints=_arms(-0.5, 0.7) | {"waist_yaw_joint": 0.15}),
            Keyframe(6.0, joints=_REST),
            Keyframe(7.0, joints=_REST),
        ),
        # Step 8 cm to the left and bring the other foot: weight onto the stance foot, lift, place, re-centre.
        "side_step": (
            Keyframe(0.0, joints=_REST),
            Keyframe(1.0, pelvis=(0, -0.04, -0.01), joints=_REST),
            Keyframe(1.6, pelvis=(0, -0.04, -0.01), left_foot=(0, 0.04, 0.05), joints=_arms(0.2, 0.2, 0.4)),
            Keyframe(2.2, pelvis=(0, -0.03, -0.01), left_foot=(0, 0.08, 0), joints=_REST),
            Keyframe(3.2, pelvis=(0, 0.12, -0.01), left_foot=(0, 0.08, 0), joints=_REST),
            Keyframe(
                3.8,
                pelvis=(0, 0.12, -0.01),
                left_foot=(0, 0.08, 0),
                right_foot=(0, 0.04, 0.05),
                joints=_arms(0.2, 0.2, 0.4),
            ),
            Keyframe(
                4.4, pelvis=(0, 0.11, -0.01), left_foot=(0, 0.08, 0), right_foot=(0, 0.08, 0), joints=_REST
            ),
            Keyframe(5.4, pelvis=(0, 0.08, 0), left_foot=(0, 0.08, 0), right_foot=(0, 0.08, 0), joints=_REST),
        ),
        # A slow front kick with the right leg from a left-leg stance.
        "kick": (
            Keyframe(0.0, joints=_REST),
            Keyframe(1.2, pelvis=(0, 0.07, -0.02), joints=_arms(0.2, 0.2, 0.4)),
            Keyframe(
                2.0, pelvis=(-0.01, 0.07, -0.03), right_foot=(0.05, 0.0, 0.10), joints=_arms(0.0, 0.4, 0.4)
            ),
            Keyframe(
                2.5, pelvis=(-0.02, 0.07, -0.03), right_foot=(0.25, 0.0, 0.15), joints=_arms(0.4, -0.3, 0.4)
            ),
            Keyframe(
                3.1, pelvis=(-0.01, 0.07, -0.03), right_foot=(0.05, 0.0, 0.08), joints=_arms(0.2, 0.2, 0.4)
            ),
            Keyframe(3.8, pelvis=(0, 0.07, -0.02), joints=_REST),
            Keyframe(5.0, joints=_REST),
        ),
    }
)
"""The clips the package ships."""
