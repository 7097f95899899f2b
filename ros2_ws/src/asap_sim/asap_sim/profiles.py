"""Dynamics profiles: the reality gap between the G1 that training assumes and the simulated twin.

A profile is a YAML file of the keys in :data:`KEYS` (every key optional). Per-joint keys take a
number (every joint) or a mapping ``{regex: number}`` matched with ``re.fullmatch`` against the
joint names of :data:`asap_core.g1.MOTOR_ORDER`; later patterns override earlier ones, so write
the general pattern first (a pattern that a later, more general one overrides with another value is
refused: a YAML dump that sorts keys puts ``.*`` last). ``link_mass_scale`` maps body-name patterns
the same way; bodies are resolved by the model builder (:func:`asap_sim.model.build_model`), which
knows the body names.

``nominal.yaml`` is what training assumes; the other shipped files name one gap each. Unknown
keys, patterns that match nothing and out-of-range values raise :class:`ProfileError` naming the
key and the allowed range.

``random:<seed>`` names a gap nobody wrote down: :func:`random_profile` draws every effect from the
ranges of :class:`RandomGapCfg` with that seed (the same profile for the same seed, on any machine),
so a method can be scored on gaps it was not tuned on.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from asap_core import g1

PROFILE_DIR = Path(__file__).resolve().parent / "profiles"
"""Where the shipped profiles live (``<name>.yaml``)."""


class ProfileError(ValueError):
    """A dynamics profile that cannot be loaded (unknown key, bad value, no such profile)."""


class _ProfileLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing duplicate keys (YAML requires unique keys; PyYAML keeps the last,
    so a profile that says ``kp_scale`` twice would silently use the second)."""


def _unique_mapping(loader: _ProfileLoader, node: yaml.MappingNode) -> dict:
    first: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        line = key_node.start_mark.line + 1
        try:
            if key in first:
                raise ProfileError(f"key {key!r} appears twice (lines {first[key]} and {line}); keep one")
        except TypeError:  # an unhashable key: construct_mapping names it below
            continue
        first[key] = line
    return loader.construct_mapping(node)


_ProfileLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)


@dataclass(frozen=True)
class _Key:
    kind: str
    """``joints`` (per joint), ``bodies`` (per body pattern), ``number``, ``vec3``, ``int``, ``str``."""
    lo: float
    hi: float
    default: Any
    doc: str


KEYS: Mapping[str, _Key] = {
    "description": _Key("str", 0, 0, "", "free text: what gap this profile models"),
    "seed": _Key("int", 0, 2**32 - 1, 0, "seed of the sensor-noise generator"),
    "kp_scale": _Key("joints", 0.0, 5.0, 1.0, "multiplies the commanded kp (x)"),
    "kd_scale": _Key("joints", 0.0, 5.0, 1.0, "multiplies the commanded kd (x)"),
    "torque_scale": _Key("joints", 0.0, 2.0, 1.0,
                         "motor strength: multiplies the clipped motor torque (x)"),
    "joint_friction": _Key("joints", 0.0, 5.0, 0.0, "dry joint friction, MuJoCo frictionloss (N m)"),
    "joint_damping": _Key("joints", 0.0, 10.0, 0.0, "viscous joint damping (N m s/rad)"),
    "armature": _Key("joints", 0.0, 0.5, None,
                     "reflected rotor inertia (kg m^2); default asap_core.g1.ARMATURE of the actuator"),
    "link_mass_scale": _Key("bodies", 0.1, 5.0, 1.0,
                            "multiplies a body's mass and inertia (x); keys are body-name regexes"),
    "base_com_offset": _Key("vec3", -0.2, 0.2, (0.0, 0.0, 0.0),
                            "shift of the pelvis centre of mass [x, y, z] in the pelvis frame (m)"),
    "ground_friction": _Key("number", 0.05, 3.0, 1.0, "sliding friction coefficient of the floor"),
    "actuation_latency_ms": _Key("number", 0.0, 200.0, 0.0,
                                 "delay between a command and the motors acting on it (ms)"),
    "gyro_noise_std": _Key("number", 0.0, 2.0, 0.0, "white noise on the IMU gyroscope (rad/s)"),
    "accelerometer_noise_std": _Key("number", 0.0, 5.0, 0.0,
                                    "white noise on the IMU accelerometer (m/s^2)"),
    "joint_pos_noise_std": _Key("number", 0.0, 0.2, 0.0, "white noise on reported q (rad)"),
    "joint_vel_noise_std": _Key("number", 0.0, 5.0, 0.0, "white noise on reported dq (rad/s)"),
}
"""Every profile key: kind, allowed range [lo, hi], default and meaning (units in brackets)."""


