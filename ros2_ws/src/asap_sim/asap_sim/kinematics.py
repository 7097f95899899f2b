"""Forward kinematics of motion clips on the G1 MuJoCo model (``mj_kinematics``, one frame at a time).

The tracked points are :data:`asap_core.g1.TRACKED_POINTS`. Training's motion library and the monitor
(``asap_bringup.monitor_core``) compute them here: the ghost a user sees is the reference training tracks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import mujoco
import numpy as np

from asap_core import g1, quat
from asap_core.motion import MotionClip
from asap_sim.model import standing_base_height


def _id(model: mujoco.MjModel, kind: mujoco.mjtObj, name: str) -> int:
    i = mujoco.mj_name2id(model, kind, name)
    if i < 0:
        raise KeyError(f"the G1 model has no {kind.name.removeprefix('mjOBJ_').lower()} named {name!r}")
    return i


class G1Kinematics:
    """FK of the tracked points (24 bodies + 3 extended) for any G1 model with a floating pelvis."""

    def __init__(self, model: mujoco.MjModel) -> None:
        """Resolve bodies and joints by name once."""
        self.model = model
        self._data = mujoco.MjData(model)
        self.body_ids = np.array([_id(model, mujoco.mjtObj.mjOBJ_BODY, n) for n in g1.RIGID_BODIES])
        self.ext_parent_ids = np.array(
            [_id(model, mujoco.mjtObj.mjOBJ_BODY, p) for p, _ in g1.EXTENDED_POINTS.values()]
        )
        self.ext_offsets = np.array([off for _, off in g1.EXTENDED_POINTS.values()], dtype=np.float64)
        hinges = [j for j in range(model.njnt) if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE]
        self.joint_names: tuple[str, ...] = tuple(model.joint(j).name for j in hinges)
        self._qposadr = {model.joint(j).name: int(model.jnt_qposadr[j]) for j in hinges}
        root = _id(model, mujoco.mjtObj.mjOBJ_BODY, "pelvis")
        free = model.body_jntadr[root]
        if free < 0 or model.jnt_type[free] != mujoco.mjtJoint.mjJNT_FREE:
            raise ValueError("the G1 model's pelvis must carry a free joint")
        self._root_adr = int(model.jnt_qposadr[free])

    def joint_axes(self) -> dict[str, np.ndarray]:
        """Each hinge's unit axis in its body frame, by joint name."""
        return {n: self.model.jnt_axis[self.model.joint(n).id].copy() for n in self.joint_names}

    def qpos_indices(self, joint_names: Sequence[str]) -> np.ndarray:
        """``qpos`` addresses of the named hinges."""
        unknown = [n for n in joint_names if n not in self._qposadr]
        if unknown:
            raise KeyError(f"joints not in the G1 model: {unknown}")
        return np.array([self._qposadr[n] for n in joint_names], dtype=np.intp)

    def qpos(self, clip: MotionClip) -> np.ndarray:
        """(T, nq) generalized positions of a clip; joints it lacks stay at 0."""
        q = np.zeros((clip.num_frames, self.model.nq))
        q[:, self._root_adr : self._root_adr + 3] = clip.root_pos_w
        q[:, self._root_adr + 3 : self._root_adr + 7] = clip.root_quat_w
        q[:, self.qpos_indices(clip.joint_names)] = clip.joint_pos
        return q

    def grounded(self, clip: MotionClip, feet: tuple[str, ...] = g1.FEET) -> MotionClip:
        """The clip shifted vertically so its lowest foot, over the whole clip, stands on the floor.

        Retargeted clips may float or sink (ASAP's float ~10 cm); the lowest ankle origin is put at the
        height it has when the G1 stands flat-footed on the floor (asap_sim's standing height).
        """
        q0 = np.zeros(self.model.nq)
        q0[self._root_adr + 2] = standing_base_height(self.model, g1.default_pose(g1.MOTOR_ORDER))
        q0[self._root_adr + 3] = 1.0
        q0[self.qpos_indices(g1.MOTOR_ORDER)] = g1.default_pose(g1.MOTOR_ORDER)
        idx = [g1.RIGID_BODIES.index(f) for f in feet]
        standing = self.points(q0)[0][0, idx, 2].min()
        lowest = self.points(self.qpos(clip))[0][:, idx, 2].min()
        root = clip.root_pos_w.copy()
        root[:, 2] += standing - lowest
        return dataclasses.replace(clip, root_pos_w=root)

    def points(self, qpos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """World positions (T, 27, 3) and orientations (T, 27, 4) of the tracked points.

        Extended points move rigidly with their parent body and share its orientation.
        """
        qpos = np.atleast_2d(qpos)
        n_body = len(self.body_ids)
        pos = np.empty((qpos.shape[0], n_body + len(self.ext_parent_ids), 3))
        rot = np.empty((qpos.shape[0], pos.shape[1], 4))
        d = self._data
        for t, q in enumerate(qpos):
            d.qpos[:] = q
            mujoco.mj_kinematics(self.model, d)
            pos[t, :n_body] = d.xpos[self.body_ids]
            rot[t, :n_body] = d.xquat[self.body_ids]
            parent_quat = d.xquat[self.ext_parent_ids]
            pos[t, n_body:] = d.xpos[self.ext_parent_ids] + quat.rotate(parent_quat, self.ext_offsets)
            rot[t, n_body:] = parent_quat
        return pos, rot
