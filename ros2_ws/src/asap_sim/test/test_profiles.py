"""Dynamics profiles: shipped files load, patterns resolve by name, bad input names key and range."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from asap_core import g1
from asap_sim import profiles
from asap_sim.profiles import (
    KEYS,
    ProfileError,
    load_profile,
    nominal_profile,
    profile_from_dict,
    shipped_profiles,
)

ANKLES = [i for i, n in enumerate(g1.MOTOR_ORDER) if "ankle" in n]


def test_shipped_profiles_load() -> None:
    assert {"nominal", "weak_ankles", "latency", "heavy_torso"} <= set(shipped_profiles())
    for name in shipped_profiles():
        profile = load_profile(name)
        assert profile.name == name and profile.description


def test_nominal_is_the_ideal_g1() -> None:
    p = nominal_profile()
    for key in ("kp_scale", "kd_scale", "torque_scale"):
        np.testing.assert_array_equal(getattr(p, key), np.ones(g1.NUM_MOTORS))
    np.testing.assert_array_equal(p.armature, [g1.ARMATURE[j.actuator] for j in g1.JOINTS])
    assert p.actuation_latency_ms == 0.0 and p.ground_friction == 1.0 and p.gyro_noise_std == 0.0
    assert not p.joint_friction.any() and not p.joint_damping.any()


def test_nominal_yaml_spells_out_every_key() -> None:
    import yaml

    text = (Path(load_profile("nominal").source)).read_text()
    assert set(yaml.safe_load(text)) == set(KEYS)


def test_later_patterns_override_earlier_ones() -> None:
    p = profile_from_dict({"torque_scale": {".*": 0.9, ".*_ankle_.*": 0.5}}, name="t")
    assert p.torque_scale[ANKLES].tolist() == [0.5] * 4
    assert np.count_nonzero(p.torque_scale == 0.9) == g1.NUM_MOTORS - 4


def test_a_pattern_that_later_ones_override_everywhere_is_refused() -> None:
    """The same keys in sorted order (as ``yaml.safe_dump`` writes them by default): the general pattern
    last would undo the specific one in silence; refused, naming both. Overridden with its own value,
    partly, or by narrower patterns that together cover it (SysID's identified families over a base
    profile's pattern), a pattern still means what it says."""
    specific_first = {"(left|right)_knee_joint": 0.5, ".*": 1.0}
    refused = r"kp_scale: pattern '\(left\|right\)_knee_joint' sets nothing, the later, more general "
    with pytest.raises(ProfileError, match=refused + r"\['\.\*'\] override it.*sort_keys=False"):
        profile_from_dict({"kp_scale": specific_first}, name="sorted")
    same = profile_from_dict({"kp_scale": {".*_knee_joint": 1.0, ".*": 1.0}}, name="same")
    assert same.kp_scale.tolist() == [1.0] * g1.NUM_MOTORS
    partly = profile_from_dict({"kp_scale": {".*_ankle_.*": 0.5, ".*_ankle_roll_joint": 0.8}}, name="partly")
    assert sorted(partly.kp_scale[ANKLES].tolist()) == [0.5, 0.5, 0.8, 0.8]
    families = {".*_ankle_.*": 0.5, "(left|right)_ankle_pitch_joint": 0.7,
                "(left|right)_ankle_roll_joint": 0.9}
    covered = profile_from_dict({"torque_scale": families}, name="identified")
    assert sorted(covered.torque_scale[ANKLES].tolist()) == [0.7, 0.7, 0.9, 0.9]


def test_weak_ankles_weakens_only_ankles() -> None:
    p = load_profile("weak_ankles")
    assert p.torque_scale[ANKLES].tolist() == [0.5] * 4
    assert np.delete(p.torque_scale, ANKLES).tolist() == [1.0] * (g1.NUM_MOTORS - 4)


def test_load_by_path(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text("actuation_latency_ms: 12\nseed: 7\n")
    p = load_profile(path)
    assert (p.name, p.actuation_latency_ms, p.seed) == ("mine", 12.0, 7)


def test_arrays_are_read_only() -> None:
    with pytest.raises(ValueError):
        nominal_profile().kp_scale[0] = 2.0


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"kp_scal": 1.0}, r"unknown dynamics profile key\(s\) \['kp_scal'\]; allowed keys: \['description'"),
        ({"kp_scale": 12}, r"kp_scale\['\.\*'\] = 12 is outside the allowed range \[0\.0, 5\.0\]"),
        ({"torque_scale": {".*ankle.*": -1}}, r"torque_scale\['\.\*ankle\.\*'\] = -1 .*\[0\.0, 2\.0\]"),
        ({"ground_friction": 0.0}, r"ground_friction = 0\.0 is outside the allowed range \[0\.05, 3\.0\]"),
        ({"actuation_latency_ms": "30"}, r"actuation_latency_ms must be a number in \[0\.0, 200\.0\]"),
        ({"joint_damping": {"elbow": 1.0}}, r"joint_damping: pattern 'elbow' matches no G1 joint"),
        ({"joint_friction": {"(": 1.0}}, r"joint_friction: '\(' is not a valid regular expression"),
        ({"base_com_offset": [0.0, 0.1]}, r"base_com_offset must be a list \[x, y, z\]"),
        ({"base_com_offset": [0.0, 0.0, 0.5]}, r"base_com_offset\[2\] = 0\.5 is outside .*\[-0\.2, 0\.2\]"),
        ({"seed": -1}, r"seed = -1 must be an integer in \[0, 4294967295\]"),
        ({"seed": True}, r"seed = True must be an integer"),
        ({"link_mass_scale": {"torso_link": 50}}, r"link_mass_scale\['torso_link'\] = 50 .*\[0\.1, 5\.0\]"),
    ],
)
def test_errors_name_key_and_allowed_range(data: dict, message: str) -> None:
    with pytest.raises(ProfileError, match=message):
        profile_from_dict(data, name="bad")


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("kp_scale: 9\n")
    with pytest.raises(ProfileError, match=r"broken\.yaml: kp_scale"):
        load_profile(path)
    path.write_text("- a list\n")
    with pytest.raises(ProfileError, match="must be a YAML mapping"):
        load_profile(path)


