"""What the monitor shows, computed without ROS: reference ghost, live skeleton, contacts, tracking error.

The ``monitor`` node (``asap_bringup.monitor_node``) feeds this core with the policy node's status
(motion name, mode, phase), the measured joints (``/joint_states``) and, when some source provides it,
the floating base (``/odometry``: the twin's ground truth or a mocap / state estimator on the robot).
The core draws nothing itself; it returns a :class:`MonitorFrame` of numbers for the node to publish.

- Forward kinematics of the 27 tracked points (:data:`asap_core.g1.TRACKED_POINTS`) is training's
  (:class:`asap_sim.kinematics.G1Kinematics` on ``asap_sim.model.build_model``). The reference is the
  artifact's motion (``motion.name``) looked up among the shipped clips (:mod:`asap_core.motion`) or as
  ``<motion_path>/<name>.npz``, grounded, FK'd and interpolated between frames as training's motion library
  does. FK needs MuJoCo, imported lazily: where it is missing (the Python 3.10 robot image) the status text
  says so and only text is shown.
- The reference is placed like ``asap-eval --backend twin`` does: moved horizontally so that its first
  frame's pelvis stands where the robot's pelvis stands when the POLICY run starts (heading kept). Outside
  POLICY the offset follows the robot, so the ghost previews the start pose where the robot stands.
  A monitor started during a POLICY run keeps the clip's own placement until the next run.
- Without a fresh base pose the live skeleton is drawn on the reference's pelvis (or the standing pelvis
  at the origin) and only the root-relative error is reported: a global error would be invented.
- Foot contact is a kinematic estimate: a foot whose ankle-roll origin is within ``contact_height_m`` of
  its height when the G1 stands flat on the floor. No force sensing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from asap_core import g1, quat
from asap_core.modes import Mode
from asap_core.motion import CLIP_DIR, MotionClip, frame_blend, lerp_frames, load_npz, shipped_clips


@dataclass(frozen=True)
class MonitorCfg:
    """The monitor's parameters (declared by the node, read once)."""

    rate_hz: float = 20.0
    """How often markers, errors and the reference are published."""
    frame_id: str = "world"
    """Frame of the markers and the parent of the published base transform."""
    base_frame: str = "pelvis"
    """Child frame of the published base transform (the URDF's root link)."""
    odometry_timeout_s: float = 0.5
    """An /odometry pose older than this is not used (the base falls back, see the module docstring)."""
    contact_height_m: float = 0.03
    """A foot this close to its flat-standing height counts as in contact."""
    motion_path: str = ""
    """Folders (``os.pathsep``-separated) searched for ``<motion>.npz`` when the motion is not shipped."""
    publish_tf: bool = True
    """Publish ``frame_id -> base_frame`` on /tf (needs ``tf2_msgs``; a full ROS 2 install has it)."""

    def validate(self) -> None:
        """Raise ValueError naming the parameter and what is allowed."""
        if not 0.5 <= self.rate_hz <= 100.0:
            raise ValueError(f"rate_hz {self.rate_hz}: use 0.5..100 Hz")
        if self.odometry_timeout_s <= 0 or self.contact_height_m <= 0:
            raise ValueError("odometry_timeout_s and contact_height_m must be > 0")


@dataclass(frozen=True)
class BasePose:
    """The floating base (pelvis) in ``frame_id``."""

    pos: np.ndarray
    quat_wxyz: np.ndarray
    source: str
    """``odometry``, ``reference`` (the reference's pelvis) or ``standing`` (upright at the origin)."""


