"""``asap-ingest``: recorded episode bags → the stage-2 real-trajectory dataset (:class:`RealDataset`).

Each row is one policy tick in POLICY mode (``/policy/record``): the LowState the policy observed
(matched by ``lowstate_tick``, exactly), the ``/odometry`` message received nearest to that LowState
(motion capture on the robot, ground truth on the twin) with its twist turned from the base frame
(ROS' child frame) into the world frame, and the applied action (after the safety filter) with the
phase. An episode is cut into segments ``<episode_id>#<k>`` wherever ticks stop being consecutive
(the mode left POLICY, a record was lost, the observed state or the mocap is missing); short
segments are dropped.

Episodes are refused, with the bag, the problem and the fix in the message, when they cannot be
one policy's data on one robot at one control rate: no records, no mocap, a clock jump, a control
rate other than the artifact's, a policy artifact or robot variant (``LowState.mode_machine``) that
changes within or between episodes or differs from the one given::

    asap-ingest episodes/2026*_kick --artifact policy.onnx --out data/kick.npz
    asap-ingest episodes/ep1 --mode-machine 5 --out data/ep1.npz

Bags are read through the ROS-free ``asap_logger.reader`` (ROS is not needed to ingest).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from asap_core import g1, quat
from asap_core.artifact import PolicyArtifact, load_artifact
from asap_core.modes import Mode
from asap_logger.errors import BagError, ClockJumpError, SequenceGapError
from asap_logger.reader import Episode, TopicNames, match_ticks, open_episode
from asap_training.data.dataset import RealDataset, RealTrajectory

MISSING_MOCAP_FIX = "record /odometry (the twin's g1_sim publishes it; on the robot run the mocap bridge)"
ASSUMED_JOINTS = g1.names("asap23")
"""Action joint order assumed without an artifact: the stack's policy layout (``asap_g1_metadata``)."""


class IngestError(ValueError):
    """An episode that cannot become stage-2 data. The message names the bag, the problem and the fix."""

    def __init__(self, bag: str | Path, problem: str, fix: str = "") -> None:
        super().__init__(f"{bag}: {problem}" + (f"; {fix}" if fix else ""))
        self.bag, self.problem = str(bag), problem


@dataclass(frozen=True, kw_only=True)
class IngestCfg:
    """How strict ingest is, and where it finds the streams."""

    mode_machine: int | None = None
    """Refuse episodes of another robot variant (LowState.mode_machine); None: the bags must agree."""
    min_steps: int = 10
    """Drop segments shorter than this many ticks (at least 2: a transition needs two)."""
    rate_tolerance: float = 0.05
    """Allowed relative difference between the recorded policy period and the artifact's control_dt."""
    max_odometry_offset_s: float = 0.01
    """A row whose nearest /odometry was received farther than this from its LowState has no mocap:
    the segment is cut there (a mocap dropout)."""
    topics: TopicNames = field(default_factory=TopicNames)


@dataclass(frozen=True)
class EpisodeRows:
    """What one bag contributes, before the checks across bags."""

    bag: Path
    episode_id: str
    segments: tuple[RealTrajectory, ...]
    """Every unbroken run of usable POLICY ticks, short ones included."""
    policy_sha256: str
    mode_machine: int
    period_s: float
    """Median period of consecutive POLICY ticks, from the record stamps (the ROS clock: sim time on
    a lock-step twin)."""
    action_dim: int
    dropped_rows: int
    """POLICY ticks without their observed LowState or without mocap."""
    metadata: dict


