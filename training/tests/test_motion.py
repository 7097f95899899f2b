"""Motion formats, FK and the motion library."""

from __future__ import annotations

import numpy as np
import pytest

from asap_core import g1, quat
from asap_core.g1 import EXTENDED_POINTS, RIGID_BODIES, TRACKED_POINTS
from asap_core.motion import MotionClip, load_beyondmimic_npz, save_clip, shipped_clips
from asap_sim.kinematics import G1Kinematics
from asap_training.motion import MotionLibrary, build_library, reference_from_clip
from asap_training.motion.formats import load_asap_pkl, load_lafan_csv, load_motion
from asap_training.motion.safe_pickle import safe_load

LEGS_AND_PELVIS = 13


def _asap_clips(asap_data, kin, names=("video_squat_level1", "video_kick_level1", "video_CR7_level1")):
    return {
        p: load_asap_pkl(p, kin.joint_axes())[0]
        for p in sorted((asap_data / "motions").glob("*.pkl"))
        if p.name.startswith(names)
    }


def test_pose_aa_reproduces_dof_and_root_rot(asap_data, kin):
    for path in sorted((asap_data / "motions").glob("*.pkl")):
        raw = next(iter(safe_load(path).values()))
        clip = load_asap_pkl(path, kin.joint_axes())[0]
        np.testing.assert_allclose(clip.joint_pos, raw["dof"], atol=1e-6, err_msg=path.name)
        err = quat.angle(quat.mul(quat.from_xyzw(np.asarray(raw["root_rot"])), quat.conj(clip.root_quat_w)))
        assert err.max() < 1e-5, path.name
        np.testing.assert_allclose(clip.root_pos_w, raw["root_trans_offset"], atol=1e-6)
        assert clip.fps == raw["fps"] == 30


def test_fk_of_pose_aa_matches_asap_23dof_model(asap_data, kin):
    """Our FK (29-DoF G1, wrists at 0) against MuJoCo FK on ASAP's own 23-DoF motion model.

    Legs and pelvis agree to < 1 mm; the rest within 13 mm, which is the 1 cm lower torso origin / waist
    pitch axis of the newer G1 revision (torso 0.044 vs ASAP's 0.054 above the waist roll joint).
    """
    import mujoco

    theirs = G1Kinematics(
        mujoco.MjModel.from_xml_path(str(asap_data / "robot" / "g1_29dof_anneal_23dof_fitmotionONLY.xml"))
    )
    for path, clip in _asap_clips(asap_data, kin).items():
        ours_pos, ours_rot = kin.points(kin.qpos(clip))
        ref_pos, ref_rot = theirs.points(theirs.qpos(clip))
        dist = np.linalg.norm(ours_pos - ref_pos, axis=-1)
        assert dist[:, :LEGS_AND_PELVIS].max() < 1e-3, path.name
        assert dist.max() < 0.013, (path.name, dist.max(0))
        assert quat.angle(quat.mul(ours_rot, quat.conj(ref_rot))).max() < 1e-5


def test_asap_clips_float_and_grounding_puts_them_on_the_floor(asap_data, kin):
    """ASAP's squat hovers ~10 cm; grounded, its lower foot stays within 3 cm of the standing height
    (the retargeted feet bob by ~2.8 cm; grounding never lets them sink)."""
    feet = [RIGID_BODIES.index(f) for f in ("left_ankle_roll_link", "right_ankle_roll_link")]
    standing = kin.points(kin.qpos(kin.grounded(_synthetic_clip())))[0][:, feet, 2].min()
    _, clip = next(iter(_asap_clips(asap_data, kin, ("video_squat_level1",)).items()))
    raw = kin.points(kin.qpos(clip))[0][:, feet, 2].min(axis=1)
    low = kin.points(kin.qpos(kin.grounded(clip)))[0][:, feet, 2].min(axis=1)
    assert raw.min() - standing > 0.05
    assert low.min() == pytest.approx(standing, abs=1e-9)
    assert low.max() - standing < 0.03


def test_extended_points_follow_their_parents(kin):
    clip = _synthetic_clip()
    pos, rot = kin.points(kin.qpos(clip)[:3])
    for name, (parent, offset) in EXTENDED_POINTS.items():
        i, p = TRACKED_POINTS.index(name), RIGID_BODIES.index(parent)
        np.testing.assert_allclose(
            pos[:, i], pos[:, p] + quat.rotate(rot[:, p], np.array(offset)), atol=1e-12
        )
        np.testing.assert_allclose(np.linalg.norm(pos[:, i] - pos[:, p], axis=-1), np.linalg.norm(offset))
    # the head is 0.42 m straight above the torso origin when upright
    assert pos[0, TRACKED_POINTS.index("head_link"), 2] - pos[
        0, RIGID_BODIES.index("torso_link"), 2
    ] == pytest.approx(0.42, abs=1e-3)


def _synthetic_clip(frames: int = 31, fps: float = 30.0) -> MotionClip:
    t = np.arange(frames) / fps
    names = g1.names("asap23")
    joint_pos = np.tile(g1.default_pose(names), (frames, 1))
    joint_pos[:, names.index("left_elbow_joint")] = 0.5 * t  # 0.5 rad/s
    root = np.stack([1.0 * t, np.zeros_like(t), np.full_like(t, 0.78)], axis=1)  # 1 m/s forward
    yaw = quat.from_yaw(0.3 * t)  # 0.3 rad/s about z
    return MotionClip("synthetic", fps, root, yaw, names, joint_pos)