@dataclass(frozen=True)
class MonitorFrame:
    """Everything the node publishes for one tick; ``None`` = not available now."""

    status_lines: tuple[str, ...]
    base: BasePose | None = None
    live_points: np.ndarray | None = None
    """(27, 3) tracked points of the measured robot."""
    ref_points: np.ndarray | None = None
    """(27, 3) tracked points of the reference at the current phase, placed next to the robot."""
    feet: Mapping[str, tuple[np.ndarray, bool]] = field(default_factory=dict)
    """foot body -> (ankle-roll origin, in contact)."""
    error_m: float | None = None
    """Mean tracked-point distance to the reference (E_g-mpjpe per frame); needs a measured base."""
    error_local_m: float | None = None
    """The same, both skeletons moved to a common pelvis (E_mpjpe per frame)."""
    ref_joint_pos: np.ndarray | None = None
    """Reference joint positions in ``joint_names`` order (rad)."""
    joint_error: np.ndarray | None = None
    """Reference - measured joint positions (rad), ``joint_names`` order."""
    joint_names: tuple[str, ...] = g1.MOTOR_ORDER


class Kinematics:
    """Training's FK of the tracked points on the twin's G1 model, plus what the monitor derives from it."""

    def __init__(self) -> None:
        """Import lazily: MuJoCo (asap_sim's FK) needs Python >= 3.11 and is absent from the robot image."""
        # optional: MuJoCo (asap_sim's FK) is absent from the robot image, where the monitor shows text only
        from asap_sim.kinematics import G1Kinematics
        from asap_sim.model import build_model, standing_base_height

        self.kin = G1Kinematics(build_model())
        self.points_names: tuple[str, ...] = g1.TRACKED_POINTS
        self.feet_index = {f: g1.TRACKED_POINTS.index(f) for f in g1.FEET}
        self.edges = skeleton_edges(self.kin)
        self._joint_adr = self.kin.qpos_indices(g1.MOTOR_ORDER)
        default_q = g1.default_pose(g1.MOTOR_ORDER)
        height = standing_base_height(self.kin.model, default_q)
        points = self.points(np.array([0.0, 0.0, height]), np.array([1.0, 0, 0, 0]), default_q)
        self.standing_feet_z = {f: float(points[i, 2]) for f, i in self.feet_index.items()}
        self.standing_height = height

    def points(self, base_pos: np.ndarray, base_quat_wxyz: np.ndarray, q_motor: np.ndarray) -> np.ndarray:
        """(27, 3) tracked points for a base pose and joint positions in motor order."""
        qpos = np.zeros(self.kin.model.nq)
        qpos[:3], qpos[3:7] = base_pos, base_quat_wxyz
        qpos[self._joint_adr] = q_motor
        return self.kin.points(qpos)[0][0]


def skeleton_edges(kin) -> tuple[tuple[int, int], ...]:
    """(child, parent) tracked-point index pairs: each point joined to its nearest tracked ancestor."""
    model = kin.model
    index = {int(b): i for i, b in enumerate(kin.body_ids)}
    edges = []
    for i, body in enumerate(kin.body_ids):
        parent = int(model.body_parentid[body])
        while parent > 0 and parent not in index:
            parent = int(model.body_parentid[parent])
        if parent in index:
            edges.append((i, index[parent]))
    for k, (parent_name, _) in enumerate(g1.EXTENDED_POINTS.values()):
        edges.append((len(g1.RIGID_BODIES) + k, g1.RIGID_BODIES.index(parent_name)))
    return tuple(edges)


@dataclass(frozen=True)
class ReferenceState:
    """The reference at one phase."""

    points: np.ndarray
    """(27, 3) tracked points in the clip's world frame."""
    root_quat: np.ndarray
    """(4,) pelvis orientation (wxyz)."""
    joint_pos: np.ndarray
    """(29,) joint positions in motor order (rad); joints the clip lacks are 0."""


