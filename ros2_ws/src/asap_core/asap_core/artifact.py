"""The policy artifact: one ``.onnx`` file whose metadata carries everything deploy needs.

The train↔deploy contract. The ONNX model's ``metadata_props`` hold one key, ``asap_policy``,
whose value is a JSON object (schema version ``contract_version``):

================== ===================================================================
key                meaning
================== ===================================================================
contract_version   int, :data:`CONTRACT_VERSION`
name               str, human-readable policy name
joint_names        [n] str, policy joint order (names from ``asap_core.g1``)
default_joint_pos  [n] float, rad; q_target = default + action_scale * action
kp, kd             [n] float, PD gains the policy was trained with (N m/rad, N m s/rad)
action_scale       [n] float, per-joint action scale (rad per action unit)
action_clip        float or null, the network output is clipped to ±action_clip
control_dt         float, s, policy period (0.02 = 50 Hz)
observation        {"terms": [{"name", "dim", "scale", "history"}...], "clip"} (observation.py)
motion             {"name": str, "length_s": float}, phase = t / length_s
onnx_input         str, name of the graph input [batch, observation dim] (float32)
onnx_output        str, name of the graph output [batch, n] (float32)
provenance         {"training_run", "parent_sha256", "dataset_sha256", "delta_model_sha256"},
                   optional strings ("" = unknown)
================== ===================================================================

:func:`write_artifact` (training, tests) validates and writes; :func:`load_artifact` (deploy)
reads, validates against the G1 joint table and the graph's input/output shapes, and raises an
:class:`ArtifactError` subclass whose message names the field and what was expected.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from asap_core import g1
from asap_core.observation import ObservationSpec, asap_actor_spec, term_dim

CONTRACT_VERSION = 1
METADATA_KEY = "asap_policy"


class ArtifactError(ValueError):
    """A policy artifact that cannot be used. ``field`` names the offending metadata field."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


class CorruptArtifactError(ArtifactError):
    """Not a readable ONNX model, or no ``asap_policy`` metadata in it."""


class ContractVersionError(ArtifactError):
    """Metadata written for a contract version this code does not read."""


class ContractMismatchError(ArtifactError):
    """Metadata inconsistent with itself, the G1 joint table or the ONNX graph."""


@dataclass(frozen=True, kw_only=True)
class Motion:
    """The reference motion the policy tracks."""

    name: str
    length_s: float
    """Motion duration T (s); the phase runs from 0 to 1 over it."""


@dataclass(frozen=True, kw_only=True)
class Provenance:
    """Where the policy came from (all optional; empty = unknown)."""

    training_run: str = ""
    parent_sha256: str = ""
    """sha256 of the artifact this one was fine-tuned from."""
    dataset_sha256: str = ""
    delta_model_sha256: str = ""


