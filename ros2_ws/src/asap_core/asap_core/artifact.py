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

:func:`write_artifact` (training's exporter, tests) validates and writes; :func:`load_artifact` (deploy)
reads, validates against the G1 joint table and the graph's input/output shapes, and raises an
:class:`ArtifactError` subclass whose message names the field and what was expected.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from asap_core import g1
from asap_core import json_fields as jf
from asap_core.observation import (
    MAX_HISTORY,
    MAX_OBS_DIM,
    MAX_TERMS,
    ObservationSpec,
    asap_actor_spec,
    term_dim,
)

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
        """Parse and type-check (not validate) metadata JSON; raises :class:`ArtifactError`.

        Untrusted input: duplicate keys, a string where a number belongs (``"2.0"``), a bool for
        an int, an oversized array or string are refused, never coerced."""
        try:
            data = jf.loads(text, METADATA_KEY)
        except jf.FieldError as e:
            raise CorruptArtifactError(e.field, e.problem) from None
        if not isinstance(data, dict):
            raise CorruptArtifactError(METADATA_KEY, "expected a JSON object")
        version = data.get("contract_version")
        if isinstance(version, bool) or version != CONTRACT_VERSION:
            raise ContractVersionError(
                "contract_version", f"got {version!r}, this code reads {CONTRACT_VERSION}")
        try:
            return _from_dict(data)
        except jf.FieldError as e:
            raise ContractMismatchError(e.field, e.problem) from None


_PER_JOINT = ("default_joint_pos", "kp", "kd", "action_scale")
_REQUIRED = {"contract_version", "name", "joint_names", *_PER_JOINT, "control_dt", "observation", "motion"}
_OPTIONAL = {"action_clip", "onnx_input", "onnx_output", "provenance"}
MAX_TEXT = 256
"""Longest string field (names, provenance)."""
ANY = (-math.inf, math.inf)


def _from_dict(data: dict[str, Any]) -> PolicyMetadata:
    """Typed fields of the decoded JSON (ranges are :func:`validate_metadata`'s job)."""
    jf.obj(data, METADATA_KEY, _REQUIRED, _OPTIONAL)

    def numbers(key: str) -> tuple[float, ...]:
        return tuple(jf.number(x, f"{key}[{i}]", *ANY)
                     for i, x in enumerate(jf.array(data[key], key, max_len=g1.NUM_MOTORS)))

    joints = jf.array(data["joint_names"], "joint_names", max_len=g1.NUM_MOTORS)
    motion = jf.obj(data["motion"], "motion", {"name", "length_s"})
    provenance = jf.obj(data.get("provenance", {}), "provenance", set(),
                       {f.name for f in fields(Provenance)})
    clip = data.get("action_clip")
    per_joint: dict[str, Any] = {key: numbers(key) for key in _PER_JOINT}  # Any: mypy cannot pair ** keys
    return PolicyMetadata(
        name=jf.text(data["name"], "name", max_len=MAX_TEXT),
        joint_names=tuple(jf.text(x, f"joint_names[{i}]", max_len=64) for i, x in enumerate(joints)),
        **per_joint,
        control_dt=jf.number(data["control_dt"], "control_dt", *ANY),
        observation=ObservationSpec.from_dict(data["observation"]),
        motion=Motion(name=jf.text(motion["name"], "motion.name", max_len=MAX_TEXT),
                      length_s=jf.number(motion["length_s"], "motion.length_s", *ANY)),
        action_clip=None if clip is None else jf.number(clip, "action_clip", *ANY),
        onnx_input=jf.text(data.get("onnx_input", "obs"), "onnx_input", max_len=MAX_TEXT),
        onnx_output=jf.text(data.get("onnx_output", "action"), "onnx_output", max_len=MAX_TEXT),
        provenance=Provenance(**{k: jf.text(v, f"provenance.{k}", max_len=MAX_TEXT)
                                 for k, v in provenance.items()}),
    )


# ---------------------------------------------------------------------------------------------
# Validation


MAX_CONTROL_DT = 1.0
MAX_MOTION_S = 24 * 3600.0
MAX_ACTION_SCALE = 10.0
"""rad per action unit; real policies use 0.05-0.6."""
MAX_CLIP = 1e6


def validate_metadata(meta: PolicyMetadata) -> None:
    """Check the metadata against itself, the G1 joint table and the caps; raise
    :class:`ContractMismatchError` naming the field (and the joints) at fault."""
    try:
        for key in ("name", "onnx_input", "onnx_output", "motion.name"):
            jf.text(_dotted(meta, key), key, max_len=MAX_TEXT, allow_empty=False)
    except jf.FieldError as e:
        raise ContractMismatchError(e.field, e.problem) from None
    _check_joints(meta.joint_names)
    n = meta.num_joints
    for key in _PER_JOINT:
        values = meta.array(key)
        if values.shape != (n,):
            raise ContractMismatchError(key, f"expected {n} values (one per joint), got {values.size}")
        bad = [meta.joint_names[i] for i in np.flatnonzero(~np.isfinite(values))]
        if bad:
            raise ContractMismatchError(key, f"non-finite values for {bad}")
    kp_max, kd_max = g1.gain_ceilings(meta.joint_names)
    _check_range(meta, "kp", 0.0, kp_max, "the G1 gain ceiling (asap_core.g1.gain_ceilings)", strict=True)
    _check_range(meta, "kd", 0.0, kd_max, "the G1 gain ceiling (asap_core.g1.gain_ceilings)")
    _check_range(meta, "action_scale", 0.0, np.full(n, MAX_ACTION_SCALE), "MAX_ACTION_SCALE", strict=True)
    _check_default_within_limits(meta)
    for key, value, hi in (("control_dt", meta.control_dt, MAX_CONTROL_DT),
                           ("motion.length_s", meta.motion.length_s, MAX_MOTION_S)):
        if not (math.isfinite(value) and 0 < value <= hi):
            raise ContractMismatchError(key, f"expected a number in (0, {hi}], got {value}")
    if meta.action_clip is not None and not 0 < meta.action_clip <= MAX_CLIP:
        raise ContractMismatchError("action_clip", f"expected a number in (0, {MAX_CLIP}] or null, "
                                                   f"got {meta.action_clip}")
    _check_observation(meta.observation, n)


def _dotted(meta: PolicyMetadata, key: str) -> Any:
    value: Any = meta
    for part in key.split("."):
        value = getattr(value, part)
    return value


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


def _check_range(meta: PolicyMetadata, key: str, lo: float, hi: np.ndarray, hi_name: str,
                 strict: bool = False) -> None:
    values = meta.array(key)
    low = values <= lo if strict else values < lo
    for bad, what in ((low, f"expected {'>' if strict else '>='} {lo}"),
                      (values > hi, f"above {hi_name}")):
        if bad.any():
            detail = [f"{meta.joint_names[i]}={values[i]:g} (max {hi[i]:g})" for i in np.flatnonzero(bad)]
            raise ContractMismatchError(key, f"{what} for every joint; violated by {detail}")


def _check_default_within_limits(meta: PolicyMetadata) -> None:
    q = meta.array("default_joint_pos")
    lo, hi = g1.joint_array("lower", meta.joint_names), g1.joint_array("upper", meta.joint_names)
    out = np.flatnonzero((q < lo) | (q > hi))
    if out.size:
        detail = [f"{meta.joint_names[i]}={q[i]:.4f} not in [{lo[i]}, {hi[i]}]" for i in out]
        raise ContractMismatchError("default_joint_pos", "outside the G1 joint limits: "
                                    + "; ".join(detail))


def _check_observation(spec: ObservationSpec, num_joints: int) -> None:
    if not 0 < len(spec.terms) <= MAX_TERMS:
        raise ContractMismatchError("observation.terms",
                                    f"expected 1..{MAX_TERMS} terms, got {len(spec.terms)}")
    for i, t in enumerate(spec.terms):
        where = f"observation.terms[{i}] ({t.name})"
        try:
            expected = term_dim(t.name, num_joints)
        except KeyError as e:
            raise ContractMismatchError(where, str(e.args[0])) from None
        if t.dim != expected:
            raise ContractMismatchError(where, f"dim {t.dim}, expected {expected} "
                                               f"for a {num_joints}-joint policy")
        if not 0 <= t.history <= MAX_HISTORY or not math.isfinite(t.scale):
            raise ContractMismatchError(where, f"needs history in [0, {MAX_HISTORY}] and a finite scale, "
                                               f"got history={t.history} scale={t.scale}")
    if spec.dim > MAX_OBS_DIM:
        raise ContractMismatchError("observation", f"{spec.dim} values per tick (history included), "
                                                   f"more than MAX_OBS_DIM {MAX_OBS_DIM}")
    if spec.clip is not None and not 0 < spec.clip <= MAX_CLIP:
        raise ContractMismatchError("observation.clip", f"expected (0, {MAX_CLIP}] or null, got {spec.clip}")


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


DEFAULT_MAX_BYTES = 64 * 2**20
"""Largest artifact file read (ASAP's 380-512-256-128-23 MLP is ~1.2 MB)."""


@dataclass(frozen=True, kw_only=True)
class SourceRules:
    """Where a deployed artifact may come from (the policy node's ``policy_*`` parameters)."""

    max_bytes: int = DEFAULT_MAX_BYTES
    policy_dir: str = ""
    """If set, the file's real path (symlinks resolved) must lie inside this folder's."""
    allowed_sha256: frozenset[str] = frozenset()
    """If non-empty, the file's sha256 must be one of these (lowercase hex)."""


class SourceRefusedError(ArtifactError):
    """A file the source rules refuse: not a regular file, too large, outside ``policy_dir``,
    or a sha256 outside the allow-list."""


def read_artifact_bytes(path: str | Path, rules: SourceRules = SourceRules()) -> bytes:
    """The bytes of a regular file that the rules allow; never blocks on a FIFO or reads a device."""
    real = os.path.realpath(path)
    if rules.policy_dir:
        root = os.path.realpath(rules.policy_dir)
        if os.path.commonpath([real, root]) != root:
            raise SourceRefusedError("file", f"{path} (real path {real}) is outside policy_dir {root}")
    try:  # O_NONBLOCK: opening a FIFO returns at once, and fstat then refuses it
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        raise CorruptArtifactError("file", f"cannot read {path}: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SourceRefusedError("file", f"{path} is not a regular file (a device, FIFO, socket "
                                             "or folder); expected an .onnx file")
        if st.st_size > rules.max_bytes:
            raise SourceRefusedError("file", f"{path} is larger than {rules.max_bytes} bytes (policy_max_mb)")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(rules.max_bytes + 1)
    finally:
        os.close(fd)
    if len(data) > rules.max_bytes:  # it grew after the check
        raise SourceRefusedError("file", f"{path} is larger than {rules.max_bytes} bytes (policy_max_mb)")
    digest = sha256_of(data) if rules.allowed_sha256 else ""
    if digest and digest not in rules.allowed_sha256:
        raise SourceRefusedError("sha256", f"{digest} of {path} is not in the allow-list "
                                           "(policy_sha256_allowlist)")
    return data


def load_artifact(path: str | Path, rules: SourceRules = SourceRules()) -> PolicyArtifact:
    """Read (under ``rules``) and validate a policy artifact from disk."""
    return parse_artifact(read_artifact_bytes(path, rules), path)


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
