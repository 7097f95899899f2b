"""``asap-deltadyn``: the DeltaDynamics baseline — a learned residual of the simulator's dynamics (§4.7).

ASAP's DeltaDynamics baseline learns ``f^Δ_θ(s, a)`` so that the simulator's next state plus ``f^Δ``
matches the real next state, trained with a K-step rollout loss, then fine-tunes the policy in the
corrected simulator. MuJoCo is not differentiable, so the K-step loss cannot be backpropagated through the
simulator; it is minimised with **data aggregation over K-step rollouts** (DAgger for dynamics, "Data as
Demonstrator", Venkatraman et al. 2015):

1. from recorded states ``s_t`` replay the recorded actions for K steps in the simulator corrected by the
   current ``f^Δ`` (round 0: uncorrected), visiting states ``ŝ_{t+k}``;
2. at each visited state the target is the correction that lands the next step on the recording,
   ``s_{t+k+1} ⊖ f^sim(ŝ_{t+k}, a_{t+k})``; add (ŝ, a, target) to the aggregated data set;
3. regress ``f^Δ`` on everything aggregated so far; repeat.

Every step of a corrected rollout is thereby trained to return to the recorded trajectory from the states
the corrected simulator actually reaches, which bounds the K-step error (not only the one-step error of
states on the recording, where rollouts never stay). The K-step rollout error is logged each round.

State and frames: the correction covers the whole floating-base state — pelvis position, orientation
(rotation vector), linear and angular velocity — and the 29 joint positions and velocities. Base vectors
are expressed in the pelvis frame of the simulated next state and the model sees the pelvis-frame
velocities, projected gravity, pelvis height, joints and the action, so what it learns does not depend on
where the robot stands or which way it faces. The action ``a`` is the policy's, in normalized units; the
simulator only receives motor commands, so :class:`ResidualDynamicsSimulator` recovers it as
``(q_cmd − q_default) / scale`` in the policy joints (the model file records both).

:class:`ResidualDynamicsSimulator` is a simulator backend (``TrackingEnvCfg.simulator``) that applies the
correction after every policy step, so open-loop replays and fine-tuning use the learned simulator::

    asap-deltadyn --dataset runs/demo/dataset.npz --out runs/demo/deltadyn.pt --k 5

    open_loop_errors(dataset, env_overrides=simulator_overrides("runs/demo/deltadyn.pt"))
    fine_tune(parent, FineTuneCfg(**simulator_overrides("runs/demo/deltadyn.pt")), run_dir, out)

The correction is learned for one physics rate: the open-loop replays' 0.002 s by default; fit with
``--physics-dt 0.005`` for a model that fine-tuning (stage-1 rate) uses (another rate warns).
"""

from __future__ import annotations

import hashlib
import json
import pickle
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import mujoco
import numpy as np
import torch
from tqdm import tqdm

from asap_core import g1, quat
from asap_core.joint_map import JointMap
from asap_sim.motor import MotorCommand, MotorParams
from asap_training.data.dataset import RealDataset
from asap_training.envs.delta_env import DeltaCfg, DeltaEnv, delta_env_cfg
from asap_training.sim.base import SimState, to_numpy
from asap_training.sim.mujoco_cpu import MujocoCpuSimulator

FORMAT_VERSION = 1
SIMULATOR = "asap_training.baselines.delta_dynamics:ResidualDynamicsSimulator"
"""``TrackingEnvCfg.simulator`` / ``FineTuneCfg.simulator`` value of the corrected simulator."""
RESIDUAL_LAYOUT = (
    ("base_pos_b", 3),
    ("base_rot_b", 3),
    ("base_lin_vel_b", 3),
    ("base_ang_vel_b", 3),
    ("joint_pos", g1.NUM_MOTORS),
    ("joint_vel", g1.NUM_MOTORS),
)
"""The correction vector, in order (pelvis frame of the simulated next state; joints in motor order)."""
RESIDUAL_DIM = sum(n for _, n in RESIDUAL_LAYOUT)


