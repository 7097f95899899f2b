"""The real-trajectory dataset of ASAP stage 2: what a policy did on the (real or twin) robot, per tick.

One :class:`RealTrajectory` is an unbroken run of consecutive policy ticks. Row ``t`` holds the state
``s_t`` the policy observed at tick ``t`` and the action ``a_t`` it then applied until tick ``t + 1``;
so ``s_{t+1}`` is the next row (the paper's ``D = {s_0, a_0, s_1, a_1, ...}``, arXiv 2502.01143
§III-A). The base comes from motion capture (the twin's ``/odometry``), joints and the motor torques the
robot reports from ``/lowstate``, actions from the policy record, in normalized action units
(``q* = q_default + scale · a``).

:class:`RealDataset` adds what every trajectory must share (the policy artifact, the robot variant, the
control period, the joint orders) and a content hash that fine-tuned artifacts carry as provenance.
Saved as one ``.npz`` of plain arrays plus a JSON header (no pickle).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from asap_core import g1

FORMAT_VERSION = 1

_ARRAYS = (
    "base_pos_w",
    "base_quat_w",
    "base_lin_vel_w",
    "base_ang_vel_w",
    "joint_pos",
    "joint_vel",
    "action",
    "phase",
)
_OPTIONAL = ("joint_torque",)
"""Arrays a trajectory may lack (files from before they were recorded read without them)."""


@dataclass(frozen=True, eq=False)
class RealTrajectory:
    """One run of consecutive policy ticks (see the module docstring). World frame, quaternions wxyz."""

    name: str
    """Where it came from (episode id, with a segment suffix when an episode was split at a gap)."""
    base_pos_w: np.ndarray
    """(T, 3) pelvis position, m."""
    base_quat_w: np.ndarray
    """(T, 4) pelvis orientation."""
    base_lin_vel_w: np.ndarray
    """(T, 3) pelvis linear velocity, world frame, m/s."""
    base_ang_vel_w: np.ndarray
    """(T, 3) pelvis angular velocity, world frame, rad/s."""
    joint_pos: np.ndarray
    """(T, 29) joint positions, ``asap_core.g1.MOTOR_ORDER``, rad."""
    joint_vel: np.ndarray
    """(T, 29) joint velocities, motor order, rad/s."""
    action: np.ndarray
    """(T, A) applied action, normalized units, in the dataset's ``action_joints`` order."""
    phase: np.ndarray
    """(T,) motion phase the policy used at each tick."""
    joint_torque: np.ndarray | None = None
    """(T, 29) motor torques the robot reported with the state (``LowState`` ``tau_est``), motor order,
    N m; None where the recording has none (datasets written before it was kept)."""

    def __post_init__(self) -> None:
        t = self.base_pos_w.shape[0]
        shapes = {
            "base_pos_w": (t, 3),
            "base_quat_w": (t, 4),
            "base_lin_vel_w": (t, 3),
            "base_ang_vel_w": (t, 3),
            "joint_pos": (t, g1.NUM_MOTORS),
            "joint_vel": (t, g1.NUM_MOTORS),
            "phase": (t,),
            "joint_torque": (t, g1.NUM_MOTORS),
        }
        for name in self.arrays():
            shape = shapes.get(name)  # action: its width is the dataset's, checked below
            if shape is not None and getattr(self, name).shape != shape:
                raise ValueError(
                    f"trajectory {self.name!r}: {name} is {getattr(self, name).shape}, expected {shape}"
                )
        if self.action.ndim != 2 or self.action.shape[0] != t:
            raise ValueError(f"trajectory {self.name!r}: action is {self.action.shape}, expected ({t}, A)")
        if t < 2:
            raise ValueError(f"trajectory {self.name!r}: needs at least 2 ticks, has {t}")
        for name in self.arrays():
            if not np.all(np.isfinite(getattr(self, name))):
                raise ValueError(f"trajectory {self.name!r}: {name} has NaN or inf")

    def arrays(self) -> tuple[str, ...]:
        """The array fields this trajectory holds (the optional ones only where present)."""
        return _ARRAYS + tuple(k for k in _OPTIONAL if getattr(self, k) is not None)

    @property
    def num_steps(self) -> int:
        """Number of ticks T."""
        return self.base_pos_w.shape[0]

    def slice(self, start: int, stop: int) -> RealTrajectory:
        """Rows ``start:stop`` as a trajectory of their own."""
        return RealTrajectory(
            name=f"{self.name}[{start}:{stop}]", **{k: getattr(self, k)[start:stop] for k in self.arrays()}
        )


