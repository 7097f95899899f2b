"""Motion clips: the shipped clips load, joints by name, the .npz round trip, frames blended by time."""

from __future__ import annotations

import json

import numpy as np
import pytest

from asap_core import g1
from asap_core.motion import (
    CLIP_DIR,
    MotionClip,
    MotionFormatError,
    frame_blend,
    lerp_frames,
    load_npz,
    save_clip,
    shipped_clips,
)


def _clip(frames: int = 5, fps: float = 10.0) -> MotionClip:
    t = np.arange(frames, dtype=float)
    root = np.stack([t, 0 * t, 0.8 + 0 * t], axis=1)
    quat = np.tile([1.0, 0.0, 0.0, 0.0], (frames, 1))
    names = ("left_knee_joint", "right_knee_joint")
    return MotionClip("c", fps, root, quat, names, np.stack([0.1 * t, -0.1 * t], axis=1))


def test_the_shipped_clips_are_g1_motions() -> None:
    assert {"arm_swing", "squat", "side_step", "kick"} <= set(shipped_clips())
    for name in shipped_clips():
        clip = load_npz(CLIP_DIR / f"{name}.npz")
        record = CLIP_DIR / f"{name}.json"  # converted clips (ASAP's, 30 fps) carry their provenance
        fps = json.loads(record.read_text())["fps"] if record.is_file() else 50.0  # authored: 50 fps
        assert clip.name == name and clip.fps == fps and clip.num_frames > 90
        assert set(clip.joint_names) <= set(g1.MOTOR_ORDER)
        np.testing.assert_allclose(np.linalg.norm(clip.root_quat_w, axis=1), 1.0, atol=1e-9)


def test_joints_are_taken_by_name_and_missing_ones_are_zero() -> None:
    clip = _clip()
    q = clip.joints(("right_knee_joint", "left_wrist_roll_joint", "left_knee_joint"))
    np.testing.assert_array_equal(q[:, 0], clip.joint_pos[:, 1])
    np.testing.assert_array_equal(q[:, 1], 0.0)
    np.testing.assert_array_equal(q[:, 2], clip.joint_pos[:, 0])


def test_save_and_load_round_trip_and_foreign_files_are_refused(tmp_path) -> None:
    clip = _clip()
    save_clip(clip, tmp_path / "c.npz")
    back = load_npz(tmp_path / "c.npz")
    assert back.joint_names == clip.joint_names and back.fps == clip.fps
    np.testing.assert_allclose(back.joint_pos, clip.joint_pos, atol=1e-6)
    np.savez(tmp_path / "other.npz", fps=np.array(30.0))
    with pytest.raises(MotionFormatError, match="lacks"):
        load_npz(tmp_path / "other.npz")


def test_frames_blend_linearly_and_times_are_clamped_to_the_clip() -> None:
    clip = _clip(frames=5, fps=10.0)  # 0.4 s
    times = np.array([-1.0, 0.0, 0.125, 0.4, 9.0])
    f0, f1, w = frame_blend(times, clip.duration_s, clip.fps, clip.num_frames)
    np.testing.assert_array_equal(f0, [0, 0, 1, 4, 4])
    np.testing.assert_array_equal(f1, [1, 1, 2, 4, 4])
    x = lerp_frames(clip.root_pos_w, f0, f1, w)[:, 0]  # x = frame index
    np.testing.assert_allclose(x, [0.0, 0.0, 1.25, 4.0, 4.0])
