"""Simulator backends agree: the same initial states and command sequences give the same G1 trajectories on
the CPU backend (1 and 2 threads) and on MuJoCo Warp on Warp's CPU device.

What "the same" means for MJWarp (float32) against C MuJoCo (float64): from the same state, one policy
step agrees to float32 precision, except in the rare step where a contact is born at a distance below
float32 resolution (|dist| < ~1e-6 m): MuJoCo's soft contact then acts at once with its damping term on one
side and a substep later on the other. Free-running trajectories therefore separate after such an event
as two valid simulations do; the G1 model itself does the same in C when its initial state is moved by
1e-5 (0.8 rad, 3 cm after 1 s). So MJWarp is held to float32 precision step by step along 1 s of motion
(most steps; every step within a contact-event bound) and to that sensitivity over free-running 1 s.

MuJoCo Warp on Warp's CPU device runs every kernel serially (~30-50 ms per physics step, whatever the
number of worlds), so these tests keep to 4 envs and 1 s. A machine's first run compiles MJWarp's kernels
(~2 min on 2 cores) into Warp's kernel cache (``~/.cache/warp``); later runs load them in seconds.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from asap_core import g1, quat
from asap_sim.model import build_model, standing_base_height
from asap_sim.motor import MotorCommand, MotorParams, latency_steps
from asap_sim.profiles import load_profile, nominal_profile
from asap_training.envs.config import DomainRandCfg, TrackingEnvCfg
from asap_training.envs.tracking_env import TrackingEnv
from asap_training.rl.config import PpoCfg
from asap_training.sim.base import SimState, Simulator
from asap_training.sim.mujoco_cpu import MujocoCpuSimulator
from asap_training.sim.mujoco_warp import MujocoWarpSimulator

DT, DECIMATION, POLICY_STEPS = 0.005, 4, 50
"""Training's 200 Hz physics and 50 Hz policy (the asap gain set): 50 policy steps = 1 s."""
NUM_ENVS = 4
PUSH_STEP = 3
"""Env 1 is kicked after this policy step."""
FIELDS = ("root_pos_w", "root_quat_w", "joint_pos", "joint_vel", "body_pos_w", "body_lin_vel_w",
          "body_ang_vel_w", "foot_force")
STEP_TOLERANCE = dict(root_pos_w=1e-6, root_quat_w=2e-6, joint_pos=1e-5, joint_vel=1e-3, body_pos_w=2e-6,
                      body_lin_vel_w=1e-4, body_ang_vel_w=1e-3, foot_force=0.05)
"""|MJWarp - C| after one policy step from the same state (m, rad, m/s, rad/s, N): float32 precision
(measured 90 % quantiles: 6e-8 m, 3e-7 rad, 2e-5 rad/s, 3e-3 N of ~150 N)."""
STEP_SHARE = 0.9
"""Share of (policy step, env) pairs that must agree to STEP_TOLERANCE; the others hold a contact birth."""
EVENT_BOUND = dict(root_pos_w=0.03, root_quat_w=0.05, joint_pos=0.5, joint_vel=50.0, body_pos_w=0.06,
                   body_lin_vel_w=1.5, body_ang_vel_w=25.0, foot_force=800.0)
"""|MJWarp - C| bound for every step and over free-running 1 s (contact events; measured maxima: 0.16 rad,
2 cm, 15 rad/s, 250 N as the G1s sway and fall). It catches a blow-up, not a subtle error: those show in
STEP_TOLERANCE."""


def _models(frictions: tuple[float, ...], profile=None) -> list:
    profile = profile or nominal_profile()
    return [build_model(dataclasses.replace(profile, ground_friction=f), timestep=DT) for f in frictions]


SWING = {"shoulder_pitch_joint": 0.5, "elbow_joint": 0.4, "waist_yaw_joint": 0.2, "waist_pitch_joint": 0.1}
"""Amplitudes (rad) of the upper-body swing; the arms held out sideways (shoulder roll) clear the torso."""


def _joint_weights(table: dict[str, float]) -> np.ndarray:
    return np.array([next((v for k, v in table.items() if n.endswith(k)), 0.0) for n in g1.MOTOR_ORDER])


