"""Open an episode bag and turn its topics into typed numpy arrays (no ROS needed).

    ep = open_episode("episodes/20260101-120000_kick")
    ep.metadata["policy"]["sha256"]                 # episode.json
    ls = ep.lowstate()                              # LowStateArrays: q (N, 29), dq, tau_est, imu...
    data = ep.aligned()                             # every stream sampled on the policy ticks

Times: ``t_ns`` is the receive time the recorder stored (MCAP log time, ns since the epoch);
``t`` is seconds since the episode's first message. Joint arrays are in Unitree motor order
(``asap_core.g1.MOTOR_ORDER``); policy vectors in the policy artifact's order. Quaternions are
(w, x, y, z).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import numpy as np
import yaml
from rosbags.typesys import Stores, get_types_from_msg, get_typestore

from asap_core import interfaces
from asap_core.g1 import MOTOR_ORDER, NUM_MOTORS
from asap_logger import mcap_io
from asap_logger.bag import bag_files
from asap_logger.errors import (
    BagNotFoundError,
    ClockJumpError,
    DecodeError,
    GapError,
    MissingTopicError,
    SequenceGapError,
)
from asap_logger.reader.cdr import decode

_T = TypeVar("_T")
_R = TypeVar("_R", bound="_Rows")  # typing.Self is Python >= 3.11; the robot runs 3.10


@dataclass(frozen=True, kw_only=True)
class TopicNames:
    """Where the reader finds each stream (the graph's names, :mod:`asap_core.interfaces`)."""

    lowstate: str = interfaces.LOWSTATE
    lowcmd: str = interfaces.LOWCMD
    record: str = interfaces.POLICY_RECORD
    odometry: str = interfaces.ODOMETRY


class _Rows:
    """Row selection shared by the array bundles (every ndarray field has N rows)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]  # every bundle is a dataclass (for the type checker)

    def take(self: _R, rows: np.ndarray) -> _R:
        """The same bundle restricted to ``rows``."""
        return replace(
            self,
            **{
                f.name: getattr(self, f.name)[rows]
                for f in fields(self)
                if isinstance(getattr(self, f.name), np.ndarray)
            },
        )


@dataclass(frozen=True)
class LowStateArrays(_Rows):
    """``unitree_hg/LowState``, motors 0..28 in ``joint_names`` order."""

    t_ns: np.ndarray
    """(N,) int64 receive time, ns since the epoch."""
    t: np.ndarray
    """(N,) float64 seconds since the episode start."""
    tick: np.ndarray
    """(N,) uint32 robot tick."""
    q: np.ndarray
    """(N, 29) float32 joint position, rad."""
    dq: np.ndarray
    """(N, 29) float32 joint velocity, rad/s."""
    tau_est: np.ndarray
    """(N, 29) float32 estimated joint torque, N m."""
    imu_quat: np.ndarray
    """(N, 4) float32 pelvis IMU orientation (w, x, y, z)."""
    imu_gyro: np.ndarray
    """(N, 3) float32 angular velocity, rad/s, IMU frame."""
    imu_acc: np.ndarray
    """(N, 3) float32 linear acceleration, m/s^2, IMU frame."""
    mode_machine: np.ndarray
    """(N,) uint8 robot variant the firmware reports (must stay constant; ingest checks it)."""
    joint_names: tuple[str, ...] = MOTOR_ORDER


@dataclass(frozen=True)
class LowCmdArrays(_Rows):
    """``unitree_hg/LowCmd``: what was commanded to motors 0..28."""

    t_ns: np.ndarray
    t: np.ndarray
    q: np.ndarray
    """(N, 29) float32 position target, rad."""
    dq: np.ndarray
    """(N, 29) float32 velocity target, rad/s."""
    tau: np.ndarray
    """(N, 29) float32 feed-forward torque, N m."""
    kp: np.ndarray
    """(N, 29) float32 stiffness, N m/rad."""
    kd: np.ndarray
    """(N, 29) float32 damping, N m s/rad."""
    joint_names: tuple[str, ...] = MOTOR_ORDER


@dataclass(frozen=True)
class OdometryArrays(_Rows):
    """``nav_msgs/Odometry`` of the base (mocap, or the twin's ground truth)."""

    t_ns: np.ndarray
    t: np.ndarray
    stamp_ns: np.ndarray
    """(N,) int64 header stamp, ns."""
    pos: np.ndarray
    """(N, 3) float64 base position in the odometry frame, m."""
    quat: np.ndarray
    """(N, 4) float64 base orientation (w, x, y, z)."""
    lin_vel: np.ndarray
    """(N, 3) float64 linear velocity, m/s, in the child (base) frame as ROS defines it."""
    ang_vel: np.ndarray
    """(N, 3) float64 angular velocity, rad/s, child frame."""


@dataclass(frozen=True)
class PolicyArrays(_Rows):
    """``asap_msgs/PolicyRecord``: one row per policy tick, vectors in policy joint order."""

    t_ns: np.ndarray
    t: np.ndarray
    stamp_ns: np.ndarray
    tick: np.ndarray
    mode: np.ndarray
    phase: np.ndarray
    lowstate_tick: np.ndarray
    """(N,) the LowState.tick each observation was built from (exact state alignment)."""
    observation: np.ndarray
    """(N, obs dim) float32; the vectors are NaN on ticks that ran no policy (outside POLICY mode
    the node sends them empty)."""
    action_raw: np.ndarray
    action: np.ndarray
    """(N, A) float32 after the safety filter: what was applied."""
    q_target: np.ndarray
    inference_ms: np.ndarray
    policy_sha256: np.ndarray
    """(N,) str, sha256 of the artifact that ran the tick ('' when none was loaded)."""


@dataclass(frozen=True)
class AlignedEpisode:
    """Every stream sampled at the same instants ``t`` (rows correspond)."""

    t: np.ndarray
    lowstate: LowStateArrays
    lowcmd: LowCmdArrays | None
    odometry: OdometryArrays | None
    policy: PolicyArrays | None


@dataclass(frozen=True)
class RawTopic:
    """The stored CDR bytes of one topic, in file order."""

    topic: str
    msgtype: str
    t_ns: np.ndarray
    publish_ns: np.ndarray
    blobs: list


def open_episode(
    path: str | Path, *, topics: Iterable[str] | None = None, names: TopicNames | None = None
) -> Episode:
    """Read an episode bag directory (or one .mcap file); keep the bytes of ``topics`` (default all).

    A bag cut short by a crash reads up to its last complete chunk; what was lost is listed in
    ``Episode.issues``. A damaged chunk raises ``CorruptChunkError`` naming file, chunk and offset.
    """
    path = Path(path)
    if path.is_file() and path.suffix == ".mcap":
        root, files, bag_metadata = path.parent, [path], None
    elif path.is_dir():
        bag_metadata = _bag_metadata(path / "metadata.yaml")
        root, files = path, bag_files(path, bag_metadata)
    else:
        raise BagNotFoundError(f"{path}: not a bag directory or .mcap file")
    wanted = None if topics is None else set(topics)
    return Episode(root, files, bag_metadata, wanted, names or TopicNames())


def _bag_metadata(path: Path) -> dict | None:
    """metadata.yaml's content; None when absent or unreadable (the .mcap files are the truth)."""
    try:
        info = yaml.safe_load(path.read_text())["rosbag2_bagfile_information"]
    except (OSError, ValueError, yaml.YAMLError, KeyError, TypeError):  # ValueError: not UTF-8
        return None
    return info if isinstance(info, dict) else None


class Episode:
    """An opened episode: raw topics, decoders to typed arrays, validation, alignment."""

    def __init__(
        self,
        path: Path,
        files: list[Path],
        bag_metadata: dict | None,
        wanted: set[str] | None,
        names: TopicNames,
    ) -> None:
        self.path, self.names, self.bag_metadata = path, names, bag_metadata
        self.issues: list[str] = (
            [] if bag_metadata else [f"{path.name}: no readable metadata.yaml (run asap-bag reindex)"]
        )
        self._schemas: dict[str, str] = {}
        self._data: dict[str, tuple[str, list, list, list]] = {}
        self._mcap_metadata: dict[str, dict[str, str]] = {}
        for file in files:
            self._read(file, wanted)
        self.metadata = self._episode_metadata()
        self.start_ns = min((t[0] for _, t, _, _ in self._data.values() if t), default=0)
        self._defs: dict[str, dict] = {}
        self._decoded: dict[str, Any] = {}  # one bundle per key, each of its own type (_once)

    def _read(self, file: Path, wanted: set[str] | None) -> None:
        entries: dict[int, tuple[str, list, list, list]] = {}

        def want(channel: mcap_io.Channel, schema: mcap_io.Schema | None) -> bool:
            if schema is None:
                return False
            # undecodable bytes become U+FFFD: the definition then fails to parse (DecodeError) if used
            self._schemas.setdefault(schema.name, schema.data.decode(errors="replace"))
            entries[channel.id] = self._data.setdefault(channel.topic, (schema.name, [], [], []))
            return wanted is None or channel.topic in wanted

        def sink(cid: int, log_time: int, pub: int, data: memoryview) -> None:
            entry = entries[cid]
            entry[1].append(log_time)
            entry[2].append(pub)
            entry[3].append(data)

        contents = mcap_io.scan(file, sink=sink, wanted=want)
        self._mcap_metadata.update(dict(contents.metadata))
        self.issues += contents.problems
        if not contents.complete:
            self.issues.append(
                f"{file.name}: not closed (crash?); read up to byte {contents.valid_end}, "
                f"{contents.message_count} messages in {len(contents.chunks)} complete chunks"
            )

    def _episode_metadata(self) -> dict:
        sidecar = self.path / "episode.json"
        try:
            meta = json.loads(sidecar.read_text())
            if isinstance(meta, dict):
                return meta
            self.issues.append("episode.json is not a JSON object; using the metadata stored in the bag")
        except FileNotFoundError:
            pass
        except (OSError, ValueError) as exc:  # ValueError: not JSON, or not UTF-8
            self.issues.append(f"episode.json unreadable ({exc}); using the metadata stored in the bag")
        started = self._mcap_metadata.get("asap_episode", {})
        try:
            meta = json.loads(started["json"]) if "json" in started else dict(started)
        except ValueError as exc:
            self.issues.append(f"the episode metadata stored in the bag is not JSON ({exc})")
            return dict(started)
        return meta if isinstance(meta, dict) else {"json": meta}

    # -- raw access -------------------------------------------------------------------------------
    @property
    def topics(self) -> dict[str, str]:
        """Topic -> message type of every topic in the episode."""
        return {topic: entry[0] for topic, entry in self._data.items()}

    @property
    def counts(self) -> dict[str, int]:
        """Topic -> number of messages read."""
        return {topic: len(entry[1]) for topic, entry in self._data.items()}

    def raw(self, topic: str) -> RawTopic:
        """The stored bytes and times of ``topic``; ``MissingTopicError`` if absent or empty."""
        entry = self._data.get(topic)
        if entry is None or not entry[1]:
            raise MissingTopicError(topic, [t for t, e in self._data.items() if e[1]])
        return RawTopic(
            topic, entry[0], np.asarray(entry[1], np.int64), np.asarray(entry[2], np.int64), entry[3]
        )

    def decode(
        self, topic: str, field_paths: list[str], *, empty_fill: float | None = None
    ) -> dict[str, np.ndarray]:
        """Decode ``field_paths`` (e.g. ``motor_state.q``) of every message: {path: (N, count)}.

        ``empty_fill``: a sequence empty in some messages fills their rows with it (else an error)."""
        raw = self.raw(topic)
        return decode(
            self._fielddefs(raw.msgtype), raw.msgtype, raw.blobs, field_paths, topic, empty_fill=empty_fill
        )

    def _once(self, key: str, decode: Callable[[], _T]) -> _T:
        if key not in self._decoded:
            self._decoded[key] = decode()
        return self._decoded[key]

    def _fielddefs(self, msgtype: str) -> dict:
        """Field definitions of ``msgtype`` and its dependencies, parsed once from the bag's schema."""
        if msgtype not in self._defs:
            store = get_typestore(Stores.EMPTY)
            try:
                store.register(get_types_from_msg(self._schemas[msgtype], msgtype))
            except Exception as exc:  # rosbags raises several parser and type-store error types
                raise DecodeError(msgtype, 0, f"embedded message definition does not parse: {exc}") from None
            self._defs[msgtype] = store.fielddefs
        return self._defs[msgtype]

    def _times(self, topic: str) -> tuple[np.ndarray, np.ndarray]:
        t_ns = self.raw(topic).t_ns
        return t_ns, (t_ns - self.start_ns) * 1e-9

    def _expect(self, topic: str, msgtype: str) -> None:
        actual = self.raw(topic).msgtype
        if actual != msgtype:
            raise DecodeError(topic, 0, f"type is {actual}, expected {msgtype}")

    # -- typed streams ----------------------------------------------------------------------------
    def lowstate(self) -> LowStateArrays:
        """Joint and IMU state from ``unitree_hg/LowState`` (decoded once, then cached)."""
        return self._once("lowstate", self._decode_lowstate)

    def _decode_lowstate(self) -> LowStateArrays:
        topic = self.names.lowstate
        self._expect(topic, interfaces.TYPES[interfaces.LOWSTATE])
        f = self.decode(
            topic,
            [
                "tick",
                "motor_state.q",
                "motor_state.dq",
                "motor_state.tau_est",
                "imu_state.quaternion",
                "imu_state.gyroscope",
                "imu_state.accelerometer",
                "mode_machine",
            ],
        )
        t_ns, t = self._times(topic)
        # a lock-step twin re-sends its sync state (same tick) while it waits for a late command: one
        # state, received twice; a robot's tick never repeats
        first = np.r_[True, np.diff(f["tick"][:, 0].astype(np.int64)) != 0]
        m = slice(0, NUM_MOTORS)
        return LowStateArrays(
            t_ns[first],
            t[first],
            f["tick"][first, 0],
            f["motor_state.q"][first, m],
            f["motor_state.dq"][first, m],
            f["motor_state.tau_est"][first, m],
            f["imu_state.quaternion"][first],
            f["imu_state.gyroscope"][first],
            f["imu_state.accelerometer"][first],
            f["mode_machine"][first, 0],
        )

    def lowcmd(self) -> LowCmdArrays:
        """Commanded targets and gains from ``unitree_hg/LowCmd`` (decoded once, then cached)."""
        return self._once("lowcmd", self._decode_lowcmd)

    def _decode_lowcmd(self) -> LowCmdArrays:
        topic = self.names.lowcmd
        self._expect(topic, interfaces.TYPES[interfaces.LOWCMD])
        keys = ["q", "dq", "tau", "kp", "kd"]
        f = self.decode(topic, [f"motor_cmd.{k}" for k in keys])
        t_ns, t = self._times(topic)
        q, dq, tau, kp, kd = (f[f"motor_cmd.{k}"][:, :NUM_MOTORS] for k in keys)
        return LowCmdArrays(t_ns, t, q, dq, tau, kp, kd)

    def odometry(self) -> OdometryArrays:
        """Base pose and velocity from ``nav_msgs/Odometry`` (decoded once, then cached)."""
        return self._once("odometry", self._decode_odometry)

    def _decode_odometry(self) -> OdometryArrays:
        topic = self.names.odometry
        self._expect(topic, interfaces.TYPES[interfaces.ODOMETRY])
        pose, twist = "pose.pose.", "twist.twist."
        paths = {
            "pos": [pose + f"position.{a}" for a in "xyz"],
            "quat": [pose + f"orientation.{a}" for a in "wxyz"],
            "lin_vel": [twist + f"linear.{a}" for a in "xyz"],
            "ang_vel": [twist + f"angular.{a}" for a in "xyz"],
        }
        f = self.decode(
            topic,
            [p for group in paths.values() for p in group] + ["header.stamp.sec", "header.stamp.nanosec"],
        )
        t_ns, t = self._times(topic)
        stacked = {k: np.hstack([f[p] for p in group]) for k, group in paths.items()}
        return OdometryArrays(t_ns, t, _stamp(f), **stacked)

    def policy(self) -> PolicyArrays:
        """Per-tick policy records from ``asap_msgs/PolicyRecord`` (decoded once, then cached)."""
        return self._once("policy", self._decode_policy)

    def _decode_policy(self) -> PolicyArrays:
        topic = self.names.record
        self._expect(topic, interfaces.TYPES[interfaces.POLICY_RECORD])
        vectors = ["observation", "action_raw", "action", "q_target"]
        scalars = ["tick", "mode", "phase", "lowstate_tick"]
        f = self.decode(
            topic,
            [*scalars, *vectors, "inference_ms", "policy_sha256", "header.stamp.sec", "header.stamp.nanosec"],
            empty_fill=np.nan,  # ticks outside POLICY mode carry empty vectors
        )
        t_ns, t = self._times(topic)
        return PolicyArrays(
            t_ns,
            t,
            _stamp(f),
            **{k: f[k][:, 0] for k in scalars},
            **{k: f[k] for k in vectors},
            inference_ms=f["inference_ms"][:, 0],
            policy_sha256=f["policy_sha256"][:, 0].astype(str),
        )

    # -- validation and alignment -----------------------------------------------------------------
    def validate(self, require: Iterable[str] = (), *, max_gap_s: float | None = 0.1) -> None:
        """Raise on the first problem: a required topic missing, a receive-time gap longer than
        ``max_gap_s`` or going backwards, LowState/PolicyRecord ticks skipping or restarting."""
        for topic in require:
            raw = self.raw(topic)
            _check_times(topic, raw.t_ns, raw.publish_ns, max_gap_s)
        if self.names.record in require:
            _check_sequence(self.names.record, "tick", self.policy().tick.astype(np.int64), expected_step=1)
        if self.names.lowstate in require:
            _check_sequence(
                self.names.lowstate, "tick", self.lowstate().tick.astype(np.int64), expected_step=None
            )

    def aligned(
        self, *, rate_hz: float | None = None, validate: bool = True, max_gap_s: float | None = 0.1
    ) -> AlignedEpisode:
        """Sample every available stream at common instants.

        The instants are the policy records' receive times when the episode has records (each
        row's LowState is then the one the policy observed, matched by ``lowstate_tick``), else a
        ``rate_hz`` grid (default 50 Hz) over the LowState span. Other streams are held at their
        latest message at or before each instant; instants before every stream has started are
        dropped.
        """
        have = {topic for topic, n in self.counts.items() if n}
        required = [self.names.lowstate] + (
            [self.names.record] if self.names.record in have and rate_hz is None else []
        )
        if validate:
            self.validate(required, max_gap_s=max_gap_s)
        lowstate = self.lowstate()
        policy = self.policy() if self.names.record in have else None
        if policy is not None and rate_hz is None:
            grid = policy.t_ns
        else:
            step = int(1e9 / (rate_hz or 50.0))
            grid = np.arange(lowstate.t_ns[0], lowstate.t_ns[-1] + 1, step, dtype=np.int64)
        streams = {
            "lowstate": lowstate,
            "policy": policy,
            "lowcmd": self.lowcmd() if self.names.lowcmd in have else None,
            "odometry": self.odometry() if self.names.odometry in have else None,
        }
        rows = {k: _hold(v.t_ns, grid) for k, v in streams.items() if v is not None}
        if policy is not None and rate_hz is None:
            rows["policy"] = np.arange(len(grid))
            rows["lowstate"] = match_ticks(lowstate.tick, policy.lowstate_tick, rows["lowstate"])
        keep = np.logical_and.reduce([r >= 0 for r in rows.values()])
        taken: dict[str, Any] = {k: (v.take(rows[k][keep]) if v is not None else None)
                                 for k, v in streams.items()}
        return AlignedEpisode(t=(grid[keep] - self.start_ns) * 1e-9, **taken)


def _stamp(f: dict[str, np.ndarray]) -> np.ndarray:
    return f["header.stamp.sec"][:, 0].astype(np.int64) * 1_000_000_000 + f["header.stamp.nanosec"][:, 0]


def _hold(t_ns: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Index of the latest message at or before each grid instant (-1 before the first).

    A message stamped after one that follows it was stamped late (see :data:`MAX_RECEIVE_REORDER_S`):
    it takes its follower's time, the lower envelope, so a late stamp cannot hold a stale message."""
    return np.searchsorted(np.minimum.accumulate(t_ns[::-1])[::-1], grid, side="right") - 1


def match_ticks(ticks: np.ndarray, wanted: np.ndarray, fallback: np.ndarray | None = None) -> np.ndarray:
    """Row of ``ticks`` holding each ``wanted`` tick (e.g. the LowState a policy tick observed);
    ``fallback`` (default -1) where no row has it."""
    if fallback is None:
        fallback = np.full(len(wanted), -1)
    order = np.argsort(ticks, kind="stable")
    pos = np.clip(np.searchsorted(ticks[order], wanted), 0, len(ticks) - 1)
    return np.where(ticks[order][pos] == wanted, order[pos], fallback)


MAX_RECEIVE_REORDER_S = 0.05
"""How far receive times may step back before the step is looked at as a clock jump (s).

The log time is DDS's reception stamp, and it is not monotonic: reliable delivery stamps a lost sample
when its repair lands and hands it over before the newer samples that waited for it (seen: four
/lowstate samples stamped ~140 ms late on a loaded 2-core host). Order is the ticks' job. The
recorder's clock jumped (an NTP step) only where receive times step back *and* the delay receive -
send drops for good there: its median over :data:`JUMP_WINDOW` messages after the step is lower than
before it (a few late-stamped samples cannot move a median; a backlog draining lowers the delay but
never steps receive times back). Without send stamps (publish time = log time, as some recorders
write) every step back beyond this is a jump."""
JUMP_WINDOW = 25
"""Messages on each side of a step back whose median receive - send delays are compared."""


def _check_times(topic: str, t_ns: np.ndarray, publish_ns: np.ndarray, max_gap_s: float | None) -> None:
    jump = _receive_clock_step_back(t_ns, publish_ns)
    if jump is not None:
        i, back_s = jump
        raise ClockJumpError(topic, i, f"receive time goes back by {back_s * 1e3:.1f} ms")
    received = np.sort(t_ns)  # a late-stamped sample is no gap: the others kept arriving
    dt = np.diff(received) * 1e-9
    if max_gap_s is not None and dt.size and dt.max() > max_gap_s:
        i = int(np.argmax(dt))
        raise GapError(topic, float((received[i] - received[0]) * 1e-9), float(dt[i]), max_gap_s)


def _receive_clock_step_back(t_ns: np.ndarray, publish_ns: np.ndarray) -> tuple[int, float] | None:
    """(message index, seconds) of the first step back of the recorder's clock, None if none."""
    back = np.diff(t_ns) * -1e-9
    steps = np.flatnonzero(back > MAX_RECEIVE_REORDER_S) + 1
    if not steps.size:
        return None
    if np.array_equal(t_ns, publish_ns) or not publish_ns.any():  # no send stamps to compare with
        return int(steps[0]), float(back[steps[0] - 1])
    delay = (t_ns - publish_ns) * 1e-9
    for i in steps:
        drop = np.median(delay[max(0, i - JUMP_WINDOW) : i]) - np.median(delay[i : i + JUMP_WINDOW])
        if drop > MAX_RECEIVE_REORDER_S:
            return int(i), float(drop)
    return None


def _check_sequence(topic: str, name: str, seq: np.ndarray, expected_step: int | None) -> None:
    step = np.diff(seq)
    if not step.size:
        return
    back = np.flatnonzero(step <= 0)
    if back.size:
        i = int(back[0]) + 1
        raise ClockJumpError(topic, i, f"{name} goes from {seq[i - 1]} to {seq[i]}")
    unit = expected_step or int(np.median(step))
    skipped = step // unit - 1
    if skipped.max() > 0:
        first = int(np.flatnonzero(skipped > 0)[0])
        raise SequenceGapError(topic, name, int(skipped[skipped > 0].sum()), int(seq[first]))