class Reference:
    """One reference motion sampled by phase, computed as training's motion library computes it: the clip
    grounded, FK'd at its frames, then interpolated between frames (lerp; slerp for the orientation)."""

    def __init__(self, clip: MotionClip, kin) -> None:
        """``kin``: an :class:`asap_sim.kinematics.G1Kinematics`."""
        clip = kin.grounded(clip)
        self.name, self.fps, self.num_frames, self.duration_s = (
            clip.name, clip.fps, clip.num_frames, clip.duration_s)
        self.points, rot = kin.points(kin.qpos(clip))
        self.root_quat = rot[:, 0]
        self.joint_pos = clip.joints(g1.MOTOR_ORDER)

    def sample(self, phase: float) -> ReferenceState:
        """The reference at ``phase`` in [0, 1] (clamped)."""
        t = np.array([np.clip(phase, 0.0, 1.0) * self.duration_s])
        f0, f1, w = frame_blend(t, self.duration_s, self.fps, self.num_frames)
        return ReferenceState(
            points=lerp_frames(self.points, f0, f1, w)[0],
            root_quat=quat.slerp(self.root_quat[f0], self.root_quat[f1], w)[0],
            joint_pos=lerp_frames(self.joint_pos, f0, f1, w)[0],
        )


def find_motion(name: str, motion_path: str = "") -> Path | None:
    """The motion's ``.npz``: the shipped clip, else ``<folder>/<name>.npz`` on ``motion_path``; or None."""
    for folder in (CLIP_DIR, *(Path(f).expanduser() for f in filter(None, motion_path.split(os.pathsep)))):
        path = folder / f"{name}.npz"
        if path.is_file():
            return path
    return None


