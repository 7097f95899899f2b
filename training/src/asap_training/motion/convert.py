"""Converting retargeted clips (ASAP's ``.pkl``) into the project's ``.npz`` clips, with their provenance and
the checks a clip should pass before a policy trains on it.

A converted clip holds the source's frames unchanged (float32): the motion library grounds every clip when
it loads it, so grounding is not baked in. The provenance record names the source file and its sha256, the
clip key inside it, the command that converted it and the licence; the checks are measured on the converted
clip against the source and the G1 model:

* ``fk_max_error_m``: the 27 tracked points of the converted clip against the source's (float32 storage);
* feet: how far the source floats above a flat-footed stance (``source_float_m``; the library removes it) and
  the share of frames with both feet more than 3 cm above the floor once grounded (``airborne_fraction``:
  the flight of a jump, or a clip that floats in places);
* ``self_penetration``: frames in which two robot collision geoms overlap by more than 1 cm (the G1 model
  lets its own links pass through each other in simulation; a motion that does is not one to track);
* ``joint_limits``: per joint past its range in the model, the largest excess (rad) and the share of frames.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from asap_core import g1
from asap_core.motion import MotionClip, load_clip, save_clip
from asap_sim.kinematics import G1Kinematics
from asap_training.motion.formats import load_asap_pkl

SOURCE_SUFFIX = "_filter_amass"
"""ASAP's file names end in it; the converted clip's name leaves it out."""
AIRBORNE_M = 0.03
PENETRATION_M = 0.01
LIMIT_TOLERANCE_RAD = 0.01


@dataclasses.dataclass(frozen=True)
class Converted:
    """One converted clip: where it went, and its provenance record (what ``<name>.json`` holds)."""

    path: Path
    record: dict[str, Any]


def clip_name(source: Path) -> str:
    """The converted clip's name: the source file's stem without ASAP's suffix."""
    return source.stem.removesuffix(SOURCE_SUFFIX)


def convert_asap_pkl(source: Path, out_dir: Path, kin: G1Kinematics, command: str) -> list[Converted]:
    """Convert every clip of an ASAP ``.pkl`` (read through the restricted unpickler) into ``out_dir``:
    ``<name>.npz`` and ``<name>.json`` (provenance + checks). A file with several clips numbers them."""
    clips = load_asap_pkl(source, kin.joint_axes())
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    out_dir.mkdir(parents=True, exist_ok=True)
    converted = []
    for i, clip in enumerate(clips):
        name = clip_name(source) if len(clips) == 1 else f"{clip_name(source)}_{i}"
        path = out_dir / f"{name}.npz"
        save_clip(dataclasses.replace(clip, name=name), path)
        record = {
            "name": name,
            "source_file": source.name,
            "source_sha256": digest,
            "source_clip": clip.name,
            "licence": "MIT, (c) 2025 ASAP Team: LICENSE.asap beside this file",
            "conversion": command,
            "fps": clip.fps,
            "frames": clip.num_frames,
            "duration_s": round(clip.duration_s, 4),
            "checks": check_clip(load_clip(path), clip, kin),
        }
        path.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")
        converted.append(Converted(path, record))
    return converted


def check_clip(converted: MotionClip, source: MotionClip, kin: G1Kinematics) -> dict[str, Any]:
    """The checks of the module docstring, as a JSON-ready dict."""
    points = kin.points(kin.qpos(converted))[0]
    fk_error = float(np.abs(points - kin.points(kin.qpos(source))[0]).max())
    grounded = kin.grounded(converted)
    feet = [g1.RIGID_BODIES.index(f) for f in g1.FEET]
    foot_z = kin.points(kin.qpos(grounded))[0][:, feet, 2]
    standing_z = foot_z.min()  # grounding puts the clip's lowest foot at the flat-footed height
    return {
        "fk_max_error_m": fk_error,
        "source_float_m": round(float(converted.root_pos_w[0, 2] - grounded.root_pos_w[0, 2]), 4),
        "airborne_fraction": round(float(((foot_z - standing_z) > AIRBORNE_M).all(axis=1).mean()), 4),
        "self_penetration": self_penetration(kin.model, kin.qpos(grounded)),
        "joint_limits": joint_limit_excess(kin, converted),
    }


def self_penetration(model: mujoco.MjModel, qpos: np.ndarray) -> dict[str, Any]:
    """Frames where two robot collision geoms overlap by more than :data:`PENETRATION_M`, with the deepest
    overlap and its geom pair (self-collision switched on in a copy of the model; parent-child pairs are
    excluded, as MuJoCo does)."""
    m = copy_with_self_collision(model)
    d = mujoco.MjData(m)
    floor = {i for i in range(m.ngeom) if m.geom_bodyid[i] == 0}
    frames, deepest, pair = 0, 0.0, ""
    for q in qpos:
        d.qpos[:] = q
        mujoco.mj_forward(m, d)
        depth, names = 0.0, ""
        for c in d.contact[: d.ncon]:
            if c.geom1 in floor or c.geom2 in floor or -c.dist <= depth:
                continue
            depth, names = -c.dist, f"{m.geom(c.geom1).name} / {m.geom(c.geom2).name}"
        frames += depth > PENETRATION_M
        if depth > deepest:
            deepest, pair = depth, names
    return {"frames": int(frames), "fraction": round(frames / len(qpos), 4), "deepest_m": round(deepest, 4),
            "deepest_pair": pair}


def copy_with_self_collision(model: mujoco.MjModel) -> mujoco.MjModel:
    """A copy of ``model`` in which every collision geom of the robot collides with every other."""
    m = copy.copy(model)
    robot = (m.geom_bodyid != 0) & ((m.geom_contype != 0) | (m.geom_conaffinity != 0))
    m.geom_contype[robot], m.geom_conaffinity[robot] = 1, 1
    return m


def joint_limit_excess(kin: G1Kinematics, clip: MotionClip) -> dict[str, dict[str, float]]:
    """Joints past their range by more than :data:`LIMIT_TOLERANCE_RAD` somewhere in the clip: the largest
    excess (rad) and the share of frames past it."""
    report = {}
    for j, name in enumerate(clip.joint_names):
        low, high = kin.model.jnt_range[kin.model.joint(name).id]
        q = clip.joint_pos[:, j]
        excess = np.maximum(low - q, q - high)
        if excess.max() > LIMIT_TOLERANCE_RAD:
            report[name] = {"max_excess_rad": round(float(excess.max()), 4),
                            "fraction": round(float((excess > LIMIT_TOLERANCE_RAD).mean()), 4)}
    return report


def summary_line(record: dict[str, Any]) -> str:
    """One line per converted clip for the command's output."""
    c, overlap = record["checks"], record["checks"]["self_penetration"]
    limits = ", ".join(f"{k} +{v['max_excess_rad']:.2f}" for k, v in c["joint_limits"].items()) or "none"
    return (f"{record['name']}: {record['frames']} frames, {record['duration_s']:.2f} s; FK error "
            f"{c['fk_max_error_m'] * 1e3:.4f} mm; floats {c['source_float_m'] * 100:.1f} cm; airborne "
            f"{c['airborne_fraction']:.0%}; self-penetration {overlap['fraction']:.0%} of frames "
            f"(deepest {overlap['deepest_m'] * 100:.1f} cm); past joint limits: {limits}")

