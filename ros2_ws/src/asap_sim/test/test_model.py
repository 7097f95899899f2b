"""The shared model builder: floor, motors, sensors, profile dynamics, and the MJCF contract."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import pytest

from asap_core import g1
from asap_sim.model import FEET, FLOOR, SENSORS, G1Indices, ModelError, build_model, standing_base_height
from asap_sim.motor import EFFORT_LIMIT, MotorCommand, MotorParams, drive_ctrl, pd_torque
from asap_sim.profiles import ProfileError, load_profile, profile_from_dict


@pytest.fixture(scope="module")
def nominal() -> mujoco.MjModel:
    return build_model()


def test_joints_motors_and_sensors(nominal: mujoco.MjModel) -> None:
    idx = G1Indices.from_model(nominal)
    assert nominal.nu == 3 * g1.NUM_MOTORS  # bias, kp, kd drive actuators per joint
    assert tuple(nominal.actuator(i).name for i in idx.actuator) == g1.MOTOR_ORDER
    assert idx.drive_ctrl == slice(0, 3 * g1.NUM_MOTORS)
    assert tuple(nominal.joint(int(nominal.dof_jntid[a])).name for a in idx.qvel) == g1.MOTOR_ORDER
    assert {nominal.sensor(i).name for i in range(nominal.nsensor)} == set(SENSORS)
    assert nominal.opt.timestep == 0.002


def test_mjcf_limits_match_the_joint_table(nominal: mujoco.MjModel) -> None:
    for joint in g1.JOINTS:
        np.testing.assert_allclose(nominal.joint(joint.name).range, [joint.lower, joint.upper], atol=1e-4)


def test_training_timestep() -> None:
    assert build_model(timestep=0.005).opt.timestep == 0.005


def test_nominal_joint_dynamics(nominal: mujoco.MjModel) -> None:
    idx = G1Indices.from_model(nominal)
    np.testing.assert_allclose(nominal.dof_armature[idx.qvel], [g1.ARMATURE[j.actuator] for j in g1.JOINTS])
    assert not nominal.dof_damping[idx.qvel].any() and not nominal.dof_frictionloss[idx.qvel].any()
    assert nominal.geom(FLOOR).friction[0] == 1.0


def test_profile_changes_the_model(nominal: mujoco.MjModel) -> None:
    profile = profile_from_dict(
        {"armature": {".*": 0.03, "right_shoulder_pitch_joint": 0.04}, "joint_damping": {".*knee.*": 2.0},
         "joint_friction": 0.1, "ground_friction": 0.4, "link_mass_scale": {"torso_link": 1.5},
         "base_com_offset": [0.01, 0.0, -0.02]}, name="t")
    model = build_model(profile)
    idx = G1Indices.from_model(model)
    armature = dict(zip(g1.MOTOR_ORDER, model.dof_armature[idx.qvel], strict=True))
    assert armature["right_shoulder_pitch_joint"] == 0.04 and armature["left_knee_joint"] == 0.03
    assert model.joint("left_knee_joint").damping[0] == 2.0 and model.dof_damping[idx.qvel].sum() == 4.0
    np.testing.assert_allclose(model.dof_frictionloss[idx.qvel], 0.1)
    assert model.geom(FLOOR).friction[0] == 0.4
    torso = nominal.body("torso_link")
    assert model.body("torso_link").mass[0] == pytest.approx(1.5 * torso.mass[0])
    np.testing.assert_allclose(model.body("torso_link").inertia, 1.5 * torso.inertia)
    np.testing.assert_allclose(model.body("pelvis").ipos - nominal.body("pelvis").ipos, [0.01, 0, -0.02],
                               atol=1e-9)


def test_heavy_torso_is_heavier(nominal: mujoco.MjModel) -> None:
    heavy = build_model(load_profile("heavy_torso"))
    assert heavy.body_subtreemass[1] > nominal.body_subtreemass[1] + 2.0


def test_mass_pattern_must_match_a_body() -> None:
    with pytest.raises(ModelError, match="'torso' matches no G1 body"):
        build_model(profile_from_dict({"link_mass_scale": {"torso": 2.0}}, name="t"))


def test_mass_patterns_in_key_order_refuse_a_general_pattern_written_last(nominal: mujoco.MjModel) -> None:
    # sorted keys put ".*_link" after "torso_link": the torso's own scale would silently set nothing
    shadowed = {"torso_link": 1.5, ".*_link": 1.1}
    refused = r"link_mass_scale: pattern 'torso_link' sets nothing.*'\.\*_link'"
    with pytest.raises(ProfileError, match=refused):
        build_model(profile_from_dict({"link_mass_scale": shadowed}, name="t"))
    general_first = build_model(profile_from_dict({"link_mass_scale": {".*_link": 1.1, "torso_link": 1.5}},
                                                  name="t"))
    torso, pelvis = nominal.body("torso_link"), nominal.body("pelvis")
    assert general_first.body("torso_link").mass[0] == pytest.approx(1.5 * torso.mass[0])
    assert general_first.body("pelvis").mass[0] == pytest.approx(pelvis.mass[0])  # "pelvis" is no "_link"


def test_standing_height_puts_the_feet_on_the_floor(nominal: mujoco.MjModel) -> None:
    q = g1.default_pose(g1.MOTOR_ORDER, "asap")
    height = standing_base_height(nominal, q)
    assert 0.7 < height < 0.85
    idx = G1Indices.from_model(nominal)

    def feet_touching(base_z: float) -> list[bool]:
        data = mujoco.MjData(nominal)
        data.qpos[:7] = (0, 0, base_z, 1, 0, 0, 0)
        data.qpos[idx.qpos] = q
        mujoco.mj_forward(nominal, data)
        return [bool(data.sensordata[idx.sensor[f"{side}_foot_contact"]][0]) for side in FEET]

    assert feet_touching(height - 0.001) == [True, True]  # 1 mm lower: both feet touch
    assert feet_touching(height + 0.002) == [False, False]  # 2 mm higher: both in the air


def test_missing_mjcf_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASAP_G1_MJCF", "/nonexistent/g1.xml")
    with pytest.raises(ModelError, match=r"make setup.*ASAP_G1_MJCF"):
        build_model()


def test_foreign_mjcf_rejected(tmp_path: Path) -> None:
    path = tmp_path / "one.xml"
    path.write_text('<mujoco><worldbody><body><joint name="hinge"/><geom size="0.1"/></body>'
                    "</worldbody></mujoco>")
    with pytest.raises(ModelError, match=r"not asap_core\.g1\.MOTOR_ORDER"):
        build_model(mjcf=path)


@pytest.mark.parametrize("torque_scale", [1.0, 0.65])
def test_the_engine_applies_the_drive_law(torque_scale: float) -> None:
    """One physics step's joint torques (qfrc_actuator) equal the numpy law for random commands and states,
    with clipping at the effort limit, the profile's torque scale and motors that are off."""
    profile = profile_from_dict({"torque_scale": {".*ankle.*": torque_scale}}, name="t")
    model = build_model(profile)
    idx, data = G1Indices.from_model(model), mujoco.MjData(model)
    rng = np.random.default_rng(0)
    n = g1.NUM_MOTORS
    for _ in range(5):
        cmd = MotorCommand(mode=(rng.random(n) > 0.2).astype(float), q=rng.normal(0, 1, n),
                           dq=rng.normal(0, 2, n), tau=rng.normal(0, 20, n), kp=rng.uniform(0, 400, n),
                           kd=rng.uniform(0, 10, n))
        params = MotorParams(kp_scale=rng.uniform(0.8, 1.2, n), kd_scale=rng.uniform(0.8, 1.2, n))
        data.qpos[idx.qpos] = rng.normal(0, 0.5, n)
        data.qvel[idx.qvel] = rng.normal(0, 3, n)
        data.ctrl[idx.drive_ctrl] = drive_ctrl(cmd, params)
        q, dq = data.qpos[idx.qpos].copy(), data.qvel[idx.qvel].copy()
        mujoco.mj_step(model, data)  # qfrc_actuator: what acted during the step
        expected = pd_torque(cmd, q, dq, params, torque_scale=profile.torque_scale)
        clipped = np.abs(expected) >= 0.99 * profile.torque_scale * EFFORT_LIMIT
        assert clipped.any() and not clipped.all()
        np.testing.assert_allclose(data.qfrc_actuator[idx.qvel], expected, rtol=1e-12, atol=1e-9)