class MonitorCore:
    """Holds the newest inputs; :meth:`frame` turns them into a :class:`MonitorFrame`."""

    def __init__(self, cfg: MonitorCfg, kinematics_factory=Kinematics) -> None:
        cfg.validate()
        self.cfg = cfg
        self.kinematics: Kinematics | None = None
        self.kinematics_error = ""
        try:
            self.kinematics = kinematics_factory()
        except Exception as e:  # ImportError where MuJoCo is absent, ModelError without the MJCF
            self.kinematics_error = f"{type(e).__name__}: {e}"
        self._references: dict[str, Reference | str] = {}  # name -> reference, or why there is none
        self.policy_name = self.policy_sha = self.motion_name = self.fault = ""
        self.mode, self.phase = -1, 0.0
        self._q: np.ndarray | None = None
        self._base: tuple[np.ndarray, np.ndarray, float] | None = None  # pos, quat, receive time (s)
        self._offset = np.zeros(3)

    # -- inputs ---------------------------------------------------------------------------------

    def set_status(
        self, *, policy_name: str, policy_sha256: str, motion_name: str, mode: int, phase: float, fault: str
    ) -> None:
        """From ``/policy/status``."""
        self.policy_name, self.policy_sha, self.motion_name = policy_name, policy_sha256, motion_name
        self.fault = fault
        self.set_phase(mode, phase)

    def set_phase(self, mode: int, phase: float) -> None:
        """From ``/policy/record`` (every tick) or the status."""
        self.mode, self.phase = int(mode), float(phase)

    def set_joints(self, names: Sequence[str], positions: Sequence[float]) -> None:
        """From ``/joint_states`` (any order; missing joints keep their last value, else the default pose)."""
        q = self._q if self._q is not None else g1.default_pose(g1.MOTOR_ORDER)
        q = q.copy()
        for name, value in zip(names, positions, strict=False):
            spec = g1.JOINT_BY_NAME.get(name)
            if spec is not None:
                q[g1.MOTOR_ORDER.index(name)] = value
        self._q = q

    def set_base(self, pos: Sequence[float], quat_wxyz: Sequence[float], now_s: float) -> None:
        """From ``/odometry`` (pose of the pelvis in ``frame_id``), stamped with its receive time."""
        self._base = (np.asarray(pos, float), np.asarray(quat_wxyz, float), now_s)

    # -- output ---------------------------------------------------------------------------------

    def reference(self) -> Reference | None:
        """The running policy's reference motion, loaded once per name (None: unknown or no FK)."""
        name = self.motion_name
        if not name or self.kinematics is None:
            return None
        if name not in self._references:
            self._references[name] = self._load_reference(name)
        ref = self._references[name]
        return ref if isinstance(ref, Reference) else None

    def _load_reference(self, name: str) -> Reference | str:
        path = find_motion(name, self.cfg.motion_path)
        if path is None:
            return (
                f"motion {name!r} unknown: not a shipped clip {list(shipped_clips())} "
                f"nor <motion_path>/{name}.npz"
            )
        if self.kinematics is None:
            return f"motion {name!r}: no FK to draw it with ({self.kinematics_error})"
        try:
            return Reference(load_npz(path), self.kinematics.kin)
        except Exception as e:  # a broken clip must not stop the monitor
            return f"motion {name!r} failed to load: {e}"

    def frame(self, now_s: float) -> MonitorFrame:
        """The frame to publish now."""
        lines = [self._policy_line(), self._mode_line()] + ([f"fault: {self.fault}"] if self.fault else [])
        if self.kinematics is None:
            lines.append(f"no FK (MuJoCo / G1 model unavailable): {self.kinematics_error}")
            return MonitorFrame(tuple(lines))
        kin, ref = self.kinematics, self.reference()
        if self.motion_name and ref is None:
            lines.append(str(self._references.get(self.motion_name, "")))
        state = ref.sample(self.phase) if ref is not None else None
        base = self._base_pose(now_s, state)
        if self._q is None:
            lines.append(f"base: {base.source}; no /joint_states yet")
            return MonitorFrame(tuple(lines), base=base)
        live = kin.points(base.pos, base.quat_wxyz, self._q)
        feet = {
            f: (live[i], bool(live[i, 2] - kin.standing_feet_z[f] < self.cfg.contact_height_m))
            for f, i in kin.feet_index.items()
        }
        ref_points = ref_q = g_err = l_err = None
        if state is not None and ref is not None:  # (a state comes from a reference)
            if base.source != "odometry":
                self._offset = np.zeros(3)  # the live skeleton stands on the reference's pelvis
            elif self.mode != Mode.POLICY:  # frozen while the policy runs, as asap-eval places it
                self._offset = _horizontal(live[0] - ref.sample(0.0).points[0])
            ref_points, ref_q = state.points + self._offset, state.joint_pos
        if ref_points is not None and self.mode == Mode.POLICY:
            l_err = float(np.linalg.norm((live - live[:1]) - (ref_points - ref_points[:1]), axis=-1).mean())
            if base.source == "odometry":
                g_err = float(np.linalg.norm(live - ref_points, axis=-1).mean())
            lines.append(
                "tracking error: "
                + (f"{g_err * 100:.1f} cm, " if g_err is not None else "")
                + f"root-relative {l_err * 100:.1f} cm"
            )
        lines.append(f"base: {base.source}")
        return MonitorFrame(
            tuple(lines),
            base=base,
            live_points=live,
            ref_points=ref_points,
            feet=feet,
            error_m=g_err,
            error_local_m=l_err,
            ref_joint_pos=ref_q,
            joint_error=None if ref_q is None else ref_q - self._q,
        )

    def _base_pose(self, now_s: float, state: ReferenceState | None) -> BasePose:
        if self._base is not None and now_s - self._base[2] <= self.cfg.odometry_timeout_s:
            return BasePose(self._base[0], self._base[1], "odometry")
        if state is not None:
            return BasePose(state.points[0].copy(), state.root_quat.copy(), "reference")
        height = self.kinematics.standing_height if self.kinematics else 0.8
        return BasePose(np.array([0.0, 0.0, height]), np.array([1.0, 0, 0, 0]), "standing")

    def _policy_line(self) -> str:
        if not self.policy_name:
            return "policy: none loaded" if self.mode >= 0 else "policy node: no /policy/status yet"
        return f"policy: {self.policy_name} ({self.policy_sha[:12]}) motion {self.motion_name or '-'}"

    @property
    def mode_name(self) -> str:
        """Name of the policy node's mode ('' before the first status)."""
        try:
            return Mode(self.mode).name
        except ValueError:
            return ""

    def _mode_line(self) -> str:
        return f"mode: {self.mode_name}  phase {self.phase:.2f}" if self.mode_name else "mode: -"


def _horizontal(v: np.ndarray) -> np.ndarray:
    out = np.array(v, float)
    out[2] = 0.0
    return out
