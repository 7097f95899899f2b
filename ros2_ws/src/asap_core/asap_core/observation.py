"""Policy observation terms and the deploy observation builder, driven by an observation spec.

The spec is data (it travels inside the policy artifact): an ordered tuple of :class:`ObsTerm`
blocks. A block is one term either at the current tick (``history == 0``) or as its last
``history`` values t-1 ... t-h, newest first. The observation is the concatenation of the blocks
in spec order, each multiplied by its scale, then clipped to ``±clip``.

ASAP's actor (arXiv 2502.01143 §II-B; ASAP's
``obs/motion_tracking/deepmimic_a2c_nolinvel_LARGEnoise_history.yaml``, HumanoidVerse
``_get_obs_history_actor``) in this form: keys sorted alphabetically, ``history_actor`` expanded in
place into one block per component key (sorted), each block ``[value(t-1), ..., value(t-4)]``; the
history is updated after the observation is built, so it holds t-1..t-4. :func:`asap_actor_spec` builds it.

Terms are small pure functions of :class:`ObsInputs` and work on any leading batch shape, on numpy
arrays and on torch tensors (:mod:`asap_core.arrays`), so training computes the same quantities for many
environments, on its simulator's device, with the same code. History buffers
store the *unscaled* term values; scaling is linear, so this equals ASAP's scaled buffers (and
training can add its pre-scale noise to the values it hands to :meth:`ObservationBuilder.build_from_values`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from asap_core import json_fields as jf
from asap_core.arrays import Array, as_float, concat, copy, stack
from asap_core.joint_map import JointMap

MAX_TERMS = 64
"""Observation blocks an artifact may declare."""
MAX_HISTORY = 64
"""Longest history (ticks) a block may keep: 1.3 s at 50 Hz; ASAP uses 4."""
MAX_OBS_DIM = 4096
"""Longest observation vector (history blocks included); ASAP's actor has 380. Caps the per-tick
work and memory an artifact can ask for (a 2e7-tick history would need 536 MB and 347 ms a tick)."""


@dataclass(frozen=True, kw_only=True)
class ObsInputs:
    """Everything the terms read, for one robot or a batch (leading axes ``...``).

    Joint vectors are in the policy's joint order (the artifact's ``joint_names``).
    """

    q: Array
    """Joint positions [..., n] (rad)."""
    dq: Array
    """Joint velocities [..., n] (rad/s)."""
    quat_wxyz: Array
    """Pelvis orientation in the world frame [..., 4], w first (LowState IMU convention)."""
    gyro_b: Array
    """Pelvis angular velocity in the pelvis frame [..., 3] (rad/s)."""
    last_action: Array
    """The previous network output [..., n] (normalized action units, before scaling)."""
    phase: Array | float
    """Motion phase [...] in [0, 1]."""
    default_q: Array
    """Default joint positions [n] or [..., n] (rad)."""

    @classmethod
    def from_motor_order(cls, joint_map: JointMap, *, q: Array, dq: Array,
                         quat_wxyz: Array, gyro_b: Array, last_action: Array,
                         phase: Array | float, default_q: Array) -> ObsInputs:
        """Inputs from motor-order joint vectors (LowState), picked into policy order by name.

        ``joint_map`` maps policy order (source) to motor order (target).
        """
        return cls(q=joint_map.gather(q), dq=joint_map.gather(dq), quat_wxyz=quat_wxyz,
                   gyro_b=gyro_b, last_action=last_action, phase=phase, default_q=default_q)


TermFn = Callable[[ObsInputs], Array]


def actions(s: ObsInputs) -> Array:
    """The previous action a_{t-1}."""
    return as_float(s.last_action)


def base_ang_vel(s: ObsInputs) -> Array:
    """Pelvis angular velocity in the pelvis frame (the IMU gyroscope)."""
    return as_float(s.gyro_b)


def dof_pos(s: ObsInputs) -> Array:
    """Joint positions relative to the default pose, q - q_default."""
    return as_float(s.q) - as_float(s.default_q)


def dof_vel(s: ObsInputs) -> Array:
    """Joint velocities."""
    return as_float(s.dq)


def projected_gravity(s: ObsInputs) -> Array:
    """The unit gravity vector (0, 0, -1) expressed in the pelvis frame: R(q)^T g, i.e. minus the third
    row of R(q), written out."""
    q = as_float(s.quat_wxyz)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return stack([2.0 * (w * y - x * z), -2.0 * (y * z + w * x), 2.0 * (x * x + y * y) - 1.0])


def ref_motion_phase(s: ObsInputs) -> Array:
    """The motion phase as a 1-vector."""
    return as_float(s.phase)[..., None]


TERMS: Mapping[str, TermFn] = MappingProxyType(
    {f.__name__: f for f in (actions, base_ang_vel, dof_pos, dof_vel, projected_gravity,
                             ref_motion_phase)}
)
"""Every observation term a spec may name."""

_FIXED_DIMS = MappingProxyType({"base_ang_vel": 3, "projected_gravity": 3, "ref_motion_phase": 1})


def term_dim(name: str, num_joints: int) -> int:
    """The dimension a term has for a policy with ``num_joints`` joints."""
    if name not in TERMS:
        raise KeyError(f"unknown observation term {name!r}; known: {sorted(TERMS)}")
    return _FIXED_DIMS.get(name, num_joints)


@dataclass(frozen=True, kw_only=True)
class ObsTerm:
    """One block of the observation vector."""

    name: str
    """A key of :data:`TERMS`."""
    dim: int
    """Values per frame (checked against :func:`term_dim`)."""
    scale: float = 1.0
    """Multiplier applied to the term's value."""
    history: int = 0
    """0: the value at tick t. h > 0: the values at t-1 ... t-h, newest first (h * dim entries)."""

    @property
    def size(self) -> int:
        """Entries this block occupies in the observation vector."""
        return self.dim * max(1, self.history)