def test_unknown_profile_lists_the_shipped_ones() -> None:
    with pytest.raises(ProfileError, match=r"no shipped dynamics profile 'nope'; shipped: \[.*'nominal'"):
        load_profile("nope")
    with pytest.raises(ProfileError, match="does not exist"):
        load_profile("/nonexistent/x.yaml")


def test_random_gap_is_the_same_for_the_same_seed() -> None:
    a, b = profiles.random_profile_dict(11), profiles.random_profile_dict(11)
    assert a == b
    assert profiles.random_profile_dict(12) != a
    loaded = profiles.load_profile("random:11")
    assert loaded.name == "random:11"
    assert np.array_equal(loaded.torque_scale, profiles.random_profile(11).torque_scale)


def test_random_gaps_are_valid_and_span_their_ranges() -> None:
    """200 seeds: every drawn mapping passes the same validation a YAML file does (a value outside
    KEYS would raise), each effect stays inside RandomGapCfg's range, and the draws are not degenerate
    (every per-joint effect reaches some joints, and different joints across seeds)."""
    cfg = profiles.RandomGapCfg()
    nominal = profiles.nominal_profile()
    touched = {key: set() for key in ("torque_scale", "joint_friction", "joint_damping", "armature")}
    latencies = []
    for seed in range(200):
        data = profiles.random_profile_dict(seed, cfg)
        p = profiles.profile_from_dict(data, name=f"random:{seed}")
        weak = p.torque_scale < 1.0
        lo, hi = cfg.torque_scale
        assert np.all((p.torque_scale[weak] >= lo) & (p.torque_scale[weak] <= hi))
        heavier = p.armature / nominal.armature
        assert np.all((heavier >= cfg.armature_scale[0] - 1e-3) & (heavier <= cfg.armature_scale[1] + 1e-3))
        assert cfg.actuation_latency_ms[0] <= p.actuation_latency_ms <= cfg.actuation_latency_ms[1]
        assert max(abs(p.base_com_offset[0]), abs(p.base_com_offset[1])) <= cfg.com_offset
        for key in touched:
            touched[key] |= set(data[key])
        latencies.append(p.actuation_latency_ms)
    for key, joints in touched.items():
        assert len(joints) == len(g1.MOTOR_ORDER), f"{key} never reached {set(g1.MOTOR_ORDER) - joints}"
    assert np.ptp(latencies) > 0.8 * np.ptp(cfg.actuation_latency_ms)


def test_random_gap_names_are_checked() -> None:
    for bad in ("random:", "random:x", "random:-1", f"random:{2**32}"):
        with pytest.raises(profiles.ProfileError, match=r"random:<seed>"):
            profiles.load_profile(bad)