def test_engine_drive_equals_the_law_computed_each_step_from_the_starting_state() -> None:
    """The drives are explicit (Euler): 0.5 s of a G1 falling onto the floor with the engine's PD equals
    the same steps with the torque computed in numpy from each step's starting state and applied as a
    plain motor (the drive law as the twin computed it before it moved into the engine)."""
    model = build_model()
    idx = G1Indices.from_model(model)
    q0 = g1.default_pose(g1.MOTOR_ORDER, "asap")
    kp, kd = g1.gains(g1.MOTOR_ORDER, "asap")
    cmd = MotorCommand.position(q0 + 0.4 * np.sin(np.arange(g1.NUM_MOTORS)), kp, kd)
    params = MotorParams(kp_scale=np.ones(g1.NUM_MOTORS), kd_scale=np.ones(g1.NUM_MOTORS))
    runs = []
    for engine in (True, False):
        data = mujoco.MjData(model)
        data.qpos[:7] = (0.0, 0.0, standing_base_height(model, q0, 0.05), 1.0, 0.0, 0.0, 0.0)
        data.qpos[idx.qpos] = q0
        for _ in range(250):
            if engine:
                data.ctrl[idx.drive_ctrl] = drive_ctrl(cmd, params)
            else:
                q, dq = data.qpos[idx.qpos], data.qvel[idx.qvel]
                data.ctrl[:] = 0.0
                data.ctrl[idx.actuator] = pd_torque(cmd, q, dq, params)
            mujoco.mj_step(model, data)
        runs.append(data.qpos.copy())
    assert abs(runs[0][2] - runs[1][2]) < 1e-9 and np.abs(runs[0] - runs[1]).max() < 1e-9
