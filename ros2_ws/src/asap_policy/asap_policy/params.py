"""The policy node's parameters, declared once: name, default, type, range, description.

ROS-free on purpose: the node declares every entry of :data:`PARAMS` with a descriptor built from
it, and a plain test validates the shipped ``config/policy_node.yaml`` against the same table.
All are read-only: safety-relevant values do not change under a running robot (hot swap goes
through ``LoadPolicy``, not a parameter).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from asap_core import g1, variants
from asap_core.artifact import SourceRules
from asap_core.control import ControlCfg
from asap_core.safety import SafetyCfg
from asap_policy.control_loop import LoopCfg
from asap_policy.loader import LoaderCfg

Value = bool | int | float | str


@dataclass(frozen=True)
class Param:
    """One declared parameter."""

    name: str
    default: Value
    description: str
    bounds: tuple[float, float] | None = None
    """Inclusive numeric range."""
    choices: tuple[str, ...] | None = None


_GAIN_SETS = ("policy", *sorted(g1.GAINS))

PARAMS: tuple[Param, ...] = (
    Param("policy_path", "", "Policy artifact (.onnx) to load at start; empty: start without one "
          "and wait for LoadPolicy."),
    Param("policy_dir", "", "If set, LoadPolicy (and policy_path) only reads files whose real path "
          "(symlinks resolved) lies inside this folder; empty: any path."),
    Param("policy_sha256_allowlist", "", "If set, only artifacts whose sha256 is in this list "
          "(64-hex digests separated by spaces or commas) are loaded; empty: any."),
    Param("policy_max_mb", 64.0, "Largest artifact file read (MiB).", (0.1, 1024.0)),
    Param("load_timeout_s", 10.0, "LoadPolicy refuses a load (read, validate, warm up, dry run) that "
          "takes longer; loads run one at a time.", (0.5, 300.0)),
    Param("control_rate_hz", 50.0, "Tick rate when no policy is loaded; a policy's control_dt "
          "must equal 1/rate.", (1.0, 1000.0)),
    Param("ramp_s", 3.0, "RAMP duration from the measured pose to the default pose (s).", (0.1, 60.0)),
    Param("start_blend_ticks", 0, "Ticks blending the HOLD target into the policy at POLICY start.",
          (0, 500)),
    Param("swap_blend_ticks", 10, "Ticks blending the old policy's target into a hot-swapped one.",
          (0, 500)),
    Param("policy_start_tolerance_rad", 0.5, "POLICY starts only if every policy joint is within "
          "this of the policy's default pose (rad).", (0.0, 3.2)),
    Param("hold_gains", "policy", "Gains in RAMP/HOLD: the artifact's kp/kd or a G1 gain set.",
          choices=_GAIN_SETS),
    Param("passive_gains", "asap", "G1 gain set for joints the policy does not drive.",
          choices=tuple(sorted(g1.GAINS))),
    Param("passive_pose", "asap", "G1 default pose for joints the policy does not drive.",
          choices=tuple(sorted(g1.DEFAULT_POSES))),
    Param("damping_kd", 8.0, "DAMPING: kp = 0 and this kd on every motor (N m s/rad).", (0.0, 30.0)),
    Param("action_noise_std", 0.0, "Excitation for stage-2 data: white noise added to every policy "
          "action (normalized units; 0.2 = 0.05 rad of target at scale 0.25), applied, recorded, fed "
          "back. 0 to evaluate or deploy; on hardware start small, in the gantry.", (0.0, 1.0)),
    Param("action_noise_seed", -1, "Seed of the excitation noise; -1: a fresh one.", (-1, 2**31 - 1)),
    Param("stale_warn_ms", 10.0, "LowState older than this is reported (ms).", (0.1, 1000.0)),
    Param("stale_damp_ms", 50.0, "LowState older than this trips DAMPING in an active mode (ms).",
          (1.0, 5000.0)),
    Param("velocity_limit_factor", 1.5, "Trip DAMPING when |dq| exceeds this times the rated joint "
          "velocity.", (0.5, 5.0)),
    Param("max_tilt_rad", 1.0, "Trip DAMPING when the pelvis tilts more than this (rad).", (0.05, 3.2)),
    Param("position_margin_rad", 0.0, "Targets stay this far inside the joint limits (rad).",
          (0.0, 0.5)),
    Param("writer_rate_hz", 500.0, "Command writer rate: repeats the latest safe command between "
          "ticks; 0 = publish on ticks only.", (0.0, 1000.0)),
    Param("stall_timeout_ms", 100.0, "The writer switches to DAMPING when no tick completed for "
          "this long (ms).", (5.0, 10000.0)),
    Param("check_lowstate_crc", True, "Drop LowState samples whose CRC does not match."),
    Param("sim_mode_machine", -1, "Simulators only: accept this LowState mode_machine as a 29-DoF G1 "
          "(Unitree's unitree_mujoco reports 0; commands still echo it); -1 = off. A value a real G1 "
          "reports is refused, and so is any value with release_motion_switcher (the robot profile).",
          (-1, 255)),
    Param("inference_threads", 1, "ONNX Runtime intra-op threads.", (1, 16)),
    Param("release_motion_switcher", False, "Real robot: release Unitree's built-in controller via "
          "/api/motion_switcher before the first command (off for the twin)."),
    Param("motion_switcher_attempts", 5, "Release attempts before giving up.", (1, 50)),
    Param("motion_switcher_timeout_s", 2.0, "Wait per RPC reply and between attempts (s).", (0.1, 30.0)),
    Param("status_rate_hz", 5.0, "PolicyStatus rate (also published on every mode change).",
          (0.1, 100.0)),
    Param("diagnostics_rate_hz", 1.0, "/diagnostics rate.", (0.1, 50.0)),
)
PARAMS_BY_NAME: Mapping[str, Param] = {p.name: p for p in PARAMS}


Validated = Mapping[str, Any]
"""Parameter values after :func:`validate`: every name of :data:`PARAMS`, each of its default's type (Any: the
type differs by name, checked at run time)."""


def validate(values: Mapping[str, Any]) -> Validated:
    """Defaults overlaid with ``values``, checked; raises ValueError listing every problem."""
    problems = [f"unknown parameter {k!r}" for k in values if k not in PARAMS_BY_NAME and k != "use_sim_time"]
    out: dict[str, Value] = {}
    for p in PARAMS:
        v = values.get(p.name, p.default)
        kind = type(p.default)
        if kind is float and isinstance(v, int) and not isinstance(v, bool):
            v = float(v)
        if type(v) is not kind:
            problems.append(f"{p.name}: expected {kind.__name__}, got {v!r}")
            continue
        if p.bounds and isinstance(v, int | float) and not p.bounds[0] <= v <= p.bounds[1]:
            problems.append(f"{p.name}: {v} outside [{p.bounds[0]}, {p.bounds[1]}]")
        if p.choices and v not in p.choices:
            problems.append(f"{p.name}: {v!r} not one of {list(p.choices)}")
        out[p.name] = v
    try:
        allowlist(str(out.get("policy_sha256_allowlist", "")))
    except ValueError as e:
        problems.append(str(e))
    problems += _sim_only_problems(out)
    if problems:
        raise ValueError("invalid policy_node parameters: " + "; ".join(problems))
    return out


def allowlist(text: str) -> frozenset[str]:
    """The sha256 digests of ``policy_sha256_allowlist``; raises ValueError on a malformed entry."""
    digests = frozenset(d.lower() for d in re.split(r"[\s,]+", text.strip()) if d)
    bad = sorted(d for d in digests if not re.fullmatch(r"[0-9a-f]{64}", d))
    if bad:
        raise ValueError(f"policy_sha256_allowlist: {bad} are not sha256 hex digests (64 hex characters)")
    return digests


def loader_cfg(v: Validated, control_dt: float) -> LoaderCfg:
    """The hot-swap loader configuration of validated parameters."""
    rules = SourceRules(max_bytes=round(v["policy_max_mb"] * 2**20), policy_dir=v["policy_dir"],
                        allowed_sha256=allowlist(v["policy_sha256_allowlist"]))
    return LoaderCfg(control_dt=control_dt, rules=rules, timeout_s=v["load_timeout_s"],
                     inference_threads=v["inference_threads"])


def loop_cfg(v: Validated, sim_time: bool) -> LoopCfg:
    """The control loop configuration of validated parameters (``sim_time``: ``use_sim_time``)."""
    return LoopCfg(writer_rate_hz=v["writer_rate_hz"], stall_timeout_ms=v["stall_timeout_ms"],
                   check_lowstate_crc=v["check_lowstate_crc"], sim_time=sim_time,
                   wait_for_release=v["release_motion_switcher"])


def _sim_only_problems(v: Mapping[str, Value]) -> list[str]:
    """A simulator override must not be able to make a real G1 pass a check it fails."""
    sim = v.get("sim_mode_machine", -1)
    if not isinstance(sim, int) or sim < 0:
        return []
    if v.get("release_motion_switcher"):
        return ["sim_mode_machine is for simulators: the robot profile (release_motion_switcher: true) "
                "must see the G1's own mode_machine; set sim_mode_machine: -1"]
    if sim in variants.VARIANTS:
        return [f"sim_mode_machine {sim} is a real G1 ({variants.variant(sim).name}); it can only name a "
                "value no G1 reports (unitree_mujoco: 0)"]
    return []


def control_cfg(v: Validated, control_dt: float) -> ControlCfg:
    """The controller configuration of validated parameters."""
    return ControlCfg(
        control_dt=control_dt, ramp_s=v["ramp_s"], start_blend_ticks=v["start_blend_ticks"],
        swap_blend_ticks=v["swap_blend_ticks"], policy_start_tolerance_rad=v["policy_start_tolerance_rad"],
        hold_gains=v["hold_gains"], passive_gains=v["passive_gains"], passive_pose=v["passive_pose"],
        damping_kd=v["damping_kd"], action_noise_std=v["action_noise_std"],
        action_noise_seed=None if v["action_noise_seed"] < 0 else v["action_noise_seed"],
        sim_mode_machine=None if v["sim_mode_machine"] < 0 else v["sim_mode_machine"],
        safety=SafetyCfg(stale_warn_s=v["stale_warn_ms"] / 1e3, stale_damp_s=v["stale_damp_ms"] / 1e3,
                         velocity_limit_factor=v["velocity_limit_factor"], max_tilt_rad=v["max_tilt_rad"],
                         position_margin_rad=v["position_margin_rad"]),
    )