@dataclass(frozen=True, eq=False)
class RealDataset:
    """Trajectories of one policy on one robot variant, at one control period."""

    trajectories: tuple[RealTrajectory, ...]
    control_dt: float
    """s between rows (the policy period)."""
    action_joints: tuple[str, ...]
    """Joint order of ``action`` (the artifact's policy joints)."""
    policy_sha256: str
    """The artifact that produced every action (ingest refuses mixed episodes; a merge of several
    policies' datasets keeps the first one's and lists every part in ``info["parts"]``)."""
    mode_machine: int
    """The robot variant that reported the states (``LowState.mode_machine``)."""
    info: dict = field(default_factory=dict)
    """Free-form provenance: source bags, dynamics profile of a twin, policy name, ..."""

    def __post_init__(self) -> None:
        if not self.trajectories:
            raise ValueError("a dataset needs at least one trajectory")
        widths = {tr.action.shape[1] for tr in self.trajectories}
        if widths != {len(self.action_joints)}:
            raise ValueError(
                f"action widths {sorted(widths)} differ from {len(self.action_joints)} action joints"
            )

    @property
    def has_torque(self) -> bool:
        """Whether every trajectory carries the reported motor torques."""
        return all(tr.joint_torque is not None for tr in self.trajectories)

    @property
    def num_steps(self) -> int:
        """Rows over all trajectories."""
        return sum(tr.num_steps for tr in self.trajectories)

    @property
    def sha256(self) -> str:
        """Hash of the content (arrays and header), independent of file layout."""
        h = hashlib.sha256(json.dumps(self._header(), sort_keys=True).encode())
        for tr in self.trajectories:
            h.update(tr.name.encode())
            for name in tr.arrays():
                h.update(np.ascontiguousarray(getattr(tr, name), dtype=np.float64).tobytes())
        return h.hexdigest()

    def _header(self) -> dict:
        return {
            "format_version": FORMAT_VERSION,
            "control_dt": self.control_dt,
            "action_joints": list(self.action_joints),
            "policy_sha256": self.policy_sha256,
            "mode_machine": self.mode_machine,
            "info": self.info,
            "trajectories": [tr.name for tr in self.trajectories],
        }

    def save(self, path: str | Path) -> Path:
        """Write ``path`` (.npz): arrays ``<i>/<field>`` plus the JSON header."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        arrays = {
            f"{i}/{name}": getattr(tr, name) for i, tr in enumerate(self.trajectories) for name in tr.arrays()
        }
        tmp = path.with_name(path.name + ".tmp.npz")
        np.savez_compressed(tmp, header=np.array(json.dumps(self._header())), **arrays)
        tmp.replace(path)  # a crash mid-write never leaves a half dataset under the real name
        return path

    @classmethod
    def load(cls, path: str | Path) -> RealDataset:
        """Read a file written by :meth:`save`; refuses other versions with the version found."""
        with np.load(Path(path), allow_pickle=False) as data:
            header = json.loads(str(data["header"]))
            if header.get("format_version") != FORMAT_VERSION:
                raise ValueError(
                    f"{path}: dataset format {header.get('format_version')!r}, "
                    f"this code reads {FORMAT_VERSION}"
                )
            trajectories = tuple(
                RealTrajectory(
                    name=name,
                    **{k: data[f"{i}/{k}"] for k in _ARRAYS},
                    **{k: data[f"{i}/{k}"] for k in _OPTIONAL if f"{i}/{k}" in data},
                )
                for i, name in enumerate(header["trajectories"])
            )
        return cls(
            trajectories=trajectories,
            control_dt=float(header["control_dt"]),
            action_joints=tuple(header["action_joints"]),
            policy_sha256=header["policy_sha256"],
            mode_machine=int(header["mode_machine"]),
            info=header["info"],
        )


def merge_datasets(parts: Sequence[RealDataset]) -> RealDataset:
    """One dataset of several (e.g. ASAP's rounds: each recorded with the policy the round before
    fine-tuned). πΔ models the robot's answer to any (state, action), so the policies may differ; the
    control period, action joints and robot variant may not. ``policy_sha256`` is the first part's,
    every part's hash and provenance are in ``info["parts"]``."""
    if not parts:
        raise ValueError("merge_datasets needs at least one dataset")
    first = parts[0]
    for part in parts[1:]:
        same = (part.control_dt, part.action_joints, part.mode_machine)
        if same != (first.control_dt, first.action_joints, first.mode_machine):
            raise ValueError(
                f"cannot merge datasets of different control period / action joints / robot variant: "
                f"{same} vs {(first.control_dt, first.action_joints, first.mode_machine)}"
            )
    names = [f"{k}/{tr.name}" for k, part in enumerate(parts) for tr in part.trajectories]
    trajectories = tuple(
        replace(tr, name=name)
        for name, tr in zip(names, (tr for part in parts for tr in part.trajectories), strict=True)
    )
    provenance = [{"policy_sha256": p.policy_sha256, "sha256": p.sha256, "info": p.info} for p in parts]
    return replace(first, trajectories=trajectories, info={"parts": provenance})