def ingest(
    bags: Sequence[str | Path],
    artifact: PolicyArtifact | str | Path | None = None,
    cfg: IngestCfg | None = None,
) -> RealDataset:
    """Build the dataset of ``bags`` (episode directories or .mcap files); raises :class:`IngestError`.

    ``artifact`` (the policy that ran, or its path) pins the sha256, the control period and the action
    joint order; without it they come from the bags, the joints assumed :data:`ASSUMED_JOINTS`.
    ``cfg.mode_machine`` pins the robot variant; segments shorter than ``cfg.min_steps`` are dropped.
    """
    cfg = cfg or IngestCfg()
    min_steps = cfg.min_steps
    if not bags:
        raise IngestError("<no bags>", "nothing to ingest", "name at least one episode bag")
    if min_steps < 2:
        raise ValueError(f"min_steps is {min_steps}, expected >= 2 (a transition needs two ticks)")
    if isinstance(artifact, str | Path):
        artifact = load_artifact(artifact)
    episodes = [read_episode(bag, cfg) for bag in bags]
    _check_across(episodes, artifact, cfg.mode_machine)
    control_dt = _control_dt(episodes, artifact, cfg.rate_tolerance)
    joints = _action_joints(episodes[0], artifact)
    kept = tuple(s for e in episodes for s in e.segments if s.num_steps >= min_steps)
    if not kept:
        longest = max((s.num_steps for e in episodes for s in e.segments), default=0)
        raise IngestError(
            ", ".join(str(e.bag) for e in episodes),
            f"no segment of at least {min_steps} consecutive POLICY ticks (longest: {longest})",
            "lower --min-steps or record longer runs",
        )
    return RealDataset(
        trajectories=kept,
        control_dt=control_dt,
        action_joints=joints,
        policy_sha256=episodes[0].policy_sha256,
        mode_machine=episodes[0].mode_machine,
        info=_info(episodes, artifact, min_steps),
    )


def read_episode(bag: str | Path, cfg: IngestCfg | None = None) -> EpisodeRows:
    """One bag's rows and segments, after the checks that need only this bag."""
    cfg = cfg or IngestCfg()
    bag = Path(bag)
    names = cfg.topics
    try:
        ep = open_episode(bag, topics=[names.lowstate, names.record, names.odometry], names=names)
        _require_streams(ep, bag)
        _check_clock(ep, bag)
        pol, ls, odom = ep.policy(), ep.lowstate(), ep.odometry()
    except BagError as exc:
        raise IngestError(bag, f"cannot read the episode: {exc}") from None
    on = np.flatnonzero(pol.mode == Mode.POLICY)
    if not on.size:
        modes = sorted({_mode_name(int(m)) for m in pol.mode})
        raise IngestError(
            bag,
            f"no {names.record} tick in POLICY mode (modes recorded: {modes})",
            "the policy never ran in this episode; record while the node is in POLICY",
        )
    pol = pol.take(on)
    sha = _constant(bag, "policy artifact (PolicyRecord.policy_sha256)", pol.policy_sha256, short=True)
    variant = int(_constant(bag, "robot variant (LowState.mode_machine)", ls.mode_machine))
    ls_rows = match_ticks(ls.tick, pol.lowstate_tick)
    ls_t = ls.t_ns[np.maximum(ls_rows, 0)]
    od_rows = _nearest(odom.t_ns, ls_t)
    norm = np.linalg.norm(odom.quat[od_rows], axis=1)
    usable = (
        (ls_rows >= 0)
        & (np.abs(odom.t_ns[od_rows] - ls_t) <= cfg.max_odometry_offset_s * 1e9)
        & (norm > 0.5)
        & np.all(np.isfinite(pol.action), axis=1)
    )
    rows = np.flatnonzero(usable)
    runs = np.split(rows, np.flatnonzero(np.diff(pol.tick[rows].astype(np.int64)) != 1) + 1)
    pairs = np.concatenate([np.diff(pol.stamp_ns[r]) for r in runs]) if rows.size else np.zeros(0)
    if not pairs.size:
        raise IngestError(
            bag,
            f"no two consecutive usable POLICY ticks ({len(on)} POLICY ticks, {int(usable.sum())} usable)",
            "check that /lowstate and /odometry were recorded while the policy ran",
        )
    eid = str(ep.metadata.get("episode_id") or bag.name)
    base_quat = odom.quat[od_rows] / norm[:, None]

    def segment(k: int, r: np.ndarray) -> RealTrajectory:
        o, s, q = od_rows[r], ls_rows[r], base_quat[r]
        return RealTrajectory(
            name=f"{eid}#{k}",
            base_pos_w=odom.pos[o].astype(np.float64),
            base_quat_w=q,
            base_lin_vel_w=quat.rotate(q, odom.lin_vel[o].astype(np.float64)),
            base_ang_vel_w=quat.rotate(q, odom.ang_vel[o].astype(np.float64)),
            joint_pos=ls.q[s].astype(np.float64),
            joint_vel=ls.dq[s].astype(np.float64),
            action=pol.action[r].astype(np.float64),
            phase=pol.phase[r].astype(np.float64),
            joint_torque=ls.tau_est[s].astype(np.float64),
        )

    return EpisodeRows(
        bag=bag,
        episode_id=eid,
        segments=tuple(segment(k, r) for k, r in enumerate(runs) if len(r) >= 2),
        policy_sha256=str(sha),
        mode_machine=variant,
        period_s=float(np.median(pairs)) * 1e-9,
        action_dim=pol.action.shape[1],
        dropped_rows=len(on) - len(rows),
        metadata=ep.metadata,
    )