@dataclass(frozen=True, kw_only=True)
class PolicyMetadata:
    """The artifact metadata (see the module docstring for units)."""

    name: str
    joint_names: tuple[str, ...]
    default_joint_pos: tuple[float, ...]
    kp: tuple[float, ...]
    kd: tuple[float, ...]
    action_scale: tuple[float, ...]
    control_dt: float
    observation: ObservationSpec
    motion: Motion
    action_clip: float | None = 100.0
    onnx_input: str = "obs"
    onnx_output: str = "action"
    provenance: Provenance = field(default_factory=Provenance)
    contract_version: int = CONTRACT_VERSION

    @property
    def num_joints(self) -> int:
        """Policy joints (= action dimension)."""
        return len(self.joint_names)

    def array(self, name: str) -> np.ndarray:
        """A per-joint field (``default_joint_pos``, ``kp``, ``kd``, ``action_scale``) as float64."""
        return np.asarray(getattr(self, name), dtype=np.float64)

    def to_json(self) -> str:
        """The JSON stored under :data:`METADATA_KEY`."""
        data = asdict(self)
        data["observation"] = self.observation.to_dict()
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> PolicyMetadata:
        """Parse (and type-check, not validate) metadata JSON; raises :class:`ArtifactError`."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise CorruptArtifactError(METADATA_KEY, f"not valid JSON ({e})") from None
        if not isinstance(data, dict):
            raise CorruptArtifactError(METADATA_KEY, "expected a JSON object")
        version = data.get("contract_version")
        if version != CONTRACT_VERSION:
            raise ContractVersionError(
                "contract_version", f"got {version!r}, this code reads {CONTRACT_VERSION}")
        return _from_dict(data)


_PER_JOINT = ("default_joint_pos", "kp", "kd", "action_scale")


def _from_dict(data: dict[str, Any]) -> PolicyMetadata:
    known = {f.name for f in fields(PolicyMetadata)}
    unknown, missing = set(data) - known, {"name", "joint_names", *_PER_JOINT, "control_dt",
                                            "observation", "motion"} - set(data)
    if unknown:
        raise ContractMismatchError(METADATA_KEY, f"unknown keys {sorted(unknown)}")
    if missing:
        raise ContractMismatchError(METADATA_KEY, f"missing keys {sorted(missing)}")
    kw = dict(data)
    try:
        kw["joint_names"] = tuple(str(n) for n in data["joint_names"])
        for key in _PER_JOINT:
            kw[key] = tuple(float(v) for v in data[key])
        kw["control_dt"] = float(data["control_dt"])
        kw["action_clip"] = None if data.get("action_clip") is None else float(data["action_clip"])
    except (TypeError, ValueError) as e:
        raise ContractMismatchError(METADATA_KEY, f"wrong value type ({e})") from None
    for key, cls in (("motion", Motion), ("provenance", Provenance)):
        if key in data:
            try:
                kw[key] = cls(**data[key])
            except TypeError as e:
                raise ContractMismatchError(key, f"{e}") from None
    try:
        kw["observation"] = ObservationSpec.from_dict(data["observation"])
    except (KeyError, TypeError, ValueError) as e:
        raise ContractMismatchError("observation", f"malformed ({e})") from None
    return PolicyMetadata(**kw)


# ---------------------------------------------------------------------------------------------
# Validation


def validate_metadata(meta: PolicyMetadata) -> None:
    """Check the metadata against itself and the G1 joint table; raise :class:`ContractMismatchError`."""
    _check_joints(meta.joint_names)
    n = meta.num_joints
    for key in _PER_JOINT:
        values = meta.array(key)
        if values.shape != (n,):
            raise ContractMismatchError(key, f"expected {n} values (one per joint), got {values.size}")
        bad = [meta.joint_names[i] for i in np.flatnonzero(~np.isfinite(values))]
        if bad:
            raise ContractMismatchError(key, f"non-finite values for {bad}")
    _check_positive(meta, "kp", strict=True)
    _check_positive(meta, "kd", strict=False)
    _check_positive(meta, "action_scale", strict=True)
    _check_default_within_limits(meta)
    for key, value in (("control_dt", meta.control_dt), ("motion.length_s", meta.motion.length_s)):
        if not (math.isfinite(value) and value > 0):
            raise ContractMismatchError(key, f"expected a positive finite number, got {value}")
    if meta.action_clip is not None and not meta.action_clip > 0:
        raise ContractMismatchError("action_clip", f"expected > 0 or null, got {meta.action_clip}")
    _check_observation(meta.observation, n)


def _check_joints(names: Sequence[str]) -> None:
    if not names:
        raise ContractMismatchError("joint_names", "empty")
    unknown = [x for x in names if x not in g1.JOINT_BY_NAME]
    if unknown:
        raise ContractMismatchError(
            "joint_names", f"not G1 joints: {unknown}; expected names from asap_core.g1.MOTOR_ORDER")
    dups = sorted({x for x in names if list(names).count(x) > 1})
    if dups:
        raise ContractMismatchError("joint_names", f"duplicates: {dups}")


def _check_positive(meta: PolicyMetadata, key: str, strict: bool) -> None:
    values = meta.array(key)
    bad = values <= 0 if strict else values < 0
    if bad.any():
        names = [meta.joint_names[i] for i in np.flatnonzero(bad)]
        raise ContractMismatchError(key, f"expected {'> 0' if strict else '>= 0'} for every joint; "
                                         f"violated by {names}")


def _check_default_within_limits(meta: PolicyMetadata) -> None:
    q = meta.array("default_joint_pos")
    lo, hi = g1.joint_array("lower", meta.joint_names), g1.joint_array("upper", meta.joint_names)
    out = np.flatnonzero((q < lo) | (q > hi))
    if out.size:
        detail = [f"{meta.joint_names[i]}={q[i]:.4f} not in [{lo[i]}, {hi[i]}]" for i in out]
        raise ContractMismatchError("default_joint_pos", "outside the G1 joint limits: "
                                    + "; ".join(detail))


def _check_observation(spec: ObservationSpec, num_joints: int) -> None:
    if not spec.terms:
        raise ContractMismatchError("observation.terms", "empty")
    for i, t in enumerate(spec.terms):
        where = f"observation.terms[{i}] ({t.name})"
        try:
            expected = term_dim(t.name, num_joints)
        except KeyError as e:
            raise ContractMismatchError(where, str(e.args[0])) from None
        if t.dim != expected:
            raise ContractMismatchError(where, f"dim {t.dim}, expected {expected} "
                                               f"for a {num_joints}-joint policy")
        if t.history < 0 or not math.isfinite(t.scale):
            raise ContractMismatchError(where, f"needs history >= 0 and a finite scale, got "
                                               f"history={t.history} scale={t.scale}")
    if spec.clip is not None and not spec.clip > 0:
        raise ContractMismatchError("observation.clip", f"expected > 0 or null, got {spec.clip}")


def _io_shape(value_info: onnx.ValueInfoProto) -> list[int | str]:
    dims = value_info.type.tensor_type.shape.dim
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in dims]


def validate_graph(model: onnx.ModelProto, meta: PolicyMetadata) -> None:
    """Check the graph's input/output names, shapes and element types against the metadata."""
    inputs = {i.name: i for i in model.graph.input}
    initializers = {i.name for i in model.graph.initializer}
    real_inputs = [name for name in inputs if name not in initializers]
    outputs = {o.name: o for o in model.graph.output}
    for key, name, table, width in (
        ("onnx_input", meta.onnx_input, inputs, meta.observation.dim),
        ("onnx_output", meta.onnx_output, outputs, meta.num_joints),
    ):
        if name not in table:
            raise ContractMismatchError(key, f"graph has no {key[5:]} named {name!r}; it has "
                                             f"{list(real_inputs if table is inputs else outputs)}")
        info = table[name]
        if info.type.tensor_type.elem_type != onnx.TensorProto.FLOAT:
            raise ContractMismatchError(key, f"{name!r} must be float32")
        shape = _io_shape(info)
        if len(shape) != 2 or shape[1] != width or not (shape[0] == 1 or isinstance(shape[0], str)):
            what = "observation.dim" if table is inputs else "number of joints"
            raise ContractMismatchError(key, f"{name!r} has shape {shape}, expected [batch, {width}] "
                                             f"(batch 1 or symbolic; {width} = {what})")
    if len(real_inputs) != 1:
        raise ContractMismatchError("onnx_input", f"graph must have exactly one input, has {real_inputs}")