# --- the state and its correction --------------------------------------------------------------------
@dataclass(eq=False)
class FloatingState:
    """The floating-base state the correction acts on; batched, world frame unless ``_b``."""

    pos_w: np.ndarray
    quat_w: np.ndarray
    lin_vel_w: np.ndarray
    ang_vel_b: np.ndarray
    q: np.ndarray
    """(N, 29) motor order."""
    dq: np.ndarray

    @classmethod
    def of_sim(cls, s: SimState) -> FloatingState:
        """A copy of a simulator's state (the simulator refills its arrays in place)."""
        fields = (s.root_pos_w, s.root_quat_w, s.root_lin_vel_w, s.root_ang_vel_b, s.joint_pos, s.joint_vel)
        return cls(*(to_numpy(a).copy() for a in fields))

    @classmethod
    def of_dataset(cls, dataset: RealDataset) -> FloatingState:
        """Every recorded row, trajectories concatenated (recorded angular velocity is world frame)."""
        cat = lambda name: np.concatenate([getattr(tr, name) for tr in dataset.trajectories])  # noqa: E731
        quat_w = cat("base_quat_w")
        return cls(
            cat("base_pos_w"),
            quat_w,
            cat("base_lin_vel_w"),
            quat.rotate_inv(quat_w, cat("base_ang_vel_w")),
            cat("joint_pos"),
            cat("joint_vel"),
        )

    def rows(self, index: np.ndarray) -> FloatingState:
        """The states at ``index``."""
        return FloatingState(*(a[index] for a in self.arrays()))

    def arrays(self) -> tuple[np.ndarray, ...]:
        """The fields in declaration order."""
        return self.pos_w, self.quat_w, self.lin_vel_w, self.ang_vel_b, self.q, self.dq


def state_residual(target: FloatingState, sim: FloatingState) -> np.ndarray:
    """(N, RESIDUAL_DIM) correction that turns ``sim`` into ``target`` (inverse of :func:`apply_residual`)."""
    return np.concatenate(
        [
            quat.rotate_inv(sim.quat_w, target.pos_w - sim.pos_w),
            quat.to_rotvec(quat.mul(quat.conj(sim.quat_w), target.quat_w)),
            quat.rotate_inv(sim.quat_w, target.lin_vel_w - sim.lin_vel_w),
            target.ang_vel_b - sim.ang_vel_b,
            target.q - sim.q,
            target.dq - sim.dq,
        ],
        axis=1,
    )


def apply_residual(sim: FloatingState, residual: np.ndarray) -> FloatingState:
    """``sim`` corrected by a :func:`state_residual` vector."""
    dp, dr, dv, dw, dq, ddq = np.split(residual, np.cumsum([n for _, n in RESIDUAL_LAYOUT])[:-1], axis=1)
    rot = quat.mul(sim.quat_w, quat.from_rotvec(dr))
    return FloatingState(
        sim.pos_w + quat.rotate(sim.quat_w, dp),
        rot / np.linalg.norm(rot, axis=1, keepdims=True),
        sim.lin_vel_w + quat.rotate(sim.quat_w, dv),
        sim.ang_vel_b + dw,
        sim.q + dq,
        sim.dq + ddq,
    )


def features(s: FloatingState, action: np.ndarray, default_q_motor: np.ndarray) -> np.ndarray:
    """What ``f^Δ`` sees: pelvis height, projected gravity, pelvis-frame velocities, joints, action."""
    return np.concatenate(
        [
            s.pos_w[:, 2:3],
            quat.rotate_inv(s.quat_w, np.array([0.0, 0.0, -1.0])),
            quat.rotate_inv(s.quat_w, s.lin_vel_w),
            s.ang_vel_b,
            s.q - default_q_motor,
            s.dq,
            action,
        ],
        axis=1,
    )


