"""The delta-action model πΔ as a file: ONNX (observation normalizer included) + JSON metadata.

Training (``asap-delta``) exports it; fine-tuning loads it frozen into the stage-1 action path through
``ActionCfg.delta_action = "asap_training.envs.delta_model:FrozenDelta"``. πΔ is never deployed: the
fine-tuned policy is. The file's sha256 goes into the fine-tuned artifact's provenance.
"""

from __future__ import annotations

import io
import json
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
import onnxruntime as ort
import torch

from asap_core.artifact import sha256_of
from asap_training.envs.delta_env import delta_observation, expand_delta

if TYPE_CHECKING:
    from asap_training.envs.tracking_env import TrackingEnv

METADATA_KEY = "asap_delta_action"


@dataclass(frozen=True, kw_only=True)
class DeltaModelMeta:
    """What a user of πΔ must match: joints, control period, observation layout and scales."""

    action_joints: tuple[str, ...]
    mask: tuple[float, ...]
    """1 where Δa is applied (the learned joint subset); the network outputs only those joints."""
    control_dt: float
    obs_dim: int
    obs_scales: dict[str, float]
    action_clip: float
    horizon_s: float
    dataset_sha256: str
    profile: str
    """Dynamics profile of the simulator πΔ corrects."""
    action_history: int = 0
    """Earlier actions in the observation (``DeltaCfg.action_history``; files without it: 0)."""
    joint_shares: dict[str, float] = field(default_factory=dict)
    """Where the joints were chosen from the data (``DeltaCfg.joints = ("auto",)``): each action joint's
    share of the one-step corrections that chose them; empty where the user named the joints."""


def export_delta_model(module: Any, path: str | Path, meta: DeltaModelMeta) -> str:
    """Export a torch module (obs [batch, obs_dim] → Δa [batch, k] of the k masked joints); returns the
    file's sha256."""
    buf = io.BytesIO()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the legacy exporter is intended
        torch.onnx.export(
            module.eval(),
            (torch.zeros(1, meta.obs_dim),),
            buf,
            input_names=["obs"],
            output_names=["delta_action"],
            opset_version=17,
            dynamo=False,
            dynamic_axes={"obs": {0: "batch"}, "delta_action": {0: "batch"}},
        )
    model = onnx.load_from_string(buf.getvalue())
    entry = model.metadata_props.add()
    entry.key, entry.value = METADATA_KEY, json.dumps(asdict(meta), sort_keys=True)
    data = model.SerializeToString()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_bytes(data)
    return sha256_of(data)


class DeltaModel:
    """A loaded πΔ: batched observations in, masked and clipped Δa out."""

    def __init__(self, path: str | Path) -> None:
        """Load and check the metadata; refuses files without it, naming the file."""
        data = Path(path).read_bytes()
        self.path, self.sha256 = Path(path), sha256_of(data)
        props = {p.key: p.value for p in onnx.load_from_string(data).metadata_props}
        if METADATA_KEY not in props:
            raise ValueError(
                f"{path}: not a delta-action model (no {METADATA_KEY!r} metadata); export one with asap-delta"
            )
        raw = json.loads(props[METADATA_KEY])
        self.meta = DeltaModelMeta(
            **{**raw, "action_joints": tuple(raw["action_joints"]), "mask": tuple(raw["mask"])}
        )
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        self._session = ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])
        self._cols = np.flatnonzero(self.meta.mask)

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """Δa (N, A) in normalized action units for observations (N, obs_dim)."""
        (out,) = self._session.run(None, {"obs": obs.astype(np.float32)})
        width = len(self.meta.action_joints)
        return bounded_delta(out.astype(np.float64), self._cols, width, self.meta.action_clip)


def bounded_delta(delta: np.ndarray, cols: np.ndarray, num_actions: int, bound: float) -> np.ndarray:
    """What a πΔ file gives: Δa of the learned joints (N, k) clipped to ±``bound`` (``DeltaCfg.max_delta``,
    the file's ``action_clip``), over every action joint (N, A)."""
    return expand_delta(np.clip(delta, -bound, bound), cols, num_actions)


class FrozenDelta:
    """``DeltaActionSource`` of fine-tuning: Δa = πΔ(s, a) for the action about to be applied."""

    def __init__(self, env: TrackingEnv, path: str, scale_range: tuple[float, float] | None = None) -> None:
        """Load πΔ and check it fits the env (joints, control period). ``scale_range``: each env's Δa is
        multiplied per joint by a factor drawn from this range at every episode start (ASAP's
        ``rescale_delta_a``; :attr:`~asap_training.rl.finetune.FineTuneCfg.delta_scale_range`)."""
        self.model = DeltaModel(path)
        meta = self.model.meta
        if meta.action_joints != tuple(env.cfg.joint_names):
            raise ValueError(f"{path}: delta model joints differ from the policy's {env.cfg.joint_names}")
        if not np.isclose(meta.control_dt, env.dt):
            raise ValueError(
                f"{path}: delta model control period {meta.control_dt} s != the env's {env.dt} s"
            )
        self.last = env.tensor(np.zeros((env.num_envs, len(meta.action_joints))))
        if scale_range is not None and not 0.0 <= scale_range[0] <= scale_range[1]:
            raise ValueError(f"delta scale range {scale_range}: expected 0 <= low <= high")
        self.scale = torch.ones_like(self.last)
        if scale_range is not None and scale_range[0] == scale_range[1]:  # a constant: no draws from env.rng
            self.scale.fill_(scale_range[0])
            scale_range = None
        self.scale_range = scale_range
        self.earlier = env.tensor(np.zeros((env.num_envs, meta.action_history * len(meta.action_joints))))

    def __call__(self, env: TrackingEnv, action: torch.Tensor) -> torch.Tensor:
        """Δa for every env; an env's first step of an episode sees no previous Δa and, as earlier
        actions, its first one (as a replay from a recording's first frame does). (πΔ runs in ONNX
        Runtime on the CPU: on a GPU env its input and output cross to the host once per step.)"""
        starting = env.episode_step == 0
        self.last[starting] = 0.0
        self.earlier[starting] = action[starting].repeat(1, self.model.meta.action_history)
        if self.scale_range is not None and bool(starting.any()):
            self.scale[starting] = env._uniform(*self.scale_range, (int(starting.sum()), self.scale.shape[1]))
        obs = delta_observation(env, action, self.earlier, self.last, self.model.meta.obs_scales)
        self.last = env.tensor(self.model(obs.cpu().numpy()))  # πΔ's own output, as it observes it
        self.earlier = torch.cat([action, self.earlier], dim=1)[:, : self.earlier.shape[1]]
        return self.last * self.scale
