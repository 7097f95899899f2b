"""The tracking env: deploy observation parity, resets, terminations, the Δa plug, randomization."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch

from asap_core import g1
from asap_core.artifact import load_artifact
from asap_core.inference import OnnxPolicy
from asap_core.joint_map import JointMap
from asap_core.observation import ObservationBuilder, ObsInputs, motion_phase
from asap_sim.model import G1Indices
from asap_training.envs.config import DomainRandCfg, ObservationCfg, TrackingEnvCfg
from asap_training.envs.tracking_env import TrackingEnv
from asap_training.eval.evaluate import EvalCfg, eval_env_cfg, rollout, rollouts

NO_DR = DomainRandCfg.off()
SHIPPED = Path(__file__).resolve().parents[1] / "policies" / "arm_swing" / "policy.onnx"


def make_env(**kw) -> TrackingEnv:
    cfg = TrackingEnvCfg(num_envs=kw.pop("num_envs", 4), domain_rand=kw.pop("domain_rand", NO_DR), **kw)
    return TrackingEnv(cfg)


@pytest.fixture(scope="module")
def env() -> TrackingEnv:
    return make_env(random_start=False, observations=ObservationCfg(noise={}))


def deploy_inputs(env: TrackingEnv, i: int, joint_map: JointMap) -> ObsInputs:
    """What the policy node would build from a LowState of env i's state: IMU sensors and motor q/dq."""
    model = env.sim.models[env.sim.variant[i]]
    idx = G1Indices.from_model(model)
    data = mujoco.MjData(model)
    data.qpos[:], data.qvel[:] = env.sim.datas[i].qpos, env.sim.datas[i].qvel  # the CPU backend's MjData
    mujoco.mj_forward(model, data)  # sensors of exactly this state
    return ObsInputs.from_motor_order(
        joint_map,
        q=data.qpos[idx.qpos],
        dq=data.qvel[idx.qvel],
        quat_wxyz=data.sensordata[idx.sensor["imu_quat"]],
        gyro_b=data.sensordata[idx.sensor["imu_gyro"]],
        last_action=env.action[i].numpy().copy(),
        phase=motion_phase(
            int(env.episode_step[i]), env.dt, float(env.motions.duration_s[env.motion_ids[i]])
        ),
        default_q=g1.default_pose(env.cfg.joint_names, "asap"),
    )


def test_actor_observation_equals_the_deploy_builder(env):
    """Training observation == asap_core's deploy builder fed from IMU sensors + motor order (1e-6)."""
    rng = np.random.default_rng(0)
    joint_map = JointMap.from_names(env.cfg.joint_names, g1.MOTOR_ORDER)
    env.reset(torch.arange(env.num_envs))
    builders = [ObservationBuilder(spec=env.actor_spec) for _ in range(env.num_envs)]
    obs = env.observations()["actor"]
    checked = 0
    for _ in range(12):
        for i, b in enumerate(builders):
            deploy = b.build(deploy_inputs(env, i, joint_map))
            np.testing.assert_allclose(obs[i].numpy(), deploy, atol=1e-6, rtol=0)
            checked += 1
        actions = torch.as_tensor(rng.normal(scale=0.5, size=(env.num_envs, env.num_actions)))
        out, _, done, _ = env.step(actions)
        obs = out["actor"]
        for i in done.nonzero().flatten().tolist():
            builders[i].reset()
    assert obs.shape == (env.num_envs, 380) and checked == 48


def test_reset_puts_the_robot_on_the_reference(env):
    env.reset(torch.arange(env.num_envs))
    err = torch.linalg.norm(env.points.pos_w - env.ref.pos_w, dim=-1)
    assert err.max() < 1e-9
    torch.testing.assert_close(env.q, env.ref.dof_pos, atol=1e-12, rtol=0)
    assert bool((env.episode_step == 0).all()) and bool((env.phase == 0.0).all())


def test_tilted_robot_terminates_and_is_penalized():
    env = make_env(num_envs=2)
    env.reset(torch.arange(2))
    tilt = np.array([np.cos(0.6), np.sin(0.6), 0, 0])  # 69° roll: |g_y| = sin(69°) > 0.8
    d = env.sim.datas[1]
    d.qpos[3:7] = tilt
    mujoco.mj_forward(env.sim.models[0], d)
    _, reward, done, extras = env.step(torch.zeros(2, env.num_actions))
    assert done[1] and not extras["time_outs"][1] and not done[0]
    assert reward[1] < reward[0] - 200 * env.dt * 0.9