def feature_dim(num_actions: int) -> int:
    """Width of :func:`features`."""
    return 1 + 3 + 3 + 3 + 2 * g1.NUM_MOTORS + num_actions


# --- the model -----------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class DeltaDynamicsMeta:
    """What a user of the model must match (stored in the model file)."""

    action_joints: tuple[str, ...]
    default_joint_pos: tuple[float, ...]
    """Policy joints' default pose: ``a = (q_cmd − default) / action_scale``."""
    action_scale: float
    control_dt: float
    """s per correction: one per policy step."""
    physics_dt: float
    """Physics step of the simulator it was fitted to (another rate changes what it corrects)."""
    profile: str
    """Dynamics profile of the simulator it corrects."""
    hidden: tuple[int, ...]
    k_steps: int
    clip_sigma: float
    """Corrections are clipped to ``mean ± clip_sigma·std`` of the training targets (out-of-distribution
    states in fine-tuning must not launch the robot)."""
    dataset_sha256: str
    format_version: int = FORMAT_VERSION


class ResidualNet(torch.nn.Module):
    """MLP on normalized features → normalized correction; normalization and clipping are buffers."""

    def __init__(self, in_dim: int, hidden: Sequence[int], clip_sigma: float) -> None:
        super().__init__()
        layers, width = [], in_dim
        for h in hidden:
            layers += [torch.nn.Linear(width, h), torch.nn.ELU()]
            width = h
        last = torch.nn.Linear(width, RESIDUAL_DIM)
        torch.nn.init.zeros_(last.weight)  # starts as "no correction" beyond the mean target
        torch.nn.init.zeros_(last.bias)
        self.mlp = torch.nn.Sequential(*layers, last)
        self.clip_sigma = clip_sigma
        for name, dim in (
            ("in_mean", in_dim),
            ("in_std", in_dim),
            ("out_mean", RESIDUAL_DIM),
            ("out_std", RESIDUAL_DIM),
        ):
            self.register_buffer(name, torch.zeros(dim) if "mean" in name else torch.ones(dim))

    def fit_normalization(self, x: np.ndarray, y: np.ndarray) -> None:
        """Feature and target statistics (floors keep constant columns, e.g. held wrists, finite)."""
        for (mean, std), data, floor in (
            ((self.in_mean, self.in_std), x, 1e-3),
            ((self.out_mean, self.out_std), y, 1e-6),
        ):
            mean.copy_(torch.as_tensor(data.mean(axis=0)))
            std.copy_(torch.as_tensor(np.maximum(data.std(axis=0), floor)))

    def normalized(self, x: torch.Tensor) -> torch.Tensor:
        """Normalized correction (the regression target space)."""
        return self.mlp((x - self.in_mean) / self.in_std)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Correction in physical units."""
        z = self.normalized(x).clamp(-self.clip_sigma, self.clip_sigma)
        return self.out_mean + self.out_std * z


class DeltaDynamicsModel:
    """``f^Δ`` with its metadata: numpy in, numpy out; save/load as a torch state dict + JSON metadata."""

    def __init__(self, net: ResidualNet, meta: DeltaDynamicsMeta, sha256: str = "") -> None:
        self.net, self.meta, self.sha256 = net.eval(), meta, sha256
        self.default_q = np.asarray(meta.default_joint_pos)
        self._action_rows = np.array([g1.MOTOR_ORDER.index(n) for n in meta.action_joints])
        self.default_q_motor = JointMap.from_names(meta.action_joints, g1.MOTOR_ORDER).apply(
            self.default_q, fill=g1.default_pose(g1.MOTOR_ORDER)
        )

    @classmethod
    def new(cls, meta: DeltaDynamicsMeta, seed: int = 0) -> DeltaDynamicsModel:
        """An untrained model (deterministic initialization; the global torch RNG is left alone)."""
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            net = ResidualNet(feature_dim(len(meta.action_joints)), meta.hidden, meta.clip_sigma)
        return cls(net, meta)

    def action_of(self, q_cmd_motor: np.ndarray) -> np.ndarray:
        """The policy action (normalized) behind motor-order position targets."""
        return (q_cmd_motor[:, self._action_rows] - self.default_q) / self.meta.action_scale

    def features(self, s: FloatingState, q_cmd_motor: np.ndarray) -> np.ndarray:
        """:func:`features` for a state and the position command applied from it."""
        return features(s, self.action_of(q_cmd_motor), self.default_q_motor)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """(N, RESIDUAL_DIM) corrections for (N, feature_dim) features."""
        with torch.no_grad():
            return self.net(torch.as_tensor(x, dtype=torch.float32)).double().numpy()

    def save(self, path: str | Path) -> str:
        """Write the model; returns the file's sha256."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = json.dumps(asdict(self.meta), sort_keys=True)
        torch.save({"meta": meta, "state_dict": self.net.state_dict()}, path)
        self.sha256 = hashlib.sha256(path.read_bytes()).hexdigest()
        return self.sha256

    @classmethod
    def load(cls, path: str | Path) -> DeltaDynamicsModel:
        """Read a file written by :meth:`save` (tensors and strings only: no code is unpickled)."""
        data = Path(path).read_bytes()
        try:
            blob = torch.load(Path(path), weights_only=True)
            raw = json.loads(blob["meta"])
        except (RuntimeError, KeyError, TypeError, ValueError, EOFError, pickle.UnpicklingError) as exc:
            raise ValueError(f"{path}: not a DeltaDynamics model written by asap-deltadyn ({exc})") from None
        if raw.get("format_version") != FORMAT_VERSION:
            raise ValueError(
                f"{path}: DeltaDynamics format {raw.get('format_version')!r}, "
                f"this code reads {FORMAT_VERSION}"
            )
        meta = DeltaDynamicsMeta(
            **{**raw, **{k: tuple(raw[k]) for k in ("action_joints", "default_joint_pos", "hidden")}}
        )
        model = cls.new(meta)
        model.net.load_state_dict(blob["state_dict"])
        model.net.eval()
        model.sha256 = hashlib.sha256(data).hexdigest()
        return model


