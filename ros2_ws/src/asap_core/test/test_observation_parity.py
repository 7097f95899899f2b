"""Observation parity: the deploy builder equals an independent ASAP reference on recorded LowStates.

The LowState sequence is recorded from a short MuJoCo rollout of the G1 model (free-falling,
joints driven by a PD towards random targets, so orientation, gyro and joints all move) into the
robot's own C layout (``asap_core.crc.LOWSTATE_DTYPE``, float32 as on the wire). The reference
below is written from ASAP's observation config
(``obs/motion_tracking/deepmimic_a2c_nolinvel_LARGEnoise_history.yaml``, HumanoidVerse's
``_get_obs_history_actor``) with plain loops and a rotation matrix:
keys sorted alphabetically, ``history_actor`` = per sorted key the last 4 values newest first,
history updated after the observation is built, clip ±100.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from asap_core import g1
from asap_core.crc import LOWSTATE_DTYPE
from asap_core.joint_map import JointMap
from asap_core.observation import ObservationBuilder, ObsInputs, asap_actor_spec, motion_phase

G1_XML = Path(os.environ.get("VIRTUAL_ENV", ".venv")) / "share/asap/unitree_g1/g1.xml"
POLICY_JOINTS = g1.names("asap23")
DEFAULT_Q = g1.default_pose(POLICY_JOINTS, "asap")


def record_lowstates(steps: int, seed: int = 0) -> np.ndarray:
    """A LowState sequence at 50 Hz from MuJoCo (500 Hz physics), in the robot's C layout."""
    mujoco = pytest.importorskip("mujoco")
    if not G1_XML.exists():
        pytest.skip(f"G1 model not installed at {G1_XML} (run make setup)")
    model = mujoco.MjModel.from_xml_path(str(G1_XML))
    data = mujoco.MjData(model)
    rng = np.random.default_rng(seed)
    adr = {model.joint(i).name: (model.jnt_qposadr[i], model.jnt_dofadr[i]) for i in range(model.njnt)}
    qadr = np.array([adr[n][0] for n in g1.MOTOR_ORDER])
    vadr = np.array([adr[n][1] for n in g1.MOTOR_ORDER])
    data.qpos[qadr] = g1.default_pose(g1.MOTOR_ORDER, "asap")
    data.qvel[3:6] = rng.normal(scale=1.0, size=3)  # spin the pelvis so the IMU terms move
    kp, kd = g1.gains(g1.MOTOR_ORDER, "asap")
    out = np.zeros(steps, dtype=LOWSTATE_DTYPE)
    substeps = round(0.02 / model.opt.timestep)
    for t in range(steps):
        target = g1.default_pose(g1.MOTOR_ORDER, "asap") + rng.normal(scale=0.3, size=29)
        for _ in range(substeps):
            q, dq = data.qpos[qadr], data.qvel[vadr]
            data.qfrc_applied[vadr] = kp * (target - q) - kd * dq
            mujoco.mj_step(model, data)
        rec = out[t]
        rec["tick"] = t * 20
        rec["imu_state"]["quaternion"] = data.qpos[3:7]  # free joint: w, x, y, z
        rec["imu_state"]["gyroscope"] = data.qvel[3:6]  # free joint angular velocity, body frame
        rec["motor_state"]["q"][:29] = data.qpos[qadr]
        rec["motor_state"]["dq"][:29] = data.qvel[vadr]
    return out


def reference_asap_obs(states: np.ndarray, actions: np.ndarray, phases: np.ndarray) -> list[np.ndarray]:
    """ASAP's 380-dim actor observation, computed the plain way."""
    motor_of = [g1.JOINT_BY_NAME[n].motor_index for n in POLICY_JOINTS]
    keys = ["actions", "base_ang_vel", "dof_pos", "dof_vel", "projected_gravity", "ref_motion_phase"]
    history = {k: [None] * 4 for k in keys}
    result = []
    for t, s in enumerate(states):
        w, x, y, z = (float(v) for v in s["imu_state"]["quaternion"])
        rot = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])
        q = np.array([float(s["motor_state"]["q"][i]) for i in motor_of])
        dq = np.array([float(s["motor_state"]["dq"][i]) for i in motor_of])
        current = {
            "actions": actions[t - 1] if t > 0 else np.zeros(23),
            "base_ang_vel": np.array(s["imu_state"]["gyroscope"], dtype=np.float64) * 0.25,
            "dof_pos": q - DEFAULT_Q,
            "dof_vel": dq * 0.05,
            "projected_gravity": rot.T @ np.array([0.0, 0.0, -1.0]),
            "ref_motion_phase": np.array([phases[t]]),
        }
        for k in keys:
            history[k] = [h if h is not None else np.zeros_like(current[k]) for h in history[k]]
        parts: list[np.ndarray] = []
        for key in sorted([*keys, "history_actor"]):
            if key == "history_actor":
                for k in sorted(keys):
                    parts += history[k]  # t-1, t-2, t-3, t-4
            else:
                parts.append(current[key])
        result.append(np.clip(np.concatenate(parts), -100.0, 100.0))
        for k in keys:
            history[k] = [current[k], *history[k][:3]]
    return result


def test_deploy_builder_matches_asap_reference_on_mujoco_lowstates() -> None:
    steps = 40
    states = record_lowstates(steps)
    rng = np.random.default_rng(3)
    actions = rng.normal(scale=0.5, size=(steps, 23))
    phases = np.array([motion_phase(t, 0.02, 0.5) for t in range(steps)])  # reaches 1 at t=25
    expected = reference_asap_obs(states, actions, phases)

    builder = ObservationBuilder(spec=asap_actor_spec(23))
    jm = JointMap.from_names(POLICY_JOINTS, g1.MOTOR_ORDER)
    for t, s in enumerate(states):
        inputs = ObsInputs.from_motor_order(
            jm, q=s["motor_state"]["q"][:29].astype(np.float64),
            dq=s["motor_state"]["dq"][:29].astype(np.float64),
            quat_wxyz=s["imu_state"]["quaternion"].astype(np.float64),
            gyro_b=s["imu_state"]["gyroscope"].astype(np.float64),
            last_action=actions[t - 1] if t else np.zeros(23), phase=phases[t], default_q=DEFAULT_Q)
        obs = builder.build(inputs)
        assert obs.shape == (380,)
        np.testing.assert_allclose(obs, expected[t], rtol=0, atol=1e-6, err_msg=f"tick {t}")
    # the rollout really exercised the terms (a frozen robot would make parity trivial)
    grav = np.array([e[-4:-1] for e in expected])
    assert np.ptp(grav, axis=0).max() > 0.1
    assert np.abs(np.array(expected)[:, 26:49]).max() > 0.1  # dof_pos moved