def test_motion_end_is_a_time_out():
    env = make_env(num_envs=1, random_start=False)
    steps = round(float(env.motions.duration_s[0]) / env.dt)
    env.episode_step[:] = steps - 1
    env.motion_start_s[:] = 0.0
    _, _, done, extras = env.step(torch.zeros(1, env.num_actions))
    assert done[0] and extras["time_outs"][0]


class ConstantDelta:
    """A Δa source for the test: a fixed correction on one joint."""

    def __init__(self, env: TrackingEnv, joint: str, value: float) -> None:
        self.delta = torch.zeros(env.num_actions, dtype=env.dtype)
        self.delta[env.cfg.joint_names.index(joint)] = value
        self.seen: list[torch.Tensor] = []

    def __call__(self, env: TrackingEnv, action: torch.Tensor) -> torch.Tensor:
        self.seen.append(action.clone())
        return self.delta.expand(action.shape)


def make_constant_delta(env: TrackingEnv, joint: str, value: float) -> ConstantDelta:
    return ConstantDelta(env, joint, value)


def test_delta_action_plugs_in_by_configuration(monkeypatch):
    """Δa (normalized units) is added to the action about to be applied and scaled once with it."""
    base = make_env(num_envs=1, random_start=False)
    cfg = dataclasses.replace(base.cfg)
    cfg.actions = dataclasses.replace(
        cfg.actions,
        delta_action=f"{__name__}:make_constant_delta",
        delta_action_args={"joint": "left_knee_joint", "value": 0.4},
    )
    env = TrackingEnv(cfg)
    targets = {}
    for name, e in (("plain", base), ("delta", env)):
        sent = []
        monkeypatch.setattr(e.sim, "step", lambda cmd, n, sent=sent: sent.append(cmd.q.clone()))
        action = torch.full((1, e.num_actions), 0.1, dtype=e.dtype)
        e.step(action)
        targets[name] = sent[0]
    diff = targets["delta"] - targets["plain"]
    knee = g1.MOTOR_ORDER.index("left_knee_joint")
    assert float(diff[0, knee]) == pytest.approx(0.25 * 0.4)
    assert int((diff.abs() > 1e-12).sum()) == 1
    torch.testing.assert_close(env.delta_source.seen[0], action)  # sees a, not a_{t-1}


def test_domain_randomization_varies_per_env():
    dr = DomainRandCfg(
        friction_range=(0.2, 1.1),
        friction_variants=3,
        kp_scale_range=(0.925, 1.05),
        delay_ms_range=(20.0, 40.0),
        push_interval_s=10.0,
    )
    env = make_env(num_envs=16, domain_rand=dr)
    frictions = {round(float(m.geom_friction[m.geom("floor").id, 0]), 3) for m in env.sim.models}
    assert frictions == {0.2, 0.65, 1.1}
    assert len(set(env.sim.variant.tolist())) > 1
    kp = env.sim.motor_params.kp_scale
    assert kp.shape == (16, 29) and kp.min() >= 0.925 and kp.max() <= 1.05 and kp[:, 0].std() > 0
    assert set(env.delay.tolist()) <= {1, 2} and len(set(env.delay.tolist())) == 2