# --- the simulator backend ----------------------------------------------------------------------------
class ResidualDynamicsSimulator(MujocoCpuSimulator):
    """The CPU MuJoCo backend with ``s ← s + f^Δ(s_t, a_t)`` after every policy step.

    ``path``: a model from ``asap-deltadyn`` (``TrackingEnvCfg.simulator_args = {"path": ...}``); without
    it the simulator is plain MuJoCo until :attr:`model` is set (training attaches its model that way).
    Each step keeps :attr:`last_features`, :attr:`last_raw` (the uncorrected next state) and
    :attr:`last_state` (after the correction) for training.
    """

    def __init__(
        self,
        models: Sequence[mujoco.MjModel],
        num_envs: int,
        motor_params: MotorParams,
        latency_steps: int = 0,
        threads: int = 0,
        device: str = "cpu",
        path: str | None = None,
    ) -> None:
        super().__init__(models, num_envs, motor_params, latency_steps, threads, device)
        self.model = DeltaDynamicsModel.load(path) if path else None
        self.correct = self.model is not None
        """Apply the model's correction (False: only record transitions)."""
        self.last_features: np.ndarray | None = None
        self.last_raw: FloatingState | None = None
        self.last_state: FloatingState | None = None
        if self.model and not np.isclose(self.model.meta.physics_dt, self.physics_dt):
            warnings.warn(
                f"{path}: fitted at physics dt {self.model.meta.physics_dt} s, this simulator steps "
                f"{self.physics_dt} s; the correction was learned for the other rate",
                stacklevel=2,
            )

    def step(self, command: MotorCommand, substeps: int) -> None:
        """Physics, then (with a model) the correction predicted from the state before the step."""
        if self.model is None:
            super().step(command, substeps)
            return
        if not np.isclose(substeps * self.physics_dt, self.model.meta.control_dt):
            raise ValueError(
                f"the residual model corrects every {self.model.meta.control_dt} s, this step lasts "
                f"{substeps} x {self.physics_dt} s; use it with the policy period it was fitted for"
            )
        q_cmd = np.broadcast_to(to_numpy(command.q), (self.num_envs, g1.NUM_MOTORS))
        self.last_features = self.model.features(FloatingState.of_sim(self.state), q_cmd)
        super().step(command, substeps)
        self.last_raw = FloatingState.of_sim(self.state)
        self.last_state = self.last_raw
        if self.correct:
            self.last_state = apply_residual(self.last_raw, self.model(self.last_features))
            s = self.last_state
            self.set_floating_state(s.pos_w, s.quat_w, s.lin_vel_w, s.ang_vel_b, s.q, s.dq)