# ---------------------------------------------------------------------------------------------
# Reading and writing


@dataclass(frozen=True)
class PolicyArtifact:
    """A loaded, validated artifact."""

    path: Path
    sha256: str
    metadata: PolicyMetadata
    model_bytes: bytes = field(repr=False)
    """The serialized ONNX model (for an inference session)."""


def sha256_of(data: bytes) -> str:
    """Hex sha256 of bytes (the artifact's identity in logs and status)."""
    return hashlib.sha256(data).hexdigest()


def parse_artifact(data: bytes, path: Path | str = "<memory>") -> PolicyArtifact:
    """Parse and validate artifact bytes; raises an :class:`ArtifactError` subclass."""
    try:
        model = onnx.load_model_from_string(data)
    except Exception as e:  # protobuf raises its own DecodeError and friends
        raise CorruptArtifactError("file", f"not an ONNX model ({type(e).__name__}: {e})") from None
    if not model.graph.node:
        raise CorruptArtifactError("file", "not an ONNX model (no graph nodes)")
    props = {p.key: p.value for p in model.metadata_props}
    if METADATA_KEY not in props:
        raise CorruptArtifactError(METADATA_KEY, f"no {METADATA_KEY!r} metadata in the ONNX file; "
                                                 f"found keys {sorted(props)}")
    meta = PolicyMetadata.from_json(props[METADATA_KEY])
    validate_metadata(meta)
    validate_graph(model, meta)
    return PolicyArtifact(Path(path), sha256_of(data), meta, data)