def test_compiled_mdp_steps_as_the_eager_one():
    """``compile_mdp`` (on by default on a GPU) changes how the MDP runs, not what it computes: the same
    seed and actions give the same observations, rewards and dones as eager torch, through a partial reset,
    with domain randomization and observation noise on."""
    import torch._dynamo

    graphs_before = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    envs = [make_env(num_envs=4, seed=3, domain_rand=DomainRandCfg(), compile_mdp=c) for c in (True, False)]
    assert all(name in vars(envs[0]) for name in TrackingEnv.COMPILED)
    assert not any(name in vars(envs[1]) for name in TrackingEnv.COMPILED)
    rng = np.random.default_rng(1)
    for k in range(8):
        actions = torch.as_tensor(rng.normal(scale=0.5, size=(4, envs[0].num_actions)))
        if k == 4:
            for env in envs:
                env.reset(torch.tensor([1, 2]))
        (obs_c, rew_c, done_c, _), (obs_e, rew_e, done_e, _) = (env.step(actions) for env in envs)
        for key in ("actor", "critic"):
            torch.testing.assert_close(obs_c[key], obs_e[key], atol=1e-9, rtol=0)
        torch.testing.assert_close(rew_c, rew_e, atol=1e-9, rtol=0)
        assert torch.equal(done_c, done_e)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] > graphs_before  # dynamo did compile
    # the curricula move every reset during training: a new value must not mean new compiled code
    compiled = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    for k in range(10):
        for env in envs:
            env.penalty_scale, env.far_threshold = 0.1 + 0.05 * k, 1.5 - 0.1 * k
        (_, rew_c, done_c, _), (_, rew_e, done_e, _) = (env.step(actions) for env in envs)
        torch.testing.assert_close(rew_c, rew_e, atol=1e-9, rtol=0)
        assert torch.equal(done_c, done_e)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == compiled


def test_episode_reward_logs_are_the_means_over_the_finished_episodes():
    env = make_env(num_envs=3, random_start=False)
    for _ in range(3):
        env.step(torch.zeros(3, env.num_actions))
    env.episode_step[1] = 0  # env 1 has no finished episode to count
    expected = {k: float(buf[[0, 2]].mean()) for k, buf in env.episode_sums.items()}
    env.extras = {}
    env.reset(torch.tensor([0, 1, 2]))
    logged = {k.removeprefix("Episode_Reward/"): v for k, v in env.extras["log"].items()}
    assert logged.keys() == expected.keys() and len(expected) > 3
    for key, value in expected.items():
        assert logged[key] == pytest.approx(value, rel=1e-12, abs=1e-15)
    assert all(float(buf.abs().sum()) == 0.0 for buf in env.episode_sums.values())


def test_an_env_that_ended_an_episode_starts_the_next_as_a_new_one():
    """Observation history, action queue and the ctrl in flight in the actuation latency all start over
    (30 ms: commands in flight when the episode ends), so a rollout after one the env ended itself is the
    new env's rollout, to the bit."""
    artifact = load_artifact(SHIPPED)
    cfg = eval_env_cfg(artifact, EvalCfg(profile="latency"))
    policy = OnnxPolicy(artifact)
    env = TrackingEnv(cfg)
    first, again = rollout(env, policy), rollout(env, policy)
    new = rollout(TrackingEnv(cfg), policy)
    assert len(first.robot_pos_w) > 100 and not first.fell
    np.testing.assert_array_equal(again.robot_pos_w, first.robot_pos_w)
    np.testing.assert_array_equal(new.robot_pos_w, first.robot_pos_w)
    assert env.observations() is env.observations()  # asking twice does not advance the history


def test_batched_rollouts_record_each_env_up_to_its_own_end():
    """Three envs, the shipped policy in envs 0 and 2 and a flailing one in env 1: env 1 falls early and
    its record stops there, while envs 0 and 2 run to the motion's end, each equal to the one-env rollout
    to the bit (the batch does not mix the envs, and the envs reset after env 1's fall are not recorded)."""
    artifact = load_artifact(SHIPPED)
    cfg = eval_env_cfg(artifact, EvalCfg(profile="latency"))
    policy = OnnxPolicy(artifact)
    flail = np.random.default_rng(0)

    def act(obs: torch.Tensor) -> np.ndarray:
        actions = np.stack([policy(o) for o in obs.cpu().numpy()])
        actions[1] = flail.uniform(-3.0, 3.0, actions.shape[1])
        return actions

    single = rollout(TrackingEnv(cfg), policy)
    runs = rollouts(TrackingEnv(dataclasses.replace(cfg, num_envs=3)), act)
    assert [r.fell for r in runs] == [False, True, False]
    assert len(runs[1].robot_pos_w) < len(single.robot_pos_w) // 2
    for run in (runs[0], runs[2]):
        np.testing.assert_array_equal(run.robot_pos_w, single.robot_pos_w)
        np.testing.assert_array_equal(run.ref_pos_w, single.ref_pos_w)