def _frozen(values: np.ndarray) -> np.ndarray:
    values.flags.writeable = False
    return values


@dataclass(frozen=True, eq=False, kw_only=True)
class DynamicsProfile:
    """A resolved profile. Per-joint arrays are float64, shape (29,), in ``g1.MOTOR_ORDER``."""

    name: str
    description: str = ""
    seed: int = 0
    kp_scale: np.ndarray
    kd_scale: np.ndarray
    torque_scale: np.ndarray
    joint_friction: np.ndarray
    """N m."""
    joint_damping: np.ndarray
    """N m s/rad."""
    armature: np.ndarray
    """kg m^2."""
    link_mass_scale: tuple[tuple[str, float], ...] = ()
    """(body-name regex, scale) pairs, later pairs override earlier ones."""
    base_com_offset: tuple[float, float, float] = (0.0, 0.0, 0.0)
    """m, pelvis frame."""
    ground_friction: float = 1.0
    actuation_latency_ms: float = 0.0
    gyro_noise_std: float = 0.0
    """rad/s."""
    accelerometer_noise_std: float = 0.0
    """m/s^2."""
    joint_pos_noise_std: float = 0.0
    """rad."""
    joint_vel_noise_std: float = 0.0
    """rad/s."""
    source: str = field(default="", compare=False)
    """The file it came from (empty when built from a dict)."""


def shipped_profiles() -> tuple[str, ...]:
    """Names of the profiles that ship with asap_sim."""
    return tuple(sorted(p.stem for p in PROFILE_DIR.glob("*.yaml")))


