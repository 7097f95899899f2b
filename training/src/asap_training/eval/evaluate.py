"""``asap-eval``: closed-loop rollout of a policy artifact on a motion under a dynamics profile.

The artifact is loaded and validated by ``asap_core.artifact``. Two backends:

- ``env`` (default): the training env with every randomization, observation noise and the motion-far
  termination off, starting at the motion's first frame (policy run by ``asap_core.inference``);
- ``twin``: the simulated G1 twin's ROS-free core (``asap_sim.twin.Twin``: 500 Hz drives, IMU and joint
  sensors with the profile's noise and latency) driven by the policy node's own tick
  (``asap_core.control.Controller``) through a graph episode's sequence: band, RAMP, HOLD, POLICY with the
  band let go. The ROS graph version (node + twin over DDS) records episodes that
  :mod:`asap_training.eval.metrics` also reads.

Writes the metrics of :mod:`asap_training.eval.metrics` as JSON and a plot::

    asap-eval training/policies/arm_swing/policy.onnx --profile nominal --out /tmp/eval
    asap-eval policy.onnx --backend twin --profile weak_ankles --out /tmp/eval_twin_weak
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from asap_core import g1, quat
from asap_core.artifact import ContractMismatchError, PolicyArtifact, load_artifact
from asap_core.control import ControlCfg, Controller, LoadedPolicy, TickOutput
from asap_core.inference import OnnxPolicy
from asap_core.modes import Event, Mode
from asap_sim.node_tick import node_tick
from asap_sim.profiles import load_profile
from asap_sim.twin import Drive, Twin, TwinConfig, TwinState
from asap_training.data.dataset import RealTrajectory
from asap_training.envs.config import ActionCfg, DomainRandCfg, ObservationCfg, TrackingEnvCfg
from asap_training.envs.tracking_env import TrackingEnv
from asap_training.eval.closed_loop import ClosedLoopRun
from asap_training.eval.metrics import TrackingMetrics, per_frame_errors, tracking_metrics
from asap_training.sim.base import to_numpy


@dataclass(frozen=True, kw_only=True)
class EvalCfg:
    """What a policy is evaluated on, and where."""

    motion: str | None = None
    """Clip name or motion file; None: the artifact's motion."""
    profile: str = "nominal"
    """asap_sim dynamics profile: a shipped name or a YAML path."""
    backend: Literal["env", "twin"] = "env"
    """env: the training env; twin: the twin's ROS-free core ticked like the node."""
    physics_hz: float = 200.0
    """Physics rate of the env backend; training uses 200, the twin runs 500."""
    twin_drive: Drive = "engine"
    """Joint drive of the twin backend (``asap_sim.twin.TwinConfig.drive``): engine, the G1's drivers (PD
    at every physics step); held, Unitree's simulator (the PD of the previous step's sensors, held)."""
    twin_physics_hz: float = 500.0
    """Physics rate of the twin backend (500 as the twin node; Unitree's simulator: 200)."""
    twin_held_lag: float = 1.0
    """The held drive's lag share (``asap_sim.twin.TwinConfig.held_lag``): 1 as Unitree's simulator, 0 the
    PD of each step's start."""
    hold_gains: str = "policy"
    """The node's RAMP/HOLD gains on the twin backend (its ``hold_gains``): ``policy`` (the artifact's) or
    an ``asap_core.g1.GAINS`` name (the unitree_mujoco bringup profile: ``unitree_mujoco_5ms``)."""


@dataclass(frozen=True)
class Rollout:
    """Recorded points of a closed-loop rollout."""

    robot_pos_w: np.ndarray
    """(T, 27, 3)"""
    ref_pos_w: np.ndarray
    fell: bool
    dt: float
    trajectory: RealTrajectory | None = None
    """What the policy observed and applied each tick (twin rollouts): a stage-2 dataset trajectory."""
    fault: str = ""
    """Why the node's safety layer would have latched DAMPING (twin rollouts; "" = it would not)."""


def deterministic(cfg: TrackingEnvCfg) -> TrackingEnvCfg:
    """``cfg`` as one env that scores a policy: from the motion's start, no observation noise, no domain
    randomization, no motion-far termination (an episode ends when the robot falls or the motion does, as on
    the twin and the robot)."""
    return replace(
        cfg,
        num_envs=1,
        random_start=False,
        observations=replace(cfg.observations, noise={}),
        terminations=cfg.terminations.falls_only(),
        domain_rand=DomainRandCfg.off(),
    )