def _require_streams(ep: Episode, bag: Path) -> None:
    names, counts = ep.names, ep.counts
    if not counts.get(names.record):
        raise IngestError(
            bag,
            f"no {names.record} messages (topics: {sorted(t for t, n in counts.items() if n)})",
            "record the policy node's per-tick records (the recorder's default topics include them)",
        )
    if not counts.get(names.odometry):
        raise IngestError(bag, f"missing mocap: no {names.odometry} messages", MISSING_MOCAP_FIX)
    if not counts.get(names.lowstate):
        raise IngestError(bag, f"no {names.lowstate} messages", f"record {names.lowstate} (joint states)")


def _check_clock(ep: Episode, bag: Path) -> None:
    """Receive times and ticks must not go back; lost messages are fine (segments are cut there)."""
    for topic in (ep.names.lowstate, ep.names.record, ep.names.odometry):
        try:
            ep.validate([topic], max_gap_s=None)
        except SequenceGapError:
            pass
        except ClockJumpError as exc:
            raise IngestError(
                bag,
                f"clock jump: {exc}",
                "a restart or clock reset inside the episode; record it again or cut the bag at the jump",
            ) from None


def _mode_name(value: int) -> str:
    try:
        return Mode(value).name
    except ValueError:
        return str(value)


def _constant(bag: Path, what: str, values: np.ndarray, short: bool = False) -> str | int:
    seen = list(dict.fromkeys(values.tolist()))  # in order of appearance
    if len(seen) > 1:
        shown = [v[:12] if short else v for v in seen]
        raise IngestError(
            bag,
            f"{what} changes within the episode: {shown}",
            "one episode must come from one policy on one robot; record separate episodes",
        )
    return seen[0]


