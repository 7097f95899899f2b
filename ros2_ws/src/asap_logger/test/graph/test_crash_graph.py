"""Crash safety over DDS: SIGKILL mid-episode loses <= 1 s; a full disk fails the episode, not the node."""

from __future__ import annotations

import os
import random
import resource
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

rclpy = pytest.importorskip("rclpy")
from asap_msgs.srv import StartEpisode  # noqa: E402
from diagnostic_msgs.msg import DiagnosticStatus  # noqa: E402
from harness import Operator, publisher, start_recorder  # noqa: E402

from asap_logger.mcap_io import scan  # noqa: E402
from asap_logger.reader import open_episode  # noqa: E402
from asap_logger.repair import reindex  # noqa: E402
from asap_testing.dds import finish  # noqa: E402

pytestmark = [pytest.mark.graph, pytest.mark.slow]


def _recorded(bag: Path) -> int:
    files = list(bag.glob("*.mcap"))
    return scan(files[0], strict=False).message_count if files else 0


def test_sigkill_loses_at_most_one_second(tmp_path: Path) -> None:
    rclpy.init()
    recorder = start_recorder(tmp_path, "chunk_period_s:=0.5")
    op = Operator()
    pub = None
    try:
        op.wait_ready()
        started = op.start("killed")
        assert started.success, started.message
        pub = publisher("lowstate", "--rate", "500", "--seconds", "60")
        bag = Path(started.bag_path)
        assert op.spin_until(lambda: _recorded(bag) >= 1000, 60), "the recorder never flushed 2 s of data"
        at = time.monotonic() + random.uniform(0.0, 0.5)  # kill at a random phase of the chunk period
        op.spin_until(lambda: time.monotonic() >= at, 1.0)
        os.kill(recorder.pid, signal.SIGKILL)
        killed_ns = time.time_ns()
        recorder.wait(10)
    finally:
        if pub is not None:
            pub.terminate()
            finish(pub)
        op.close()
        rclpy.shutdown()
        finish(recorder, timeout_s=1)
    assert recorder.returncode == -signal.SIGKILL
    assert not (bag / "metadata.yaml").exists()
    ep = open_episode(bag)  # opens as is, without repair
    ls = ep.lowstate()
    lost_s = (killed_ns - int(ls.t_ns[-1])) * 1e-9
    print(f"SIGKILL: {len(ls.tick)} messages kept, last one {lost_s * 1e3:.0f} ms before the kill")
    assert lost_s <= 1.0
    ep.validate(["/lowstate"], max_gap_s=None)  # what is kept has consecutive ticks (no gap check: loaded CI)
    report = reindex(bag)
    assert report.closed_files and report.message_count == sum(ep.counts.values())
    repaired = open_episode(bag)
    assert repaired.issues == [] and repaired.counts == ep.counts


def _is_error(status: DiagnosticStatus) -> bool:
    return status.level == DiagnosticStatus.ERROR


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 3 MiB tmpfs (unmounted afterwards), or None where mounting is not allowed."""
    disk = tmp_path / f"disk-{uuid.uuid4().hex[:6]}"
    disk.mkdir()
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(disk)], capture_output=True)
    yield disk, mount.returncode == 0
    if mount.returncode == 0:
        subprocess.run(["umount", "-l", str(disk)], check=False)


FILE_LIMIT = 1_500_000
"""Where tmpfs cannot be mounted (CI containers), files above this many bytes fail with EFBIG instead."""


def _ignore_sigxfsz() -> None:
    """In the recorder's process: a write past RLIMIT_FSIZE fails with EFBIG instead of killing it."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def test_disk_full_fails_the_episode_not_the_node(small_disk: tuple[Path, bool]) -> None:
    disk, mounted = small_disk
    extra = {} if mounted else {"preexec_fn": _ignore_sigxfsz}
    rclpy.init()
    recorder = start_recorder(disk, "chunk_period_s:=0.1", "min_free_mb:=0", "fsync:=false", **extra)
    op = Operator()
    try:
        op.wait_ready()
        first = op.call(op.start_client, StartEpisode.Request(name="first"), timeout_s=60.0)  # a loaded CI
        pub = publisher("lowstate", "--rate", "500", "--seconds", "0.6")
        assert op.spin_until(lambda: pub.poll() is not None, 60)
        assert finish(pub)[0] == 0
        assert op.stop("first done").success
        kept = {p.name: p.read_bytes() for p in Path(first.bag_path).iterdir()}
        if not mounted:  # the "disk" fills from here on (the start-up and the first episode write freely)
            resource.prlimit(recorder.pid, resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))

        second = op.start("second")
        assert second.success, second.message
        pub = publisher("lowstate", "--rate", "500", "--seconds", "30")
        assert op.spin_until(lambda: any(e.event == 2 for e in op.events), 60), "no FAILED event"
        pub.terminate()
        finish(pub)
        failed = next(e for e in op.events if e.event == 2)
        assert op.spin_until(lambda: any(map(_is_error, op.diagnostics)), 5), "no ERROR on /diagnostics"
        error = next(filter(_is_error, op.diagnostics))
        assert recorder.poll() is None, "the recorder died"
        answer = op.start("third")  # still serving: either refused with a reason or started
        assert answer.success or answer.message
    finally:
        op.close()
        rclpy.shutdown()
        recorder.terminate()
        code, _, err = finish(recorder)
    reason = "No space left on device" if mounted else "File too large"
    assert reason in failed.reason and reason in error.message and failed.episode_id in error.message
    assert "[ERROR]" in err and f"{failed.episode_id} failed: {failed.reason}" in err  # logged as an error
    assert "Traceback" not in err, err[-2000:]  # every event reached the log and /recorder/episode_events
    assert code == 0
    assert {p.name: p.read_bytes() for p in Path(first.bag_path).iterdir()} == kept  # untouched
    assert open_episode(first.bag_path).counts["/lowstate"] == 300
    assert open_episode(second.bag_path).counts["/lowstate"] > 0  # readable up to the failure
