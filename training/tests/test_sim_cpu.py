"""The CPU backend: trajectories independent of the thread count, and equal to the twin's for one env."""

from __future__ import annotations

import numpy as np
import pytest

from asap_core import g1
from asap_sim.model import build_model, standing_base_height
from asap_sim.motor import MotorCommand, MotorParams, latency_steps
from asap_sim.profiles import load_profile
from asap_sim.twin import Twin, TwinConfig
from asap_training.sim.mujoco_cpu import MujocoCpuSimulator

Q0 = g1.default_pose(g1.MOTOR_ORDER, "asap")
KP, KD = g1.gains(g1.MOTOR_ORDER, "asap")


def _commands(num_envs: int, steps: int, seed: int = 0) -> list[MotorCommand]:
    """Per env a different swing of every joint about the default pose: the robots step, sway and fall."""
    rng = np.random.default_rng(seed)
    amp, freq, phase = rng.uniform(0.1, 0.5, (3, num_envs, g1.NUM_MOTORS)) * [[[1.0]], [[6.0]], [[6.0]]]
    t = np.arange(steps)[:, None, None] * 0.02
    return [MotorCommand.position(Q0 + a * np.sin(freq * tk + phase), KP, KD) for tk, a in
            zip(t, np.broadcast_to(amp, (steps, *amp.shape)), strict=True)]


def _rollout(sim: MujocoCpuSimulator, commands: list[MotorCommand], substeps: int) -> dict[str, np.ndarray]:
    n = sim.num_envs
    height = standing_base_height(sim.models[0], Q0)
    sim.reset(np.arange(n), np.tile([0.0, 0.0, height], (n, 1)), np.tile([1.0, 0, 0, 0], (n, 1)),
              np.zeros((n, 3)), np.zeros((n, 3)), np.tile(Q0, (n, 1)), np.zeros((n, g1.NUM_MOTORS)))
    out: dict[str, list[np.ndarray]] = {"joint_pos": [], "body_pos_w": [], "body_lin_vel_w": [],
                                        "joint_torque": [], "foot_force": []}
    for cmd in commands:
        sim.step(cmd, substeps)
        for key, trace in out.items():
            trace.append(getattr(sim.state, key).numpy().copy())
    return {key: np.array(trace) for key, trace in out.items()}


@pytest.mark.parametrize("profile", ["nominal", "latency"])
def test_one_and_two_threads_give_the_same_trajectories(profile: str) -> None:
    """1 s of 6 G1s with contacts (and a 30 ms actuation latency): bit-identical with 1 and 2 workers."""
    p = load_profile(profile)
    models = [build_model(p, timestep=0.005)]
    commands = _commands(6, 50)
    runs = [
        _rollout(MujocoCpuSimulator(models, 6, MotorParams.from_profile(p),
                                    latency_steps(p.actuation_latency_ms, 0.005), threads=t), commands, 4)
        for t in (1, 2)
    ]
    fell = runs[0]["body_pos_w"][-1, :, 0, 2] < 0.5
    assert fell.any() and not fell.all(), "the scene should hold standing and fallen robots"
    assert runs[0]["foot_force"].max() > 100.0
    for key in runs[0]:
        np.testing.assert_array_equal(runs[0][key], runs[1][key], err_msg=key)


@pytest.mark.parametrize(("drive", "physics_dt", "lag"),
                         [("engine", 0.002, 1.0), ("held", 0.005, 1.0), ("held", 0.005, 0.6)])
def test_the_training_backend_steps_like_the_twin(drive: str, physics_dt: float, lag: float) -> None:
    """Physics parity: one env of the training backend and the twin core (band released), the same
    start, the same 50 Hz commands with the latency profile's delay, agree over 1 s to 1e-9; with either
    joint drive (held: Unitree's simulator's, at its 5 ms physics step, and with a part of its lag)."""
    p = load_profile("latency")
    twin = Twin(p, TwinConfig(band_held=False, physics_dt=physics_dt, drive=drive,  # type: ignore[arg-type]
                              held_lag=lag))
    d = twin.data
    sim = MujocoCpuSimulator([build_model(p, timestep=physics_dt)], 1, MotorParams.from_profile(p),
                             latency_steps(p.actuation_latency_ms, physics_dt), threads=1,
                             held_drive_share=1.0 if drive == "held" else 0.0, held_drive_lag=lag)
    substeps = round(0.02 / physics_dt)
    sim.reset(np.arange(1), d.qpos[None, :3], d.qpos[None, 3:7], d.qvel[None, :3], d.qvel[None, 3:6],
              d.qpos[None, twin.idx.qpos], d.qvel[None, twin.idx.qvel])
    for cmd in _commands(1, 50, seed=1):
        twin.set_command(MotorCommand.position(cmd.q[0], KP, KD))
        twin.step(substeps)
        sim.step(cmd, substeps)
        np.testing.assert_allclose(sim.state.joint_pos[0], twin.data.qpos[twin.idx.qpos], atol=1e-9)
        np.testing.assert_allclose(sim.state.root_pos_w[0], twin.data.qpos[:3], atol=1e-9)
        np.testing.assert_allclose(sim.state.joint_torque[0], twin.read_state().tau_est, atol=1e-6)
    assert abs(twin.data.qpos[2] - standing_base_height(sim.models[0], Q0)) > 0.02, "the robot should move"