def eval_env_cfg(artifact: PolicyArtifact, cfg: EvalCfg | None = None) -> TrackingEnvCfg:
    """A :func:`deterministic` config matching the artifact's contract, on ``cfg``'s motion, profile and
    physics rate."""
    cfg = cfg or EvalCfg()
    meta = artifact.metadata
    decimation = round(cfg.physics_hz * meta.control_dt)
    return deterministic(TrackingEnvCfg(
        physics_dt=meta.control_dt / decimation,
        decimation=decimation,
        motions=(cfg.motion or meta.motion.name,),
        profile=cfg.profile,
        joint_names=tuple(meta.joint_names),
        actions=ActionCfg(gain_set=_gain_set(artifact)),
        observations=ObservationCfg(history=max(t.history for t in meta.observation.terms)),
    ))  # fmt: skip


def _gain_set(artifact: PolicyArtifact) -> str:
    """The ``asap_core.g1`` gain set the artifact was trained with (its metadata holds the arrays)."""
    meta = artifact.metadata
    try:
        return g1.gain_set_of(meta.joint_names, meta.array("kp"), meta.array("kd"))
    except KeyError as e:
        raise ContractMismatchError("kp/kd", f"{e.args[0]}: the training env cannot rebuild it") from None


def _check_contract(env: TrackingEnv, artifact: PolicyArtifact) -> None:
    meta = artifact.metadata
    pairs = {
        "default_joint_pos": (env.default_q.cpu().numpy(), meta.array("default_joint_pos")),
        "kp": (env.joint_map.gather(env.kp_motor).cpu().numpy(), meta.array("kp")),
        "kd": (env.joint_map.gather(env.kd_motor).cpu().numpy(), meta.array("kd")),
        "action_scale": (np.full(env.num_actions, env.cfg.actions.scale), meta.array("action_scale")),
    }
    for name, (ours, theirs) in pairs.items():
        if not np.allclose(ours, theirs):
            raise ContractMismatchError(name, "the artifact differs from the evaluation env")
    if env.actor_spec.to_dict() != meta.observation.to_dict() or not np.isclose(env.dt, meta.control_dt):
        raise ContractMismatchError(
            "observation", "the artifact's observation/control dt differ from the env's"
        )


def rollout(env: TrackingEnv, policy: Callable[[np.ndarray], np.ndarray]) -> Rollout:
    """Run ``policy`` (one actor observation → one action, e.g. an :class:`OnnxPolicy`) in a one-env
    ``env`` until the motion ends or the robot falls; records the state of every policy step."""
    return rollouts(env, lambda obs: policy(obs[0].cpu().numpy())[None])[0]


def rollouts(env: TrackingEnv, policy: Callable[[torch.Tensor], np.ndarray | torch.Tensor]) -> list[Rollout]:
    """Run a batched ``policy`` (the envs' actor observations → their actions) until every env's episode
    ended (its motion's end or a fall); each env's states of every policy step up to its own end."""
    obs = env.observations()["actor"]
    robot, ref = [env.points.pos_w.cpu().numpy()], [env.ref.pos_w.cpu().numpy()]
    length, fell = np.zeros(env.num_envs, dtype=int), np.zeros(env.num_envs, dtype=bool)
    while not length.all():
        out, _, done, extras = env.step(policy(obs))
        obs = out["actor"]
        ended = to_numpy(done).astype(bool) & (length == 0)
        fell[ended] = ~to_numpy(extras["time_outs"]).astype(bool)[ended]
        # the state after a step that ended an episode is already the next episode's: not recorded
        length[ended] = len(robot)
        robot.append(env.points.pos_w.cpu().numpy())
        ref.append(env.ref.pos_w.cpu().numpy())
    robot_w, ref_w = np.stack(robot, axis=1), np.stack(ref, axis=1)
    return [Rollout(robot_w[i, :n], ref_w[i, :n], bool(fell[i]), env.dt) for i, n in enumerate(length)]


