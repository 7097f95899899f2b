"""Converting ASAP's clips: FK equality with the source, provenance, the checks, the shipped conversions."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from asap_core import g1
from asap_core.motion import CLIP_DIR, MotionClip, load_clip
from asap_training.cli import convert as cli
from asap_training.motion.convert import joint_limit_excess, self_penetration
from asap_training.motion.formats import load_asap_pkl

SHIPPED = sorted(CLIP_DIR.glob("*.json"))
KICK = "video_kick_level1_filter_amass.pkl"


def test_a_converted_clip_has_the_source_fk_and_names_its_source(asap_data, kin, tmp_path):
    source = asap_data / "motions" / KICK
    cli.main([str(source), "--out", str(tmp_path)])
    record = json.loads((tmp_path / "video_kick_level1.json").read_text())
    assert record["source_sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()
    assert record["source_file"] == KICK and record["conversion"].startswith("asap-convert ")
    assert (tmp_path / "LICENSE.asap").read_text() == (asap_data / "LICENSE.asap").read_text()
    converted = load_clip(tmp_path / "video_kick_level1.npz")
    (original,) = load_asap_pkl(source, kin.joint_axes())
    assert converted.name == "video_kick_level1" and converted.num_frames == record["frames"] == 119
    error = np.abs(kin.points(kin.qpos(converted))[0] - kin.points(kin.qpos(original))[0]).max()
    assert error < 1e-5 and record["checks"]["fk_max_error_m"] == pytest.approx(error, abs=1e-9)


@pytest.mark.parametrize("record_path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_each_shipped_conversion_matches_its_record_and_source(record_path, kin, request):
    record = json.loads(record_path.read_text())
    clip = load_clip(record_path.with_suffix(".npz"))
    assert clip.num_frames == record["frames"] and clip.fps == record["fps"]
    assert (CLIP_DIR / "LICENSE.asap").is_file() and "ASAP" in record["licence"]
    source = request.getfixturevalue("asap_data") / "motions" / record["source_file"]  # skips without it
    assert hashlib.sha256(source.read_bytes()).hexdigest() == record["source_sha256"]
    (original,) = load_asap_pkl(source, kin.joint_axes())
    assert np.abs(kin.points(kin.qpos(clip))[0] - kin.points(kin.qpos(original))[0]).max() < 1e-5


def _pose_clip(*frames: dict[str, float]) -> MotionClip:
    """Frames of the default pose with some joints moved (rad, one dict per frame), pelvis 0.8 m up."""
    names = g1.MOTOR_ORDER
    q = np.tile(np.asarray(g1.default_pose(names), dtype=float), (len(frames), 1))
    for t, angles in enumerate(frames):
        for name, value in angles.items():
            q[t, names.index(name)] = value
    return MotionClip(name="poses", fps=30.0, root_pos_w=np.tile([0.0, 0.0, 0.8], (len(frames), 1)),
                      root_quat_w=np.tile([1.0, 0.0, 0.0, 0.0], (len(frames), 1)), joint_names=tuple(names),
                      joint_pos=q)


def test_self_penetration_finds_an_arm_through_the_torso(kin):
    crossed = {"left_shoulder_roll_joint": -1.2, "left_shoulder_pitch_joint": -0.3, "left_elbow_joint": 0.2}
    report = self_penetration(kin.model, kin.qpos(_pose_clip({}, crossed)))
    assert report["frames"] == 1 and report["deepest_m"] > 0.01 and "left_" in report["deepest_pair"]


def test_joint_limit_excess_is_measured_per_joint(kin):
    high = kin.model.jnt_range[kin.model.joint("left_knee_joint").id][1]
    report = joint_limit_excess(kin, _pose_clip({"left_knee_joint": high + 0.2}, {}))
    assert set(report) == {"left_knee_joint"}
    assert report["left_knee_joint"] == {"max_excess_rad": pytest.approx(0.2, abs=1e-4), "fraction": 0.5}


def test_convert_refuses_without_a_licence(tmp_path, capsys):
    lone = tmp_path / "clip.pkl"
    lone.write_bytes(b"")
    with pytest.raises(SystemExit):
        cli.main([str(lone), "--out", str(tmp_path / "out")])
    assert "--licence" in capsys.readouterr().err