def load_artifact(path: str | Path) -> PolicyArtifact:
    """Read and validate a policy artifact from disk."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise CorruptArtifactError("file", f"cannot read {path}: {e.strerror}") from None
    return parse_artifact(data, path)


def write_artifact(path: str | Path, model: onnx.ModelProto | bytes, meta: PolicyMetadata) -> str:
    """Validate ``meta`` against itself, the G1 table and ``model``; embed it; write; return sha256.

    Existing ``asap_policy`` metadata in ``model`` is replaced; other metadata keys are kept.
    """
    if isinstance(model, bytes | bytearray):
        model = onnx.load_model_from_string(bytes(model))
    validate_metadata(meta)
    validate_graph(model, meta)
    kept = [(p.key, p.value) for p in model.metadata_props if p.key != METADATA_KEY]
    del model.metadata_props[:]
    for key, value in (*kept, (METADATA_KEY, meta.to_json())):
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    data = model.SerializeToString()
    Path(path).write_bytes(data)
    return sha256_of(data)


def export_torch_policy(path: str | Path, module: Any, meta: PolicyMetadata, opset: int = 17) -> str:
    """Export a torch module (obs [batch, obs_dim] -> action [batch, n]) and write the artifact.

    Uses the TorchScript exporter (``dynamo=False``: no onnxscript, deterministic) with a symbolic
    batch axis; torch is imported here only, so asap_core does not depend on it.
    """
    import io
    import warnings

    import torch

    buf = io.BytesIO()
    example = torch.zeros(1, meta.observation.dim)
    names = (meta.onnx_input, meta.onnx_output)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the legacy exporter is intended
        torch.onnx.export(module.eval(), (example,), buf, input_names=[names[0]],
                          output_names=[names[1]], opset_version=opset, dynamo=False,
                          dynamic_axes={n: {0: "batch"} for n in names})
    return write_artifact(path, buf.getvalue(), meta)


def asap_g1_metadata(*, motion: Motion, name: str = "asap_tracking", **overrides: Any) -> PolicyMetadata:
    """Metadata of an ASAP tracking policy on the 23-DoF G1: ASAP's joints, pose, gains, scale 0.25,
    50 Hz, the 380-dim actor observation; ``overrides`` replace any field."""
    joints = g1.names("asap23")
    kp, kd = g1.gains(joints, "asap")
    meta = PolicyMetadata(
        name=name, joint_names=joints,
        default_joint_pos=tuple(g1.default_pose(joints, "asap").tolist()),
        kp=tuple(kp.tolist()), kd=tuple(kd.tolist()), action_scale=(0.25,) * len(joints),
        control_dt=0.02, observation=asap_actor_spec(len(joints)), motion=motion,
        onnx_input="actor_obs", onnx_output="action",
    )
    return replace(meta, **overrides)


def describe(artifact: PolicyArtifact) -> Mapping[str, Any]:
    """A short summary for logs and service replies."""
    m = artifact.metadata
    return {"name": m.name, "sha256": artifact.sha256[:12], "joints": m.num_joints,
            "obs_dim": m.observation.dim, "dt": m.control_dt, "motion": m.motion.name,
            "motion_s": m.motion.length_s}