def rollout_twin(
    artifact: PolicyArtifact,
    env: TrackingEnv,
    profile: str,
    seed: int | None = None,
    action_noise: float = 0.0,
    twin_config: TwinConfig | None = None,
    hold_gains: str = "policy",
) -> Rollout:
    """The artifact on the twin core, run as a graph episode runs it: the policy node's own tick
    (``asap_core.control.Controller``, its default configuration) on the twin's LowState, the twin reset
    into the band, two ticks with the motors off (the graph client's), RAMP to the policy's default pose,
    then POLICY with the band let go at the policy's first command, until the motion ends, the node's
    safety layer latches DAMPING (:attr:`Rollout.fault` says why) or the pelvis tilts past 53° (a fall).

    Also returns the run as a stage-2 trajectory: per POLICY tick the LowState the tick ran on (sensed
    joints, reported torques), the ground-truth base as mocap would give it, and the action applied after
    the safety filter, as an ingested episode bag has them. ``action_noise`` is the node's excitation
    (``action_noise_std``, seeded with ``seed``). ``twin_config``: the twin's physics step and drive (default
    :class:`TwinConfig`'s); its sensor noise is seeded with ``seed``. ``hold_gains``: the node's parameter
    of that name. Raises ``RuntimeError`` where the node refuses a step (as the graph client raises
    ``GraphError``).
    """
    meta = artifact.metadata
    twin = Twin(load_profile(profile), replace(twin_config or TwinConfig(), band_held=True, seed=seed))
    control = Controller(
        ControlCfg(control_dt=meta.control_dt, action_noise_std=action_noise, action_noise_seed=seed,
                   hold_gains=hold_gains),
        LoadedPolicy(artifact),
    )
    substeps = round(meta.control_dt / twin.config.physics_dt)

    def tick(s: TwinState, request: Event | None = None) -> TickOutput:
        """One node tick on the LowState ``s``, then the twin steps to the next one."""
        out = node_tick(control, twin, s, request)
        if request is not None and not out.results[0].accepted:
            raise RuntimeError(f"the node refused {request.name} in {out.mode.name}: {out.results[0].reason}")
        twin.step(substeps)
        return out

    for request in (Event.REQUEST_ZERO_TORQUE, Event.REQUEST_ZERO_TORQUE, Event.REQUEST_RAMP):
        out = tick(twin.read_state(), request)
    while out.mode is Mode.RAMP:
        out = tick(twin.read_state())
    if control.mode is not Mode.HOLD:
        raise RuntimeError(f"the twin core did not ramp to the policy's default pose: {control.fault}")

    # the twin stands where the band held it: compare against the reference moved there (heading kept)
    offset = twin.data.qpos[:3] - reference_points(env, 0.0)[0]
    offset[2] = 0.0
    robot: list[np.ndarray] = []
    ref: list[np.ndarray] = []
    rows: list[tuple] = []
    fell = False
    while True:
        s, qpos, qvel = twin.read_state(), twin.data.qpos.copy(), twin.data.qvel.copy()
        robot.append(env.kin.points(qpos)[0][0])
        ref.append(reference_points(env, len(rows) * meta.control_dt) + offset)
        if np.any(np.abs(quat.rotate_inv(s.base_quat_wxyz, np.array([0.0, 0.0, -1.0]))[:2]) > 0.8):
            fell = True
            break
        if not rows:
            twin.release_band()  # as the graph client arms the twin: with the policy's first command
        out = tick(s, None if rows else Event.REQUEST_POLICY)
        if out.mode is Mode.DAMPING:
            fell = True
            break
        rows.append((qpos[:3], qpos[3:7], qvel[:3], quat.rotate(qpos[3:7], qvel[3:6]), s.q, s.dq, out.action,
                     out.phase, s.tau_est))
        if out.phase >= 1.0:  # the motion ended: the node went to HOLD after this command
            break
    columns = [np.array(c) for c in zip(*rows, strict=True)] if len(rows) >= 2 else None
    trajectory = RealTrajectory(f"twin:{profile}", *columns) if columns else None
    return Rollout(np.array(robot), np.array(ref), fell, meta.control_dt, trajectory, control.fault)


