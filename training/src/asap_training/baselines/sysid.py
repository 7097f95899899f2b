"""``asap-sysid``: the SysID baseline — simulator parameters that best replay a dataset open-loop (§4.7).

ASAP's SysID baseline searches the base (pelvis) centre-of-mass shift c_x, c_y, c_z, the base mass ratio
and per-joint kp/kd ratios over the values of the paper's Table VII ({-0.02, 0, 0.02} m, {0.95, 1, 1.05})
for the parameters whose open-loop replay of the recorded trajectories is closest to them, then fine-tunes
the policy in the identified simulator. Here:

- **Parameters.** The Table VII set, with the joint gains grouped so the search stays tractable:
  ``family`` (default) ties left and right of each joint family (hip pitch, knee, ankle roll, waist yaw,
  elbow, ...: 13 families of the 23 policy joints, 26 gain ratios instead of 46, since a left/right
  asymmetry of the drives is rarely what separates two simulators); ``limb`` uses legs / waist / arms;
  ``joint`` is the paper's per-joint set. ``extended`` adds a motor-strength ratio (``torque_scale``) per
  group, which the paper's set lacks: it cannot represent weak motors (the ``weak_ankles`` twin), only
  emulate them with softer gains, which differ once the torque saturates.
- **Objective.** The open-loop replay error of :func:`~asap_training.eval.openloop.open_loop_errors`
  (E_g-mpjpe by default, mean over the 0.25/0.5/1.0 s horizons) of a simulator built with the candidate
  as an asap_sim dynamics profile (a YAML file, so the search evaluates exactly what fine-tuning loads).
- **Search.** Deterministic pattern search instead of the grid (3^50 points for the paper's set):
  *screening* evaluates every parameter's Table VII neighbours of the nominal simulator (nominal ± one
  step, the grid's values one parameter at a time); *coordinate descent* then visits the parameters in
  order of how much their screening step lowered the error, keeps moving while the error falls (doubling
  the step, so values beyond the grid are reachable), and *refines* by halving every step when a whole
  sweep finds nothing better, down to 1/8 of Table VII's steps or until ``max_evaluations`` replays are
  spent. Evaluations are cached; the result depends only on the dataset and the config. Screening first
  matters: in plain parameter order the base CoM, searched first, soaks up gaps it does not cause (a 10 %
  softer leg drive was "identified" as a 10 cm CoM shift).
- **Limitations.** Few recordings are easily over-fitted by 30 parameters (bounds act as the prior);
  check the identified simulator on held-out recordings. Gaps outside the set (motor strength without
  ``extended``, joint friction, latency) are only emulated.

The result is a valid asap_sim profile (``load_profile(path)``; ``asap-finetune --profile path``) and a JSON
record of the search::

    asap-sysid --dataset runs/demo/dataset.npz --out runs/demo/identified.yaml --max-evals 150
    asap-finetune --parent training/policies/arm_swing --profile runs/demo/identified.yaml --run-dir ...
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TypeGuard

import numpy as np
import yaml
from tqdm import tqdm

from asap_core import g1
from asap_sim.model import BASE_BODY
from asap_sim.profiles import load_profile, match_names
from asap_training.data.dataset import RealDataset
from asap_training.eval.metrics import ERROR_METRICS
from asap_training.eval.openloop import HORIZONS_S, open_loop_errors

GROUPINGS = ("family", "limb", "joint")
LIMBS = {
    "legs": r"(left|right)_(hip|knee|ankle)_.*",
    "waist": r"waist_.*",
    "arms": r"(left|right)_(shoulder|elbow|wrist)_.*",
}
"""``limb`` grouping: joint regexes (over ``g1.MOTOR_ORDER``) per limb."""


@dataclass(frozen=True)
class Param:
    """One identified quantity and where it goes in a dynamics profile."""

    name: str
    """e.g. ``kp/knee``, ``com_x``, ``base_mass``."""
    key: str
    """Profile key: ``kp_scale``, ``kd_scale``, ``torque_scale``, ``base_com_offset``, ``link_mass_scale``."""
    target: str
    """Joint regex (per-joint keys), axis ``x``/``y``/``z`` (CoM) or body name (mass)."""
    nominal: float
    step: float
    """Table VII step: 0.02 m for the CoM, 0.05 for ratios."""
    lo: float
    hi: float


@dataclass(kw_only=True)
class SysidCfg:
    """What is identified, how it is scored and the evaluation budget."""

    max_evaluations: int = 150
    """Open-loop replays of candidate simulators (the nominal one included)."""
    groups: str = "family"
    """Joint gain grouping: ``family`` (left/right tied), ``limb`` or ``joint`` (see the module doc)."""
    extended: bool = False
    """Also identify a motor-strength ratio (``torque_scale``) per group (not in the paper's set)."""
    only: tuple[str, ...] = ()
    """Regexes over parameter names (``com_x``, ``base_mass``, ``kp/knee``, ...) to identify; empty: all."""
    base_profile: str = "nominal"
    """Profile the candidates start from; identified keys replace its values for the identified joints."""
    metric: str = "e_g_mpjpe_mm"
    """Open-loop error metric to minimise."""
    horizons_s: tuple[float, ...] = HORIZONS_S
    """The objective is the metric's mean over these open-loop horizons."""
    stride_s: float = 0.25
    max_windows: int = 64
    """Replay windows per evaluation."""
    min_step_fraction: float = 0.125
    """Refinement stops when every step is this fraction of its Table VII step."""
    rel_tol: float = 1e-4
    """A candidate must lower the objective by this fraction to be taken."""


@dataclass
class SysidResult:
    """The identified parameters and the record of the search."""

    params: list[Param]
    values: np.ndarray
    objective_before: float
    objective_after: float
    open_loop_before: dict
    open_loop_after: dict
    evaluations: int
    history: list[dict] = field(default_factory=list)
    wall_s: float = 0.0

    def to_dict(self) -> dict:
        """JSON form (the ``.json`` next to the identified profile)."""
        return {
            "objective_before": self.objective_before,
            "objective_after": self.objective_after,
            "open_loop_before": self.open_loop_before,
            "open_loop_after": self.open_loop_after,
            "evaluations": self.evaluations,
            "wall_s": self.wall_s,
            "parameters": [
                {**asdict(p), "value": float(v)} for p, v in zip(self.params, self.values, strict=True)
            ],
            "history": self.history,
        }


def joint_groups(grouping: str, action_joints: Sequence[str]) -> dict[str, str]:
    """Group name → joint regex (``re.fullmatch`` over ``g1.MOTOR_ORDER``) covering the action joints."""
    if grouping == "limb":
        return {n: p for n, p in LIMBS.items() if any(re.fullmatch(p, j) for j in action_joints)}
    if grouping == "joint":
        return {j.removesuffix("_joint"): re.escape(j) for j in action_joints}
    if grouping != "family":
        raise ValueError(f"unknown joint grouping {grouping!r}; expected one of {GROUPINGS}")
    groups: dict[str, str] = {}
    for joint in action_joints:
        family = re.sub(r"^(left|right)_", "", joint)
        pattern = rf"(left|right)_{re.escape(family)}" if family != joint else re.escape(joint)
        groups.setdefault(family.removesuffix("_joint"), pattern)
    return groups


def parameter_space(
    action_joints: Sequence[str], groups: str = "family", extended: bool = False
) -> list[Param]:
    """The Table VII parameters (CoM, base mass, kp and kd ratios per group), plus torque ratios if
    ``extended``. Bounds are a prior: ±5 cm of CoM shift, ratios in [0.5, 1.5] (torque [0.2, 1.5]); wider
    ranges let a few recordings be fitted by implausible simulators."""
    params = [Param(f"com_{a}", "base_com_offset", a, 0.0, 0.02, -0.05, 0.05) for a in "xyz"]
    params.append(Param("base_mass", "link_mass_scale", BASE_BODY, 1.0, 0.05, 0.5, 1.5))
    for gain in ("kp", "kd", "torque") if extended else ("kp", "kd"):
        lo, hi = (0.2, 1.5) if gain == "torque" else (0.5, 1.5)  # weak motors: down to 20 % strength
        for name, pattern in joint_groups(groups, action_joints).items():
            params.append(Param(f"{gain}/{name}", f"{gain}_scale", pattern, 1.0, 0.05, lo, hi))
    return params


def profile_dict(params: Sequence[Param], values: np.ndarray, base: dict, description: str = "") -> dict:
    """The base profile's keys with the identified ones merged in (per-joint / per-body keys: the base's
    patterns first, the identified ones after them, so they win where both match; a base joint pattern
    they cover entirely is dropped, as a profile refuses one that a later, wider pattern overrides)."""
    out = dict(base)
    per_key: dict[str, dict] = {}
    com = list(base.get("base_com_offset", [0.0, 0.0, 0.0]))
    for p, v in zip(params, values, strict=True):
        v = round(float(v), 6)
        if p.key == "base_com_offset":
            com["xyz".index(p.target)] = v
        else:
            per_key.setdefault(p.key, {})[p.target] = v
    if any(p.key == "base_com_offset" for p in params):
        out["base_com_offset"] = com
    for key, patterns in per_key.items():
        prior = base.get(key)
        prior = {} if prior is None else prior if isinstance(prior, dict) else {".*": prior}
        if key != "link_mass_scale":  # a base pattern whose joints are all identified now sets nothing
            identified = {i for pattern in patterns for i in match_names(pattern, g1.MOTOR_ORDER)}
            prior = {p: v for p, v in prior.items() if not set(match_names(p, g1.MOTOR_ORDER)) <= identified}
        out[key] = {**prior, **patterns}
    if description:
        out["description"] = description
    return out


def base_profile_dict(name_or_path: str) -> dict:
    """The raw YAML mapping of a profile (shipped name or path), validated by loading it."""
    profile = load_profile(name_or_path)
    return yaml.safe_load(Path(profile.source).read_text()) or {}


def pattern_search(
    objective: Callable[[np.ndarray], float], params: Sequence[Param], cfg: SysidCfg
) -> tuple[np.ndarray, float, int]:
    """Minimise ``objective`` from the nominal values (see the module docstring); returns (best values,
    best objective, evaluations used)."""
    lo, hi = np.array([p.lo for p in params]), np.array([p.hi for p in params])
    base_step = np.array([p.step for p in params])
    cache: dict[tuple, tuple[np.ndarray, float]] = {}

    def f(x: np.ndarray) -> float | None:
        """Cached objective; None once the budget is spent."""
        key = tuple(np.round(x, 6))
        if key not in cache:
            if len(cache) >= cfg.max_evaluations:
                return None
            cache[key] = (x, objective(x))
        return cache[key][1]

    def moved(x: np.ndarray, i: int, delta: float) -> np.ndarray | None:
        y = x.copy()
        y[i] = np.clip(x[i] + delta, lo[i], hi[i])
        return None if y[i] == x[i] else y

    def better(fy: float | None, fx: float) -> TypeGuard[float]:
        return fy is not None and fy < fx * (1 - cfg.rel_tol)

    x = np.array([p.nominal for p in params])
    fx = f(x)
    # screening: the Table VII neighbours of the nominal simulator, one parameter at a time
    gain, direction = np.zeros(len(params)), np.ones(len(params))
    for i in range(len(params)):
        for d in (1.0, -1.0):
            y = moved(x, i, d * base_step[i])
            fy = f(y) if y is not None else None
            if fy is not None and fx is not None and fx - fy > gain[i]:
                gain[i], direction[i] = fx - fy, d
    # coordinate descent, most helpful parameter first, then refinement with halved steps
    order, step = np.argsort(-gain, kind="stable"), base_step.copy()
    while fx is not None and len(cache) < cfg.max_evaluations:
        improved = False
        for i in order:
            for d in (direction[i], -direction[i]):
                y = moved(x, i, d * step[i])
                fy = f(y) if y is not None else None
                if y is None or not better(fy, fx):
                    continue
                x, fx, direction[i], improved = y, fy, d, True
                stride = 2 * step[i]
                while (y := moved(x, i, d * stride)) is not None and better(fy := f(y), fx):
                    x, fx, stride = y, fy, 2 * stride  # beyond the Table VII grid while it helps
                break
            if len(cache) >= cfg.max_evaluations:
                break
        if not improved:
            if np.all(step <= cfg.min_step_fraction * base_step + 1e-12):
                break
            step = step / 2
    best_x, best_f = min(cache.values(), key=lambda e: e[1])
    return best_x, float(best_f), len(cache)


def objective_of(errors: dict[str, dict[str, float]], cfg: SysidCfg) -> float:
    """Mean of the configured metric over the configured horizons."""
    return float(np.mean([errors[f"{h:g}"][cfg.metric] for h in cfg.horizons_s]))


def identify(
    dataset: RealDataset, out: Path, cfg: SysidCfg | None = None, progress: bool = True
) -> SysidResult:
    """Search the parameters, write the identified profile ``out`` (YAML) and ``out`` with ``.json``."""
    cfg = cfg or SysidCfg()
    if cfg.metric not in ERROR_METRICS:
        raise ValueError(f"unknown metric {cfg.metric!r}; expected one of {ERROR_METRICS}")
    t0 = time.monotonic()
    params = [
        p
        for p in parameter_space(dataset.action_joints, cfg.groups, cfg.extended)
        if not cfg.only or any(re.fullmatch(r, p.name) for r in cfg.only)
    ]
    if not params:
        names = [p.name for p in parameter_space(dataset.action_joints, cfg.groups, cfg.extended)]
        raise ValueError(f"only={list(cfg.only)} selects none of the parameters {names}")
    base = base_profile_dict(cfg.base_profile)
    history: list[dict] = []
    bar = tqdm(
        total=cfg.max_evaluations, desc="SysID", unit="replay", disable=not progress, dynamic_ncols=True
    )

    def replay(profile: str) -> dict:
        return open_loop_errors(
            dataset,
            profile=profile,
            horizons_s=cfg.horizons_s,
            stride_s=cfg.stride_s,
            max_windows=cfg.max_windows,
        )

    with tempfile.TemporaryDirectory(prefix="asap_sysid_") as tmp:

        def objective(x: np.ndarray) -> float:
            path = Path(tmp) / f"candidate_{len(history):04d}.yaml"
            path.write_text(yaml.safe_dump(profile_dict(params, x, base), sort_keys=False))
            errors = replay(str(path))
            history.append(
                {
                    "objective": objective_of(errors, cfg),
                    "values": {p.name: float(v) for p, v in zip(params, x, strict=True)},
                    "open_loop": errors,
                }
            )
            bar.update(1)
            bar.set_postfix(
                best=f"{min(h['objective'] for h in history):.2f}", first=f"{history[0]['objective']:.2f}"
            )
            return history[-1]["objective"]

        values, best, used = pattern_search(objective, params, cfg)
        bar.close()
    first, chosen = history[0], min(history, key=lambda h: h["objective"])
    description = (
        f"identified by asap-sysid from dataset {dataset.sha256[:12]} ({cfg.groups} groups"
        f"{', extended' if cfg.extended else ''}; open-loop {cfg.metric} {first['objective']:.2f} -> "
        f"{best:.2f})"
    )
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        f"# {description}\n"
        f"# dataset sha256 {dataset.sha256}; search record: {out.with_suffix('.json').name}\n"
        + yaml.safe_dump(profile_dict(params, values, base, description), sort_keys=False)
    )
    load_profile(out)  # what asap-finetune will load: refuse to hand back a profile it would reject
    result = SysidResult(
        params=params,
        values=values,
        objective_before=first["objective"],
        objective_after=best,
        open_loop_before=first["open_loop"],
        open_loop_after=chosen["open_loop"],
        evaluations=used,
        history=[{k: h[k] for k in ("objective", "values")} for h in history],
        wall_s=time.monotonic() - t0,
    )
    record = {
        "dataset_sha256": dataset.sha256,
        "profile": str(out),
        "config": asdict(cfg),
        **result.to_dict(),
    }
    out.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")
    return result