def test_reference_velocities_and_sampling(kin):
    clip = _synthetic_clip()
    ref = reference_from_clip(clip, kin, g1.names("asap23"))
    mid = slice(5, -5)  # away from the edges of the Gaussian smoothing
    np.testing.assert_allclose(ref.lin_vel_w[mid, 0, 0], 1.0, atol=1e-6)
    np.testing.assert_allclose(ref.ang_vel_w[mid, :LEGS_AND_PELVIS, 2], 0.3, atol=1e-6)  # the elbow spins too
    np.testing.assert_allclose(ref.dof_vel[mid, g1.names("asap23").index("left_elbow_joint")], 0.5, atol=1e-9)
    lib = MotionLibrary([ref])
    assert lib.duration_s[0] == pytest.approx(1.0)
    # halfway between frames 3 and 4: lerp of positions, slerp of rotations
    s = lib.sample(np.array([0, 0]), np.array([3.5 / 30, 99.0]))
    np.testing.assert_allclose(s.pos_w[0], 0.5 * (ref.pos_w[3] + ref.pos_w[4]), atol=1e-12)
    np.testing.assert_allclose(quat.yaw(s.quat_w[0, 0]), 0.3 * 3.5 / 30, atol=1e-9)
    np.testing.assert_allclose(s.pos_w[1], ref.pos_w[-1])  # clamped past the end
    np.testing.assert_allclose(lib.phase(np.array([0, 0]), np.array([0.25, 2.0])), [0.25, 1.0])


def test_formats_round_trip_to_the_same_motion(tmp_path, kin):
    clip = _synthetic_clip()
    save_clip(clip, tmp_path / "ours.npz")
    ours = load_motion(tmp_path / "ours.npz", kin.joint_axes())[0]
    # Unitree LAFAN1 CSV: root xyz, quaternion xyzw, 29 joints in motor order
    motor = g1.names("motor")
    full = np.zeros((clip.num_frames, 29))
    full[:, [motor.index(n) for n in clip.joint_names]] = clip.joint_pos
    rows = np.concatenate([clip.root_pos_w, clip.root_quat_w[:, [1, 2, 3, 0]], full], axis=1)
    np.savetxt(tmp_path / "lafan.csv", rows, delimiter=",")
    lafan = load_lafan_csv(tmp_path / "lafan.csv", fps=clip.fps)
    # BeyondMimic/mjlab npz: joint_pos in Isaac Lab order, root = body 0
    isaac = g1.names("isaaclab")
    body_pos = np.repeat(clip.root_pos_w[:, None], 3, axis=1)
    body_quat = np.repeat(clip.root_quat_w[:, None], 3, axis=1)
    np.savez(
        tmp_path / "bm.npz",
        fps=np.array([clip.fps]),
        joint_pos=full[:, [motor.index(n) for n in isaac]],
        body_pos_w=body_pos,
        body_quat_w=body_quat,
    )
    bm = load_beyondmimic_npz(tmp_path / "bm.npz")
    expected, _ = kin.points(kin.qpos(clip))
    for other in (ours, lafan, bm):
        got, _ = kin.points(kin.qpos(other))
        np.testing.assert_allclose(got, expected, atol=1e-5)


def test_asap_pickle_with_action_key(tmp_path, kin):
    import joblib

    clip = _synthetic_clip()
    axes = kin.joint_axes()
    pose_aa = np.zeros((clip.num_frames, 27, 3))
    pose_aa[:, 0] = quat.to_rotvec(clip.root_quat_w)
    pose_aa[:, 1:24] = clip.joint_pos[..., None] * np.stack([axes[n] for n in clip.joint_names])
    action = np.ones((clip.num_frames, 23))
    joblib.dump(
        {"c": {"root_trans_offset": clip.root_pos_w, "pose_aa": pose_aa, "fps": 30, "action": action}},
        tmp_path / "c.pkl",
    )
    got = load_asap_pkl(tmp_path / "c.pkl", axes)[0]
    np.testing.assert_allclose(got.joint_pos, clip.joint_pos, atol=1e-12)
    np.testing.assert_array_equal(got.action, action)


def test_shipped_clips_are_in_limits_and_the_authored_ones_planted(kin):
    from asap_training.motion.authoring import CLIPS

    names = g1.names("asap23")
    lo, hi = g1.joint_array("lower", names), g1.joint_array("upper", names)
    lib = build_library(shipped_clips(), kin, names)
    assert set(shipped_clips()) >= {"squat", "arm_swing", "side_step", "kick"} == set(CLIPS)
    for name, m in zip(shipped_clips(), lib.motions, strict=True):
        assert np.all(m.dof_pos >= lo - 1e-6) and np.all(m.dof_pos <= hi + 1e-6), name
        if name in CLIPS:  # authored: always one sole on the floor (ASAP's converted clips jump)
            feet = [RIGID_BODIES.index(f) for f in ("left_ankle_roll_link", "right_ankle_roll_link")]
            lowest = m.pos_w[:, feet, 2].min(axis=1)
            assert np.ptp(lowest) < 1e-3, name


def test_the_monitors_ghost_is_the_reference_training_tracks(kin):
    """The monitor (robot side: asap_core + asap_sim, no asap_training) samples the library's reference."""
    from asap_bringup.monitor_core import Reference
    from asap_core.motion import CLIP_DIR, load_npz

    lib = build_library(["arm_swing"], kin, g1.MOTOR_ORDER)
    ghost = Reference(load_npz(CLIP_DIR / "arm_swing.npz"), kin)
    assert ghost.duration_s == lib.duration_s[0]
    for phase in (0.0, 0.137, 0.5, 0.999, 1.0):
        want = lib.sample(np.array([0]), np.array([phase * lib.duration_s[0]]))
        got = ghost.sample(phase)
        np.testing.assert_array_equal(got.points, want.pos_w[0])
        np.testing.assert_array_equal(got.root_quat, want.quat_w[0, 0])
        np.testing.assert_array_equal(got.joint_pos, want.dof_pos[0])