def load_profile(name_or_path: str | Path) -> DynamicsProfile:
    """Load a shipped profile by name (``"weak_ankles"``) or any YAML file by path."""
    if str(name_or_path).startswith(RANDOM_PREFIX):
        return random_profile(_random_seed(str(name_or_path)))
    path = Path(name_or_path)
    if not path.suffix:
        path = PROFILE_DIR / f"{name_or_path}.yaml"
        if not path.is_file():
            raise ProfileError(f"no shipped dynamics profile {str(name_or_path)!r}; shipped: "
                               f"{list(shipped_profiles())}, random:<seed>, or a path to a .yaml file")
    if not path.is_file():
        raise ProfileError(f"dynamics profile file {str(path)!r} does not exist")
    try:
        data = yaml.load(path.read_text(), Loader=_ProfileLoader) or {}  # a SafeLoader, stricter
    except ProfileError as err:
        raise ProfileError(f"{path}: {err}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as err:  # e.g. !!python/object: no constructor, refused
        raise ProfileError(f"{path}: not a plain YAML mapping of profile keys ({err})") from None
    if not isinstance(data, dict):
        raise ProfileError(f"{path}: a dynamics profile must be a YAML mapping of keys {list(KEYS)}")
    try:
        return profile_from_dict(data, name=path.stem, source=str(path))
    except ProfileError as err:
        raise ProfileError(f"{path}: {err}") from None


def nominal_profile() -> DynamicsProfile:
    """The profile training assumes (``nominal.yaml``)."""
    return load_profile("nominal")


def profile_from_dict(data: Mapping[str, Any], *, name: str, source: str = "") -> DynamicsProfile:
    """Validate a mapping of profile keys and resolve it (see :data:`KEYS`)."""
    unknown = sorted(set(data) - set(KEYS))
    if unknown:
        raise ProfileError(f"unknown dynamics profile key(s) {unknown}; allowed keys: {list(KEYS)}")
    resolved = {key: _resolve(key, spec, data.get(key, spec.default)) for key, spec in KEYS.items()}
    return DynamicsProfile(name=name, source=source, **resolved)


def _resolve(key: str, spec: _Key, value: Any) -> Any:
    if spec.kind == "str":
        if not isinstance(value, str):
            raise ProfileError(f"{key} must be a string, got {value!r}")
        return value
    if spec.kind == "int":
        if not isinstance(value, int) or isinstance(value, bool) or not spec.lo <= value <= spec.hi:
            raise ProfileError(f"{key} = {value!r} must be an integer in [{spec.lo}, {spec.hi}]")
        return value
    if spec.kind == "number":
        return _number(key, spec, value)
    if spec.kind == "vec3":
        if not isinstance(value, list | tuple) or len(value) != 3:
            raise ProfileError(f"{key} must be a list [x, y, z], got {value!r}")
        return tuple(_number(f"{key}[{i}]", spec, v) for i, v in enumerate(value))
    if spec.kind == "joints":
        return _frozen(_per_joint(key, spec, value))
    return tuple((pattern, _number(f"{key}[{pattern!r}]", spec, v))
                 for pattern, v in _patterns(key, value, default_pattern=".*"))


def _number(key: str, spec: _Key, value: Any) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise ProfileError(f"{key} must be a number in [{spec.lo}, {spec.hi}], got {value!r}")
    if not spec.lo <= value <= spec.hi:
        raise ProfileError(f"{key} = {value} is outside the allowed range [{spec.lo}, {spec.hi}]")
    return float(value)


def _patterns(key: str, value: Any, default_pattern: str) -> list[tuple[str, Any]]:
    """A scalar means ``{default_pattern: scalar}``; a mapping is checked for valid regexes."""
    if not isinstance(value, Mapping):
        return [(default_pattern, value)]
    for pattern in value:
        try:
            re.compile(str(pattern))
        except re.error as err:
            raise ProfileError(f"{key}: {pattern!r} is not a valid regular expression ({err})") from None
    return [(str(p), v) for p, v in value.items()]


def _joint_defaults(spec: _Key) -> np.ndarray:
    if spec.default is None:  # armature: each actuator's own rotor inertia
        return np.array([g1.ARMATURE[j.actuator] for j in g1.JOINTS])
    return np.full(g1.NUM_MOTORS, float(spec.default))


def _per_joint(key: str, spec: _Key, value: Any) -> np.ndarray:
    if value is None:
        return _joint_defaults(spec)
    assignments = []
    for pattern, v in _patterns(key, value, default_pattern=".*"):
        hits = match_names(pattern, g1.MOTOR_ORDER)
        if not hits:
            raise ProfileError(f"{key}: pattern {pattern!r} matches no G1 joint; joints: "
                               f"{list(g1.MOTOR_ORDER)}")
        assignments.append((pattern, hits, _number(f"{key}[{pattern!r}]", spec, v)))
    return assign_patterns(key, _joint_defaults(spec), assignments)


def assign_patterns(key: str, out: np.ndarray, assignments: list[tuple[str, list[int], float]]) -> np.ndarray:
    """Write each ``(pattern, indices, value)`` into ``out`` in order (later patterns win).

    A pattern that a later, more general one overrides with another value sets nothing: the general
    pattern written after the specific ones (as a YAML dump that sorts keys leaves them) is refused with
    :class:`ProfileError`; specific patterns that together replace an earlier general one are an override
    (SysID's identified values) and stay allowed.
    """
    setter = np.full(len(out), -1)
    for i, (_, hits, v) in enumerate(assignments):
        out[hits], setter[hits] = v, i
    for i, (pattern, hits, v) in enumerate(assignments):
        wider = [p for p, h, _ in assignments[i + 1 :] if set(hits) < set(h)]
        if wider and not np.any(setter[hits] == i) and np.any(out[hits] != v):
            raise ProfileError(f"{key}: pattern {pattern!r} sets nothing, the later, more general {wider} "
                               f"override it; later patterns win, so write the general one first "
                               f"(yaml.safe_dump sorts keys unless given sort_keys=False)")  # fmt: skip
    return out


def match_names(pattern: str, names: tuple[str, ...] | list[str]) -> list[int]:
    """Indices of ``names`` that ``pattern`` matches entirely (``re.fullmatch``)."""
    regex = re.compile(pattern)
    return [i for i, n in enumerate(names) if regex.fullmatch(n)]


RANDOM_PREFIX = "random:"
"""``random:<seed>``: a profile drawn by :func:`random_profile`."""


@dataclass(frozen=True)
class RandomGapCfg:
    """Ranges a random reality gap is drawn from, uniformly. Every range stays inside :data:`KEYS`.

    Per-joint effects land on a random subset of the 29 motors (each joint independently, with
    ``joint_share``), each with its own value: weak, sticky or asymmetric joints nobody named. The
    ranges span what a G1 is known to differ by: motors down to ~half strength (ASAP's ankle gap),
    friction and damping of worn joints, heavier rotors, a payload, ASAP's 20-40 ms delay band cut
    to one control tick and a half, floor and sensor differences."""

    joint_share: float = 0.3
    """Chance that each joint gets each per-joint effect."""
    torque_scale: tuple[float, float] = (0.5, 0.9)
    joint_friction: tuple[float, float] = (0.1, 0.8)
    """N m."""
    joint_damping: tuple[float, float] = (0.2, 2.0)
    """N m s/rad."""
    armature_scale: tuple[float, float] = (1.0, 2.0)
    """Multiplies each joint's actuator armature (``asap_core.g1.ARMATURE``)."""
    torso_mass_scale: tuple[float, float] = (0.85, 1.3)
    com_offset: float = 0.03
    """Largest pelvis CoM shift along x and y (m)."""
    actuation_latency_ms: tuple[float, float] = (0.0, 30.0)
    ground_friction: tuple[float, float] = (0.5, 1.2)
    gyro_noise_std: tuple[float, float] = (0.0, 0.05)
    accelerometer_noise_std: tuple[float, float] = (0.0, 0.1)
    joint_pos_noise_std: tuple[float, float] = (0.0, 0.003)
    joint_vel_noise_std: tuple[float, float] = (0.0, 0.1)


def random_profile_dict(seed: int, cfg: RandomGapCfg = RandomGapCfg()) -> dict[str, Any]:
    """The profile keys of gap ``seed``: a plain mapping, the same for the same seed and ``cfg``
    (write it as YAML to keep or edit it)."""
    rng = np.random.default_rng(seed)

    def uniform(bounds: tuple[float, float], digits: int = 3) -> float:
        return round(float(rng.uniform(*bounds)), digits)

    def some_joints(bounds: tuple[float, float], scale: Mapping[str, float] | None = None) -> dict:
        hit = [j for j in g1.MOTOR_ORDER if rng.random() < cfg.joint_share]
        return {j: round(uniform(bounds, 4) * (scale[j] if scale else 1.0), 6) for j in hit}

    def shift() -> float:
        return uniform((-cfg.com_offset, cfg.com_offset))

    armature = {j.name: g1.ARMATURE[j.actuator] for j in g1.JOINTS}
    data: dict[str, Any] = {
        "torque_scale": some_joints(cfg.torque_scale),
        "joint_friction": some_joints(cfg.joint_friction),
        "joint_damping": some_joints(cfg.joint_damping),
        "armature": some_joints(cfg.armature_scale, armature),
        "link_mass_scale": {"torso_link": uniform(cfg.torso_mass_scale)},
        "base_com_offset": [shift(), shift(), 0.0],
        "actuation_latency_ms": uniform(cfg.actuation_latency_ms, 1),
        "ground_friction": uniform(cfg.ground_friction),
        "gyro_noise_std": uniform(cfg.gyro_noise_std, 4),
        "accelerometer_noise_std": uniform(cfg.accelerometer_noise_std, 4),
        "joint_pos_noise_std": uniform(cfg.joint_pos_noise_std, 5),
        "joint_vel_noise_std": uniform(cfg.joint_vel_noise_std, 4),
        "seed": seed,
    }
    weak = ", ".join(f"{j.removesuffix('_joint')} {v:.0%}" for j, v in data["torque_scale"].items())
    data["description"] = (
        f"random gap {seed}: weak motors [{weak or 'none'}], friction on {len(data['joint_friction'])}, "
        f"damping on {len(data['joint_damping'])}, heavier rotors on {len(data['armature'])} joints, "
        f"latency {data['actuation_latency_ms']} ms, torso mass x{data['link_mass_scale']['torso_link']}"
    )
    return data


def random_profile(seed: int, cfg: RandomGapCfg = RandomGapCfg()) -> DynamicsProfile:
    """Gap ``seed`` drawn from ``cfg``'s ranges, resolved (named ``random:<seed>``)."""
    return profile_from_dict(random_profile_dict(seed, cfg), name=f"{RANDOM_PREFIX}{seed}")


def _random_seed(name: str) -> int:
    text = name.removeprefix(RANDOM_PREFIX)
    if not text.isdigit() or int(text) > KEYS["seed"].hi:
        raise ProfileError(f"{name!r}: a random gap is named random:<seed>, with the seed an integer in "
                           f"[0, {int(KEYS['seed'].hi)}], e.g. random:7")
    return int(text)