@dataclass(frozen=True, kw_only=True)
class ObservationSpec:
    """The observation layout: blocks in concatenation order and the final clip."""

    terms: tuple[ObsTerm, ...]
    clip: float | None = 100.0
    """Clip the scaled vector to ±clip; None disables."""

    @property
    def dim(self) -> int:
        """Length of the observation vector."""
        return sum(t.size for t in self.terms)

    @property
    def history_lengths(self) -> dict[str, int]:
        """For every term with history blocks, the longest history it needs."""
        out: dict[str, int] = {}
        for t in self.terms:
            if t.history:
                out[t.name] = max(out.get(t.name, 0), t.history)
        return out

    def slices(self) -> list[tuple[str, slice]]:
        """``(label, slice)`` of every block, labels ``name`` or ``name@hN`` for history blocks."""
        out, start = [], 0
        for t in self.terms:
            label = f"{t.name}@h{t.history}" if t.history else t.name
            out.append((label, slice(start, start + t.size)))
            start += t.size
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the artifact's ``observation`` field)."""
        return {"clip": self.clip,
                "terms": [{"name": t.name, "dim": t.dim, "scale": t.scale, "history": t.history}
                          for t in self.terms]}

    @classmethod
    def from_dict(cls, data: Any, at: str = "observation") -> ObservationSpec:
        """Inverse of :meth:`to_dict` for untrusted JSON: types and caps (:data:`MAX_TERMS`,
        :data:`MAX_OBS_DIM`, :data:`MAX_HISTORY`) checked, nothing coerced; raises
        :class:`~asap_core.json_fields.FieldError`. Term names and dims are checked against a
        policy's joints by the artifact validator."""
        spec = jf.obj(data, at, {"terms"}, {"clip"})
        terms = []
        for i, raw in enumerate(jf.array(spec["terms"], f"{at}.terms", max_len=MAX_TERMS)):
            where = f"{at}.terms[{i}]"
            t = jf.obj(raw, where, {"name", "dim"}, {"scale", "history"})
            terms.append(ObsTerm(name=jf.text(t["name"], f"{where}.name", max_len=64),
                                 dim=jf.integer(t["dim"], f"{where}.dim", 1, MAX_OBS_DIM),
                                 scale=jf.number(t.get("scale", 1.0), f"{where}.scale", -1e6, 1e6),
                                 history=jf.integer(t.get("history", 0), f"{where}.history", 0, MAX_HISTORY)))
        clip = spec.get("clip", 100.0)
        return cls(terms=tuple(terms),
                   clip=None if clip is None else jf.number(clip, f"{at}.clip", 0.0, 1e6, lo_open=True))