def _pose() -> np.ndarray:
    """Default pose, arms 0.3 rad out to the side."""
    q0 = g1.default_pose(g1.MOTOR_ORDER, "asap")
    out = {"left_shoulder_roll_joint": 0.3, "right_shoulder_roll_joint": -0.3}
    return q0 + np.array([out.get(n, 0.0) for n in g1.MOTOR_ORDER])


def _initial_state(model) -> tuple[np.ndarray, ...]:
    """Standing G1s, feet 1 mm into the floor (contacts unambiguous from the first step: at exactly zero
    clearance C finds no contact where float32 does), arms at different heights, one env moving."""
    pitch = _joint_weights({"shoulder_pitch_joint": 1.0})
    q = _pose() - 0.2 * np.arange(NUM_ENVS)[:, None] * pitch
    height = standing_base_height(model, q[0], clearance=-1e-4)
    pos = np.tile([0.0, 0.0, height], (NUM_ENVS, 1))
    quat = np.tile([1.0, 0.0, 0.0, 0.0], (NUM_ENVS, 1))
    lin_vel, ang_vel, dq = np.zeros((NUM_ENVS, 3)), np.zeros((NUM_ENVS, 3)), np.zeros_like(q)
    lin_vel[3], ang_vel[3], dq[3] = (0.2, 0.0, 0.0), (0.0, 0.0, 0.5), 0.5 * pitch  # free-joint conventions
    return np.arange(NUM_ENVS), pos, quat, lin_vel, ang_vel, q, dq


def _commands() -> list[MotorCommand]:
    """1 s of position commands: legs hold the default pose, waist and arms swing, each env at its own
    frequency (1-2.5 Hz)."""
    kp, kd = g1.gains(g1.MOTOR_ORDER, "asap")
    amplitude = _joint_weights(SWING)
    freq = 1.0 + 0.5 * np.arange(NUM_ENVS)[:, None]
    t = np.arange(1, POLICY_STEPS + 1) * DT * DECIMATION
    return [MotorCommand.position(_pose() + amplitude * np.sin(2 * np.pi * freq * s), kp, kd) for s in t]


def _rollout(sims: list[Simulator], commands: list[MotorCommand], variant: np.ndarray,
             lockstep: bool = False) -> list[dict[str, np.ndarray]]:
    """Each simulator's state after reset and after each policy step (env 1 kicked after PUSH_STEP).
    ``lockstep``: before each step, every simulator is reset to the first one's state, so all start each
    step from the same state (solver warm start cleared alike): one-step agreement along its trajectory."""
    for sim in sims:
        sim.set_model_variant(np.arange(NUM_ENVS), variant)
        sim.reset(*_initial_state(sim.models[0]))
    states = [[_copy(sim.state)] for sim in sims]
    for k, cmd in enumerate(commands):
        start = _state_args(sims[0].state)
        for sim, history in zip(sims, states, strict=True):
            if lockstep:
                sim.reset(*start, keep_latency=True)
            sim.step(cmd, DECIMATION)
            if k == PUSH_STEP:
                sim.push(np.array([1]), np.array([[0.3, -0.2, 0.0]]))
            history.append(_copy(sim.state))
    return [{f: np.stack([s[f] for s in history]) for f in FIELDS} for history in states]


def _numpy(x: torch.Tensor) -> np.ndarray:
    return x.cpu().numpy().astype(np.float64)  # a copy


def _state_args(s: SimState) -> tuple[np.ndarray, ...]:
    """``Simulator.reset`` arguments that put every env into state ``s``."""
    root_quat_w = _numpy(s.root_quat_w)
    ang_vel_w = quat.rotate(root_quat_w, _numpy(s.root_ang_vel_b))
    root = (_numpy(s.root_pos_w), root_quat_w, _numpy(s.root_lin_vel_w), ang_vel_w)
    return (np.arange(NUM_ENVS), *root, _numpy(s.joint_pos), _numpy(s.joint_vel))


def _copy(state: SimState) -> dict[str, np.ndarray]:
    return {f: _numpy(getattr(state, f)) for f in FIELDS}