def _nearest(t_ns: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Index of the message received nearest to each instant (receive order may jitter slightly)."""
    order = np.argsort(t_ns, kind="stable")
    t = t_ns[order]
    i = np.clip(np.searchsorted(t, at), 1, max(len(t) - 1, 1))
    before = np.minimum(i - 1, len(t) - 1)
    after = np.minimum(i, len(t) - 1)
    return order[np.where(at - t[before] <= t[after] - at, before, after)]


def _check_across(
    episodes: list[EpisodeRows], artifact: PolicyArtifact | None, mode_machine: int | None
) -> None:
    first = episodes[0]
    seen: dict[str, Path] = {}
    for e in episodes:
        if e.episode_id in seen:
            raise IngestError(e.bag, f"episode {e.episode_id} is also {seen[e.episode_id]}", "name it once")
        seen[e.episode_id] = e.bag
        if artifact is not None and e.policy_sha256 != artifact.sha256:
            raise IngestError(
                e.bag,
                f"recorded policy sha256 {e.policy_sha256[:12]} is not the given artifact's "
                f"{artifact.sha256[:12]} ({artifact.path})",
                "pass the artifact that ran in this episode, or leave this episode out",
            )
        if e.policy_sha256 != first.policy_sha256:
            raise IngestError(
                e.bag,
                f"recorded policy sha256 {e.policy_sha256[:12]} differs from {first.policy_sha256[:12]} "
                f"of {first.bag}",
                "a dataset holds one policy's episodes; ingest each policy separately",
            )
        if mode_machine is not None and e.mode_machine != mode_machine:
            raise IngestError(
                e.bag,
                f"robot variant LowState.mode_machine is {e.mode_machine}, expected {mode_machine}",
                "ingest episodes of the robot variant you fine-tune for",
            )
        if e.mode_machine != first.mode_machine:
            raise IngestError(
                e.bag,
                f"robot variant LowState.mode_machine is {e.mode_machine}, "
                f"{first.bag} has {first.mode_machine}",
                "a dataset holds one robot variant; ingest each variant separately",
            )


def _control_dt(episodes: list[EpisodeRows], artifact: PolicyArtifact | None, tolerance: float) -> float:
    """The artifact's period (or the bags' median), after checking every episode ran at it."""
    expected = (
        artifact.metadata.control_dt
        if artifact is not None
        else round(float(np.median([e.period_s for e in episodes])), 6)
    )
    source = f"the artifact's control_dt {expected * 1e3:g} ms" if artifact else f"{expected * 1e3:g} ms"
    for e in episodes:
        if abs(e.period_s - expected) > tolerance * expected:
            raise IngestError(
                e.bag,
                f"policy ticks every {e.period_s * 1e3:.2f} ms, expected {source} (±{tolerance:.0%})",
                "the node ran late or at another rate; check its loop timing, or pass the right artifact",
            )
    return expected


def _action_joints(episode: EpisodeRows, artifact: PolicyArtifact | None) -> tuple[str, ...]:
    joints = artifact.metadata.joint_names if artifact is not None else ASSUMED_JOINTS
    if episode.action_dim != len(joints):
        source = "the artifact's joints" if artifact else f"the assumed {len(joints)} asap23 joints"
        raise IngestError(
            episode.bag,
            f"recorded actions have {episode.action_dim} entries, {source} are {len(joints)}",
            "pass the artifact that ran (--artifact policy.onnx)",
        )
    return tuple(joints)


def _info(episodes: list[EpisodeRows], artifact: PolicyArtifact | None, min_steps: int) -> dict:
    policy_name = (
        artifact.metadata.name
        if artifact
        else next(
            (e.metadata.get("policy", {}).get("name", "") for e in episodes if e.metadata.get("policy")), ""
        )
    )
    twins = {e.episode_id: e.metadata["twin"] for e in episodes if e.metadata.get("twin")}
    return {
        "source": "asap-ingest",
        "bags": [str(e.bag.resolve()) for e in episodes],
        "episode_ids": [e.episode_id for e in episodes],
        "policy_name": policy_name,
        "artifact": str(artifact.path) if artifact else None,
        "action_joints_from": "artifact" if artifact else "assumed asap23 (no artifact given)",
        "twin": twins,
        "dynamics_profiles": {eid: t["profile"] for eid, t in twins.items() if "profile" in t},
        "min_steps": min_steps,
        "dropped": {
            e.episode_id: {
                "rows": e.dropped_rows,
                "short_segments": sum(s.num_steps < min_steps for s in e.segments),
            }
            for e in episodes
        },
    }


def summary(dataset: RealDataset) -> str:
    """Episodes, segments, steps, seconds and the policy hash, for a terminal."""
    info = dataset.info
    lines = [
        f"{len(info.get('episode_ids', []))} episode(s), {len(dataset.trajectories)} segment(s), "
        f"{dataset.num_steps} steps ({dataset.num_steps * dataset.control_dt:.1f} s at "
        f"{1 / dataset.control_dt:g} Hz)",
        f"policy {info.get('policy_name') or '?'} sha256 {dataset.policy_sha256[:12]}, "
        f"mode_machine {dataset.mode_machine}, {len(dataset.action_joints)} action joints",
    ]
    if info.get("dynamics_profiles"):
        lines.append(f"twin profiles: {sorted(set(info['dynamics_profiles'].values()))}")
    dropped = info.get("dropped", {})
    rows = sum(d["rows"] for d in dropped.values())
    short = sum(d["short_segments"] for d in dropped.values())
    if rows or short:
        lines.append(
            f"dropped: {rows} ticks without state or mocap, {short} segments shorter than "
            f"{info.get('min_steps')} steps"
        )
    lines.append(f"dataset sha256 {dataset.sha256[:12]}")
    return "\n".join(lines)