def reference_points(env: TrackingEnv, t: float) -> np.ndarray:
    """(27, 3) tracked points of the env's first motion at ``t`` seconds, in its world frame."""
    return env.motions.sample(torch.zeros(1, dtype=torch.long), env.tensor([t])).pos_w[0].cpu().numpy()


def twin_runs(artifact_path: Path, profile: str, seeds: Sequence[int]) -> list[ClosedLoopRun]:
    """The artifact on the twin core (:func:`rollout_twin`) once per twin noise seed, each with the metrics
    of a recorded episode (:func:`asap_training.eval.closed_loop.mean_metrics` averages them); a run
    fails where :func:`rollout_twin` says it fell (a fall or the node's DAMPING latch)."""
    artifact = load_artifact(artifact_path)
    env = TrackingEnv(eval_env_cfg(artifact, EvalCfg(profile=profile)))
    rollouts = (rollout_twin(artifact, env, profile, seed=seed) for seed in seeds)
    return [ClosedLoopRun(r.robot_pos_w, r.ref_pos_w, tracking_metrics(r.robot_pos_w, r.ref_pos_w, r.fell))
            for r in rollouts]


def plot(r: Rollout, m: TrackingMetrics, title: str, path: Path) -> None:
    """Per-frame errors and pelvis height, reference vs robot."""
    import matplotlib  # only to plot: matplotlib takes seconds to import, nothing else here needs it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after choosing the file-only backend

    t = np.arange(len(r.robot_pos_w)) * r.dt
    g, local = per_frame_errors(r.robot_pos_w, r.ref_pos_w)
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    ax1.plot(t, g * 1e3, label=f"global (E_g-mpjpe {m.e_g_mpjpe_mm:.0f} mm)")
    ax1.plot(t, local * 1e3, label=f"root-relative (E_mpjpe {m.e_mpjpe_mm:.0f} mm)")
    ax1.set_ylabel("mean point error (mm)")
    ax1.legend()
    ax2.plot(t, r.ref_pos_w[:, 0, 2], "k--", label="reference")
    ax2.plot(t, r.robot_pos_w[:, 0, 2], label="robot")
    ax2.set_ylabel("pelvis height (m)")
    ax2.set_xlabel("time (s)")
    ax2.legend()
    fig.suptitle(f"{title}: {'success' if m.success else 'FAILED'}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def evaluate(artifact_path: Path, cfg: EvalCfg, out_dir: Path | None = None) -> dict:
    """Evaluate and (with ``out_dir``) write ``eval.json`` and ``eval.png``; returns the JSON dict."""
    artifact = load_artifact(artifact_path)
    profile = cfg.profile
    env = TrackingEnv(eval_env_cfg(artifact, cfg))
    _check_contract(env, artifact)
    if cfg.backend == "twin":
        twin_config = TwinConfig(physics_dt=1.0 / cfg.twin_physics_hz, drive=cfg.twin_drive,
                                 held_lag=cfg.twin_held_lag)
        r = rollout_twin(artifact, env, profile, twin_config=twin_config, hold_gains=cfg.hold_gains)
        drive = cfg.twin_drive + (f", lag {cfg.twin_held_lag:g}" if cfg.twin_drive == "held" else "")
        where = (f"twin core (asap_sim.twin, {cfg.twin_physics_hz:g} Hz physics, {drive} drive) "
                 f"ticked by the policy node's asap_core.control.Controller (hold_gains {cfg.hold_gains})")
    else:
        r = rollout(env, OnnxPolicy(artifact))
        where = f"training env (CPU MuJoCo, {1 / env.cfg.physics_dt:.0f} Hz physics)"
    m = tracking_metrics(r.robot_pos_w, r.ref_pos_w, r.fell)
    result = {
        "artifact": str(artifact_path),
        "sha256": artifact.sha256,
        "policy": artifact.metadata.name,
        "motion": env.motions.motions[0].name,
        "profile": profile,
        "env": where,
        "duration_s": float(len(r.robot_pos_w) * r.dt),
        "motion_length_s": float(env.motions.duration_s[0]),
        **({"fault": r.fault} if r.fault else {}),
        **m.to_dict(),
    }
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "eval.json").write_text(json.dumps(result, indent=2) + "\n")
        plot(r, m, f"{result['policy']} on {result['motion']} ({profile})", out_dir / "eval.png")
    return result