ASAP_SCALES = MappingProxyType({"base_ang_vel": 0.25, "dof_vel": 0.05})
"""ASAP's observation scales (``deepmimic_a2c_nolinvel_LARGEnoise_history.yaml``); others 1.0."""


def asap_actor_spec(num_joints: int = 23, history: int = 4) -> ObservationSpec:
    """ASAP's tracking actor observation (380-dim for 23 joints), alphabetical as ASAP builds it."""
    current = ("actions", "base_ang_vel", "dof_pos", "dof_vel", "projected_gravity",
               "ref_motion_phase")
    blocks: list[ObsTerm] = []
    for key in sorted((*current, "history_actor")):
        names = sorted(current) if key == "history_actor" else (key,)
        h = history if key == "history_actor" else 0
        blocks += [ObsTerm(name=n, dim=term_dim(n, num_joints), scale=ASAP_SCALES.get(n, 1.0),
                           history=h) for n in names]
    return ObservationSpec(terms=tuple(blocks), clip=100.0)


def compute_terms(spec: ObservationSpec, inputs: ObsInputs) -> dict[str, Array]:
    """Unscaled values [..., dim] of every term the spec uses (current or history)."""
    return {name: TERMS[name](inputs) for name in dict.fromkeys(t.name for t in spec.terms)}


def assemble(spec: ObservationSpec, values: Mapping[str, Array],
             history: Mapping[str, Array]) -> Array:
    """The observation vector [..., spec.dim] (float64).

    ``values[name]`` is [..., dim] at tick t; ``history[name]`` is [..., H, dim], newest first.
    """
    parts = []
    for t in spec.terms:
        if t.history:
            block = history[t.name][..., : t.history, :]
            block = block.reshape(*block.shape[:-2], t.history * t.dim)
        else:
            block = values[t.name]
        parts.append(block * t.scale)
    obs = concat(parts)
    return obs if spec.clip is None else obs.clip(-spec.clip, spec.clip)


@dataclass(kw_only=True)
class ObservationBuilder:
    """Builds successive observations and keeps the history buffers (one robot, or a batch).

    ``build`` computes the terms, assembles the vector from the history as it stands (t-1 ...),
    then pushes the new values, exactly ASAP's order. ``reset`` zeroes the history, as ASAP does
    at episode start and on a policy switch. ``zeros(shape)`` makes the history buffers (numpy
    float64 by default; training passes a torch allocator for its device).
    """

    spec: ObservationSpec
    batch_shape: tuple[int, ...] = ()
    zeros: Callable[[tuple[int, ...]], Any] = np.zeros
    _history: dict[str, Array] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._history = {name: self.zeros((*self.batch_shape, h, self._dim_of(name)))
                         for name, h in self.spec.history_lengths.items()}

    def _dim_of(self, name: str) -> int:
        return next(t.dim for t in self.spec.terms if t.name == name)

    def reset(self, mask: Array | None = None) -> None:
        """Zero the history (all of it, or the batch entries where ``mask`` is true)."""
        for buf in self._history.values():
            if mask is None:
                buf[...] = 0.0
            else:
                buf[mask] = 0.0

    def build(self, inputs: ObsInputs) -> Array:
        """The observation at this tick [..., spec.dim]; advances the history by one tick."""
        return self.build_from_values(compute_terms(self.spec, inputs))

    def build_from_values(self, values: Mapping[str, Array]) -> Array:
        """As :meth:`build`, from term values computed (and perhaps noised) by the caller."""
        obs = assemble(self.spec, values, self._history)
        for name, buf in self._history.items():
            buf[..., 1:, :] = copy(buf[..., :-1, :])  # torch refuses overlapping in-place copies
            buf[..., 0, :] = values[name]
        return obs

    @property
    def history(self) -> Mapping[str, Array]:
        """Read-only view of the history buffers {term: [..., H, dim]}, newest first."""
        return MappingProxyType(self._history)


def motion_phase(tick: int, control_dt: float, motion_length_s: float) -> float:
    """Phase in [0, 1] at policy tick ``tick`` (0 = the first policy tick): t / T, clipped."""
    return float(min(1.0, max(0.0, tick * control_dt / motion_length_s)))