def simulator_overrides(path: str | Path) -> dict:
    """``env_overrides`` of :func:`~asap_training.eval.openloop.open_loop_errors` (and the
    ``simulator``/``simulator_args`` of ``FineTuneCfg``) that select the corrected simulator."""
    return {"simulator": SIMULATOR, "simulator_args": {"path": str(path)}}


# --- training -----------------------------------------------------------------------------------------
@dataclass(kw_only=True)
class DeltaDynCfg:
    """Data aggregation rounds, K, the regression and the simulator being corrected."""

    k_steps: int = 5
    """Rollout length of every collected sequence (the paper's K)."""
    rounds: int = 4
    """Data aggregation rounds (round 0 rolls out the uncorrected simulator)."""
    starts_per_round: int = 512
    """Recorded start states rolled out per round (all of them if the dataset has fewer)."""
    num_envs: int = 128
    epochs: int = 60
    """Passes over the aggregated data after each round."""
    batch_size: int = 256
    lr: float = 1e-3
    weight_decay: float = 1e-4
    hidden: tuple[int, ...] = (256, 256)
    """Hidden layer widths of the residual MLP."""
    clip_sigma: float = 5.0
    profile: str = "nominal"
    """Dynamics profile of the simulator being corrected."""
    physics_dt: float = 0.002
    """Physics step of the corrected simulator: the twin's 0.002 (open-loop replays) by default; 0.005
    matches stage-1 training and fine-tuning (a model warns when used at another rate)."""
    seed: int = 0
    """Random seed of the start sampling and the regression."""


