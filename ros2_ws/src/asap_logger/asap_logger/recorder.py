"""The recorder's ROS-free core: episodes of raw messages -> one rosbag2 MCAP bag each.

Threads: subscription callbacks call ``push`` (an append to a deque, nothing else); one writer
thread owns the open bag, drains the deque every ``writer_period_s`` and closes a chunk at least
every ``chunk_period_s``, so a killed process loses at most about ``chunk_period_s +
writer_period_s`` of data. Episode start/stop travel through the same deque, so every message
lands in the episode that was open when it arrived. An ``OSError`` (disk full, directory gone)
fails the episode, never the process: the bag keeps every chunk written before the error.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from asap_logger import mcap_io
from asap_logger.bag import BagCfg, BagWriter, TopicInfo, bag_files, topic_counts, write_atomic
from asap_logger.errors import ConfigError, LoggerError, StorageError

log = logging.getLogger("asap_logger.recorder")
MODE_POLICY = 3
"""``asap_msgs/PolicyStatus.MODE_POLICY``: the auto mode records one episode per POLICY run."""


@dataclass(frozen=True, kw_only=True)
class RecorderCfg:
    """Recorder settings (the node fills it from its parameters)."""

    output_dir: Path
    """Episodes are created as ``<output_dir>/<episode_id>/``."""
    bag: BagCfg = field(default_factory=BagCfg)
    writer_period_s: float = 0.05
    """How often the writer thread drains the queue (s)."""
    queue_limit_bytes: int = 256 << 20
    """Messages beyond this backlog are dropped and counted (bytes)."""
    min_free_bytes: int = 64 << 20
    """Refuse to start an episode with less free disk than this (bytes)."""

    def __post_init__(self) -> None:
        if self.bag.chunk_period_s <= 0 or self.writer_period_s <= 0:
            raise ConfigError("chunk_period_s and writer_period_s must be > 0")
        if not 0 < self.bag.chunk_bytes <= mcap_io.MAX_CHUNK_BYTES:
            raise ConfigError(f"chunk_bytes must be in (0, {mcap_io.MAX_CHUNK_BYTES}] (what readers accept), "
                              f"got {self.bag.chunk_bytes}")
        if self.bag.compression not in ("", "zstd", "lz4"):
            raise ConfigError(f"compression must be '', 'zstd' or 'lz4', got {self.bag.compression!r}")


class EventKind(Enum):
    """Values equal ``asap_msgs/EpisodeEvent`` constants."""

    STARTED = 0
    STOPPED = 1
    FAILED = 2


@dataclass(frozen=True)
class EpisodeEvent:
    """An episode started, stopped or failed."""

    kind: EventKind
    episode_id: str
    bag_path: str
    reason: str
    message_count: int


@dataclass(frozen=True)
class RecorderStatus:
    """A snapshot for diagnostics."""

    episode_id: str
    """The open episode, empty when idle."""
    message_count: int
    queued_bytes: int
    dropped: int
    episodes_done: int
    last_error: str


def auto_action(previous_mode: int | None, mode: int) -> str | None:
    """What the auto mode does on a policy mode report: "start", "stop" or nothing."""
    if mode == MODE_POLICY and previous_mode != MODE_POLICY:
        return "start"
    if mode != MODE_POLICY and previous_mode == MODE_POLICY:
        return "stop"
    return None


def git_revision(path: Path) -> str:
    """``<sha>[-dirty]`` of the git checkout holding ``path``, or ``unknown``."""
    try:
        sha = subprocess.run(
            ["git", "-C", str(path), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(path), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return sha + ("-dirty" if dirty else "")


def episode_id(name: str, now: float) -> str:
    """``YYYYmmdd-HHMMSS_<name>`` with the name reduced to [A-Za-z0-9_-]."""
    label = re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-") or "episode"
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime(now)) + f"_{label}"


def write_json(path: Path, data: dict) -> None:
    """Write JSON atomically (see ``write_atomic``)."""
    write_atomic(path, json.dumps(data, indent=2, sort_keys=True, default=str))


def counts_on_disk(bag: Path) -> tuple[dict[str, int], list[str]]:
    """(topic -> messages, files) of a bag as a reader finds them: what a failed episode really holds."""
    try:
        files = bag_files(bag, None)
        return topic_counts([mcap_io.scan(f, strict=False) for f in files]), [f.name for f in files]
    except (LoggerError, OSError):  # the directory went away with the disk
        return {}, []


class _Episode:
    def __init__(self, eid: str, bag: BagWriter, meta: dict) -> None:
        self.id, self.bag, self.meta = eid, bag, meta
        self.channels: dict[int, int] = {}
        self.result: EpisodeEvent | None = None
        """Set once the episode is closed (stopped or failed)."""


class Recorder:
    """Episodes to bags. ``push`` may be called from any one thread; the rest from any thread."""

    def __init__(self, cfg: RecorderCfg, on_event: Callable[[EpisodeEvent], None]) -> None:
        self.cfg = cfg
        self._on_event = on_event
        self._topics: list[TopicInfo] = []
        self._queue: deque = deque()
        self._in_bytes = self._out_bytes = 0
        self._dropped = 0
        self._recording = False
        self._episode: _Episode | None = None
        self._episodes_done = 0
        self._last_error = ""
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._alive = True
        self._thread = threading.Thread(target=self._run, name="asap_logger_writer", daemon=True)
        self._thread.start()

    # -- hot path ---------------------------------------------------------------------------------
    def push(self, key: int, log_ns: int, publish_ns: int, data: bytes) -> None:
        """Queue one received message of topic ``key`` (no-op while no episode is open)."""
        if not self._recording:
            return
        if self._in_bytes - self._out_bytes > self.cfg.queue_limit_bytes:
            self._dropped += 1
            return
        self._in_bytes += len(data)
        self._queue.append((key, log_ns, publish_ns, data))

    # -- control ----------------------------------------------------------------------------------
    def add_topic(self, topic: TopicInfo) -> int:
        """Make a topic recordable; returns the key its messages are pushed with."""
        with self._lock:
            self._topics.append(topic)
            key = len(self._topics) - 1
        self._queue.append(("topic", key))
        return key

    @property
    def episode_id(self) -> str:
        """The open episode, empty when idle."""
        episode = self._episode
        return episode.id if episode else ""

    def start(self, name: str, metadata: dict) -> tuple[str, Path]:
        """Open a new episode bag. Raises ``StorageError`` (with the reason) if it cannot."""
        with self._lock:
            if self._episode is not None:
                raise StorageError(f"episode {self._episode.id} is still recording; stop it first")
            now = time.time()
            eid = self._unique(episode_id(name, now))
            path = self.cfg.output_dir / eid
            meta = {
                **metadata,
                "episode_id": eid,
                "name": name,
                "status": "recording",
                "start_time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
            }
            bag = self._open_bag(path, eid, meta)
            episode = _Episode(eid, bag, meta)
            self._episode = episode
            self._queue.append(("start", episode))
            self._recording = True
            self._last_error = ""
        self._wake.set()
        self._emit(EventKind.STARTED, episode, metadata.get("start_reason", ""))
        return eid, path

    def _unique(self, eid: str) -> str:
        out, n = eid, 1
        while (self.cfg.output_dir / out).exists():
            out, n = f"{eid}-{n}", n + 1
        return out

    def _open_bag(self, path: Path, eid: str, meta: dict) -> BagWriter:
        out, bag = self.cfg.output_dir, None
        try:
            out.mkdir(parents=True, exist_ok=True)
            if not os.access(out, os.W_OK):
                raise PermissionError(f"directory {out} is not writable")
            free = shutil.disk_usage(out).free
            if free < self.cfg.min_free_bytes:
                raise OSError(
                    f"only {free >> 20} MiB free in {out}, need {self.cfg.min_free_bytes >> 20} MiB"
                )
            bag = BagWriter(
                path, self.cfg.bag, custom_data={"episode_id": eid, "json": json.dumps(meta, default=str)}
            )
            write_json(path / "episode.json", meta)
        except OSError as exc:
            if bag is not None:
                bag.abort()
            self._last_error = f"cannot start episode {eid} in {out}: {exc}"
            raise StorageError(self._last_error) from exc
        return bag

    def stop(self, reason: str, timeout_s: float = 10.0) -> EpisodeEvent:
        """Close the open episode (waits for the writer); returns the STOPPED/FAILED event."""
        with self._lock:
            episode = self._episode
            if episode is None:
                raise StorageError("no episode is recording")
            self._recording = False
            done = threading.Event()
            result: list[EpisodeEvent] = []
            self._queue.append(("stop", episode, reason, done, result))
            self._episode = None
        self._wake.set()
        if not done.wait(timeout_s):
            raise StorageError(f"episode {episode.id} did not close within {timeout_s} s")
        return result[0]

    def status(self) -> RecorderStatus:
        """Counters for diagnostics."""
        episode = self._episode
        count = episode.bag.message_count if episode else 0
        return RecorderStatus(
            episode.id if episode else "",
            count,
            self._in_bytes - self._out_bytes,
            self._dropped,
            self._episodes_done,
            self._last_error,
        )

    def shutdown(self, reason: str = "recorder shutdown") -> None:
        """Stop the open episode (if any) and the writer thread."""
        if self._episode is not None:
            try:
                self.stop(reason)
            except StorageError as exc:
                log.error("%s", exc)
        self._alive = False
        self._wake.set()
        self._thread.join(timeout=10)

    # -- writer thread ----------------------------------------------------------------------------
    def _run(self) -> None:
        self._writing: _Episode | None = None
        while self._alive:
            self._wake.wait(self.cfg.writer_period_s)
            self._wake.clear()
            self._drain()

    def _drain(self) -> None:
        queue = self._queue
        while queue:
            item = queue.popleft()
            if type(item[0]) is int:
                self._out_bytes += len(item[3])
                if self._writing is not None:
                    try:
                        self._write(item)
                    except Exception as exc:  # any failure of the writer fails the episode, never the node
                        self._fail(self._writing, exc)
            else:
                self._control(item)
        if self._writing is not None:
            self._guard(self._writing.bag.tick)

    def _write(self, item: tuple) -> None:
        episode = self._writing
        assert episode is not None
        channel = episode.channels.get(item[0])
        if channel is None:
            self._register(item[0])
            channel = episode.channels[item[0]]
        episode.bag.write(channel, item[1], item[2], item[3])

    def _control(self, item: tuple) -> None:
        kind = item[0]
        if kind == "start":
            self._writing = item[1]
            with self._lock:
                keys = range(len(self._topics))
            for key in keys:
                self._guard(self._register, key)
        elif kind == "topic" and self._writing is not None:
            self._guard(self._register, item[1])
        elif kind == "stop":
            _, episode, reason, done, result = item
            result.append(episode.result or self._finish(episode, reason))
            done.set()

    def _register(self, key: int) -> None:
        episode = self._writing
        if episode is not None and key not in episode.channels:
            episode.channels[key] = episode.bag.add_topic(self._topics[key])

    def _guard(self, fn: Callable, *args) -> None:
        episode = self._writing
        assert episode is not None
        try:
            fn(*args)
        except Exception as exc:  # any failure of the writer fails the episode, never the node
            self._fail(episode, exc)

    def _fail(self, episode: _Episode, exc: Exception) -> None:
        detail = f"{type(exc).__name__}: {exc}"
        self._last_error = f"episode {episode.id} failed writing {episode.bag.path}: {detail}"
        log.error("%s", self._last_error)
        episode.meta.update(error=detail)
        episode.bag.abort()
        self._finish(episode, "storage error")

    def _finish(self, episode: _Episode, reason: str) -> EpisodeEvent:
        meta = episode.meta
        if "error" not in meta:
            try:
                episode.bag.close()
            except Exception as exc:  # the close itself can hit a full disk
                self._fail(episode, exc)
                assert episode.result is not None
                return episode.result
        failed = "error" in meta
        if failed:  # the open chunk (and maybe more) never reached the disk: count what did
            topics, files = counts_on_disk(episode.bag.path)
        else:
            topics, files = episode.bag.topic_message_counts(), [f.path for f in episode.bag.files]
        meta.update(
            status="failed" if failed else "complete",
            stop_reason=reason,
            stop_time=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            message_count=sum(topics.values()),
            topics=topics,
            files=files,
        )
        try:
            write_json(episode.bag.path / "episode.json", meta)
        except OSError as exc:
            log.error("episode %s: cannot update episode.json: %s", episode.id, exc)
        with self._lock:
            self._writing = None
            if self._episode is episode:
                self._episode = None
                self._recording = False
            self._episodes_done += 1
        kind = EventKind.FAILED if failed else EventKind.STOPPED
        episode.result = self._emit(kind, episode, meta["error"] if failed else reason, meta["message_count"])
        return episode.result

    def _emit(self, kind: EventKind, episode: _Episode, reason: str, count: int = 0) -> EpisodeEvent:
        event = EpisodeEvent(kind, episode.id, str(episode.bag.path), reason, count)
        try:
            self._on_event(event)
        except Exception:  # a broken listener must not take the writer down
            log.exception("episode event listener failed")
        return event