def _errors(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per field, the largest error of each (state, env) pair."""
    return {f: np.abs(a[f] - b[f]).reshape(*a[f].shape[:2], -1).max(axis=-1) for f in FIELDS}


def _report(name: str, errors: dict[str, np.ndarray]) -> dict[str, float]:
    """Print the errors (``pytest -s``); returns the largest per field."""
    share = {f: np.quantile(e, STEP_SHARE) for f, e in errors.items()}
    print(f"{name}: {STEP_SHARE:.0%} quantile", {f: f"{v:.1e}" for f, v in share.items()})
    print(f"{name}: max", {f: f"{e.max():.1e}" for f, e in errors.items()})
    return {f: float(e.max()) for f, e in errors.items()}


def _exceeding(largest: dict[str, float], bound: dict[str, float]) -> dict[str, float]:
    return {f: v for f, v in largest.items() if not v <= bound[f]}


@pytest.fixture(scope="module")
def motor_params() -> MotorParams:
    return MotorParams.from_profile(nominal_profile())


def _check_lockstep(models: list, variant: np.ndarray, motor_params: MotorParams, delay: int) -> None:
    commands = _commands()
    sims = [MujocoCpuSimulator(models, NUM_ENVS, motor_params, delay, threads=1),
            MujocoWarpSimulator(models, NUM_ENVS, motor_params, delay, device="cpu")]
    cpu, warp = _rollout(sims, commands, variant, lockstep=True)
    errors = _errors(warp, cpu)
    largest = _report("one step from the same state", errors)
    agreeing = {f: float(np.mean(e <= STEP_TOLERANCE[f])) for f, e in errors.items()}
    assert {f: a for f, a in agreeing.items() if a < STEP_SHARE} == {}, "float32 agreement of one step"
    assert _exceeding(largest, EVENT_BOUND) == {}
    # what agrees is motion with contacts: the feet carry the robots, who move
    assert np.mean(cpu["foot_force"].sum(axis=-1) > 100.0) > 0.5
    assert np.abs(cpu["joint_pos"][-1] - cpu["joint_pos"][0]).max() > 0.3
    # driven, through the latency too: pelvis 0.70 m high on average (measured); with the motors off (a
    # lock-step reset that emptied the latency's ctrl in flight) they sink, 0.38 m
    assert cpu["root_pos_w"][..., 2].mean() > 0.6


def test_warp_parity_cpu_threads_and_warp_cpu_device(motor_params):
    """Two floor frictions (model variants), a moving env, a push: CPU 1 thread == CPU 2 threads exactly;
    MJWarp (CPU device) agrees step by step and over free-running 1 s."""
    models, variant, commands = _models((1.0, 0.4)), np.array([0, 1, 1, 0]), _commands()
    sims = [MujocoCpuSimulator(models, NUM_ENVS, motor_params, threads=1),
            MujocoCpuSimulator(models, NUM_ENVS, motor_params, threads=2),
            MujocoWarpSimulator(models, NUM_ENVS, motor_params, device="cpu")]
    one, two, warp = _rollout(sims, commands, variant)
    for f in FIELDS:
        np.testing.assert_array_equal(one[f], two[f])
    assert _exceeding(_report("free-running", _errors(warp, one)), EVENT_BOUND) == {}
    _check_lockstep(models, variant, motor_params, 0)


def test_warp_parity_under_latency_with_joint_friction(motor_params):
    """The latency profile's 30 ms (6 physics steps: two ctrl pieces per policy step) on ASAP's IsaacSim gap
    (joint friction 0.03 N m as frictionloss constraints, larger armature) on both backends."""
    latency = load_profile("latency").actuation_latency_ms
    profile = dataclasses.replace(load_profile("isaacsim"), actuation_latency_ms=latency)
    assert np.all(profile.joint_friction > 0)
    delay = latency_steps(latency, DT)
    assert delay % DECIMATION, "the case must split policy steps into two ctrl pieces"
    _check_lockstep(_models((1.0,), profile), np.zeros(NUM_ENVS, dtype=int), motor_params, delay)


def test_tracking_env_steps_on_mujoco_warp_cpu():
    """One PPO iteration's worth of tracking-MDP steps on the MJWarp backend (CPU device), with the default
    domain randomization (friction variants, kp scales) and frequent pushes: finite observations and
    rewards, the same shapes as on the CPU backend, envs reset along the way."""
    warp = "asap_training.sim.mujoco_warp:MujocoWarpSimulator"
    cfg = TrackingEnvCfg(num_envs=3, seed=0, simulator=warp, device="cpu",
                         domain_rand=DomainRandCfg(push_interval_s=0.1))
    env = TrackingEnv(cfg)
    assert isinstance(env.sim, MujocoWarpSimulator) and env.dtype == torch.float32
    assert len(env.sim.models) == cfg.domain_rand.friction_variants
    reference = TrackingEnv(dataclasses.replace(cfg, simulator=TrackingEnvCfg.simulator))
    generator = torch.Generator().manual_seed(0)
    for k in range(PpoCfg.num_steps_per_env):
        obs, reward, _, _ = env.step(0.5 * torch.randn(env.num_envs, env.num_actions, generator=generator))
        assert all(bool(o.isfinite().all()) for o in obs.values()) and bool(reward.isfinite().all())
        if k == 10:  # a reset of some envs while the others run on (the MDP's termination path)
            env.reset(torch.tensor([1]))
            torch.testing.assert_close(env.points.pos_w[1], env.ref.pos_w[1], atol=1e-4, rtol=0)  # float32
    shapes = {k: v.shape for k, v in reference.observations().items()}
    assert {k: v.shape for k, v in obs.items()} == shapes and shapes["actor"] == (3, 380)
    assert bool(env.state.foot_force.isfinite().all()) and env.state.foot_force.max() > 10.0


def test_warp_refuses_model_variants_it_cannot_vary_per_world(motor_params):
    """Variants that MJWarp can only hold once for all worlds (here a pelvis CoM shift, which changes the
    structural ``dof_length``) are refused with the field's name instead of being silently averaged."""
    profile = nominal_profile()
    shifted = dataclasses.replace(profile, base_com_offset=np.array([0.02, 0.0, 0.0]))
    models = [build_model(p, timestep=DT) for p in (profile, shifted)]
    with pytest.raises(NotImplementedError, match="dof_length"):
        MujocoWarpSimulator(models, 2, motor_params, device="cpu")


def test_warp_graph_replay_equals_eager_launches(motor_params):
    """The captured graph of a policy step (here with the latency's two ctrl pieces), replayed with new
    commands each step, gives bit for bit what launching every kernel from Python gives."""
    profile = load_profile("latency")
    delay = latency_steps(profile.actuation_latency_ms, DT)
    models, variant, commands = _models((1.0, 0.4), profile), np.array([0, 1, 1, 0]), _commands()[:10]
    sims = [MujocoWarpSimulator(models, NUM_ENVS, motor_params, delay, device="cpu", graph=g)
            for g in (True, False)]
    replayed, eager = _rollout(sims, commands, variant)
    split = delay % DECIMATION
    assert sims[0].captured == [("reset",), (split, DECIMATION - split)] and sims[1].captured == []
    for f in FIELDS:
        np.testing.assert_array_equal(replayed[f], eager[f])
    # partial resets replay the one reset graph with other worlds masked: the untouched worlds go on as
    # eagerly, the reset ones start from the given state
    start = _initial_state(models[0])
    for subset in ([0, 2], [3], [3, 1, 2, 0]):  # the last: every env, in another order
        args = [start[0][subset], *(a[subset] for a in start[1:])]
        for sim in sims:
            before = _copy(sim.state)
            sim.reset(*args)
            after, kept = _copy(sim.state), np.setdiff1d(np.arange(NUM_ENVS), subset)
            np.testing.assert_allclose(after["joint_pos"][subset], start[5][subset], atol=1e-6)
            np.testing.assert_allclose(after["root_pos_w"][subset], start[1][subset], atol=1e-6)
            np.testing.assert_array_equal(after["joint_pos"][kept], before["joint_pos"][kept])
            sim.step(commands[0], DECIMATION)
        replayed, eager = (_copy(sim.state) for sim in sims)
        for f in FIELDS:
            np.testing.assert_array_equal(replayed[f], eager[f])
    assert len(sims[0].captured) == 2  # one step layout and one reset, replayed for every subset


@pytest.mark.parametrize("backend", ["cpu", "warp"])
def test_a_reset_env_can_start_with_the_commands_in_flight_on_both_backends(backend, motor_params):
    """30 ms latency: an env started with the commands sent before its state (``in_flight``) steps exactly
    as one whose delay line really carried them (a teleport that keeps it), both at the first reset of the
    batch (before any step: envs 0 and 3 keep that start) and later (envs 1 and 2); without them its motors
    would be off for the whole first step."""
    delay = latency_steps(load_profile("latency").actuation_latency_ms, DT)
    models, commands = _models((1.0,)), _commands()
    start = _initial_state(models[0])
    later = (np.array([1, 2]), *(a[1:3] for a in start[1:]))

    def make() -> Simulator:
        return (MujocoCpuSimulator(models, NUM_ENVS, motor_params, delay, threads=1) if backend == "cpu"
                else MujocoWarpSimulator(models, NUM_ENVS, motor_params, delay, device="cpu"))

    def run(first_in_flight: tuple, later_reset: dict) -> np.ndarray:
        sim = make()
        sim.reset(*start, in_flight=first_in_flight)
        for cmd in commands[2:4]:
            sim.step(cmd, DECIMATION)
        sim.reset(*later, **later_reset)
        sim.step(commands[4], DECIMATION)
        return _numpy(sim.state.joint_pos).copy()

    def carried() -> np.ndarray:  # the delay line really pushed commands[0], [1] before the start
        sim = make()
        sim.reset(*start)
        for cmd in commands[:2]:
            sim.step(cmd, DECIMATION)
        sim.reset(*start, keep_latency=True)
        for cmd in commands[2:4]:
            sim.step(cmd, DECIMATION)
        sim.reset(*later, keep_latency=True)
        sim.step(commands[4], DECIMATION)
        return _numpy(sim.state.joint_pos).copy()

    expected = carried()
    primed = run(tuple(commands[:2]), {"in_flight": tuple(commands[2:4])})
    np.testing.assert_array_equal(primed, expected)
    limp = np.abs(run((), {}) - expected)
    assert limp[[0, 3]].max() > 1e-3 and limp[[1, 2]].max() > 1e-3


@pytest.mark.parametrize("backend", ["cpu", "warp"])
def test_a_reset_env_drops_the_ctrl_in_flight_on_both_backends(backend, motor_params):
    """30 ms latency (6 physics steps): an env reset without ``keep_latency`` has its motors off until its
    first ctrl after the reset arrives (the whole next policy step, 4 substeps), while an env that was not
    reset keeps acting on the ctrl it sent before; ``keep_latency`` keeps it for the reset env too. Without
    the clearing the last episode's commands would drive the new one's first steps."""
    delay = latency_steps(load_profile("latency").actuation_latency_ms, DT)
    assert DECIMATION < delay < 2 * DECIMATION
    models = _models((1.0,))
    sim = (MujocoCpuSimulator(models, NUM_ENVS, motor_params, delay, threads=1) if backend == "cpu"
           else MujocoWarpSimulator(models, NUM_ENVS, motor_params, delay, device="cpu"))
    start = _initial_state(models[0])
    sim.reset(*start)
    commands = _commands()
    for cmd in commands[:3]:
        sim.step(cmd, DECIMATION)
    reset_one = (np.array([1]), *(a[1:2] for a in start[1:]))
    sim.reset(*reset_one)
    sim.step(commands[3], DECIMATION)
    torque = np.abs(_numpy(sim.state.joint_torque)).sum(axis=-1)
    assert torque[1] == 0.0
    assert np.all(torque[[0, 2, 3]] > 10.0)
    sim.step(commands[4], DECIMATION)  # its first ctrl acts from the 3rd substep of this step
    assert np.abs(_numpy(sim.state.joint_torque[1])).sum() > 10.0
    sim.reset(*reset_one, keep_latency=True)
    sim.step(commands[5], DECIMATION)
    assert np.abs(_numpy(sim.state.joint_torque[1])).sum() > 10.0