def _starts(dataset: RealDataset, k: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(trajectory ids, frames) of every frame with K recorded successors, in a seeded random order."""
    ids = np.concatenate([np.full(max(0, tr.num_steps - k), i) for i, tr in enumerate(dataset.trajectories)])
    frames = np.concatenate([np.arange(max(0, tr.num_steps - k)) for tr in dataset.trajectories])
    if not ids.size:
        raise ValueError(f"no trajectory has the {k + 1} ticks a K = {k} rollout needs")
    order = rng.permutation(ids.size)
    return ids[order].astype(np.intp), frames[order].astype(np.intp)


def train_delta_dynamics(
    dataset: RealDataset, cfg: DeltaDynCfg | None = None, progress: bool = True
) -> tuple[DeltaDynamicsModel, list[dict]]:
    """Fit ``f^Δ`` by K-step rollouts with data aggregation (module docstring); returns the model and
    one log entry per round (K-step rollout error of that round's rollouts, regression loss)."""
    cfg = cfg or DeltaDynCfg()
    rng = np.random.default_rng(cfg.seed)
    ids, frames = _starts(dataset, cfg.k_steps, rng)
    num_envs = min(cfg.num_envs, ids.size)
    batches = max(1, min(cfg.starts_per_round, ids.size) // num_envs)
    env_cfg = delta_env_cfg(dataset, num_envs=num_envs, profile=cfg.profile, seed=cfg.seed)
    env_cfg.simulator = SIMULATOR
    env_cfg.physics_dt, env_cfg.decimation = cfg.physics_dt, round(dataset.control_dt / cfg.physics_dt)
    env = DeltaEnv(
        env_cfg, dataset, DeltaCfg(horizon_s=cfg.k_steps * dataset.control_dt), starts=(ids, frames)
    )
    sim: ResidualDynamicsSimulator = env.sim
    model = DeltaDynamicsModel.new(
        DeltaDynamicsMeta(
            action_joints=dataset.action_joints,
            default_joint_pos=tuple(env.default_q.tolist()),
            action_scale=env_cfg.actions.scale,
            control_dt=dataset.control_dt,
            physics_dt=env_cfg.physics_dt,
            profile=cfg.profile,
            hidden=tuple(cfg.hidden),
            k_steps=cfg.k_steps,
            clip_sigma=cfg.clip_sigma,
            dataset_sha256=dataset.sha256,
        ),
        cfg.seed,
    )
    sim.model = model
    recorded = FloatingState.of_dataset(dataset)
    xs, ys, log = [], [], []
    torch.manual_seed(cfg.seed)
    optimizer = torch.optim.Adam(model.net.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    bar = tqdm(total=cfg.rounds, desc="DeltaDynamics", unit="round", disable=not progress, dynamic_ncols=True)
    for r in range(cfg.rounds + 1):  # the extra pass only measures the final model's K-step error
        sim.correct = r > 0
        k_step_errors = []
        for _ in range(batches):
            for _k in range(cfg.k_steps):
                rows = env.recorded_row().cpu().numpy()
                env.step(np.zeros((num_envs, env.num_actions)))
                features, raw = sim.last_features, sim.last_raw
                assert features is not None and raw is not None  # set by every step
                target = recorded.rows(rows + 1)
                xs.append(features)
                ys.append(state_residual(target, raw))
            assert sim.last_state is not None
            k_step_errors.append(state_residual(target, sim.last_state))
        entry = {"round": r, **_k_step_error(np.concatenate(k_step_errors))}
        if r < cfg.rounds:
            x, y = np.concatenate(xs), np.concatenate(ys)
            if r == 0:
                model.net.fit_normalization(x, y)
            entry |= {"samples": int(x.shape[0]), "loss": _regress(model.net, optimizer, x, y, cfg, rng)}
            bar.update(1)
            bar.set_postfix(loss=f"{entry['loss']:.4f}", k_step_mm=f"{entry['k_step_base_pos_mm']:.2f}")
        log.append(entry)
    bar.close()
    sim.model = None
    return model, log


def _k_step_error(residual: np.ndarray) -> dict[str, float]:
    """Mean distance to the recording after K steps: pelvis position (mm), joint positions (rad)."""
    n = RESIDUAL_LAYOUT[0][1]
    q = slice(12, 12 + g1.NUM_MOTORS)
    return {
        "k_step_base_pos_mm": float(np.mean(np.linalg.norm(residual[:, :n], axis=1)) * 1e3),
        "k_step_joint_pos_rad": float(np.mean(np.abs(residual[:, q]))),
    }


def _regress(
    net: ResidualNet,
    optimizer: torch.optim.Optimizer,
    x: np.ndarray,
    y: np.ndarray,
    cfg: DeltaDynCfg,
    rng: np.random.Generator,
) -> float:
    """Minibatch MSE in normalized target units; returns the last epoch's mean loss."""
    xt = torch.as_tensor(x, dtype=torch.float32)
    yt = (torch.as_tensor(y, dtype=torch.float32) - net.out_mean) / net.out_std
    net.train()
    mean_loss = 0.0
    for _ in range(cfg.epochs):
        order = torch.as_tensor(rng.permutation(x.shape[0]))
        total = 0.0
        for start in range(0, x.shape[0], cfg.batch_size):
            batch = order[start : start + cfg.batch_size]
            loss = torch.nn.functional.mse_loss(net.normalized(xt[batch]), yt[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * batch.numel()
        mean_loss = total / x.shape[0]
    net.eval()
    return mean_loss
