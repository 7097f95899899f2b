"""Three processes over DDS for 30 s: 500 Hz LowState + 50 Hz PolicyRecord publishers and the recorder.

The bag must hold every message the publishers sent, byte for byte (zero drops, raw CDR), and
read back through the ROS-free reader with consecutive ticks.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
from harness import Operator, publisher, read_sent, start_recorder  # noqa: E402

from asap_logger.reader import open_episode  # noqa: E402
from asap_testing.dds import finish  # noqa: E402

pytestmark = [pytest.mark.graph, pytest.mark.slow]
SECONDS = 30.0


def test_every_message_recorded_byte_identical(tmp_path: Path) -> None:
    rclpy.init()
    recorder = start_recorder(tmp_path / "episodes")
    op = Operator()
    procs = []
    try:
        op.wait_ready()
        started = op.start("graph", json.dumps({"operator": "pytest"}))
        assert started.success, started.message
        seconds = ("--seconds", str(SECONDS))
        procs = [
            publisher("lowstate", "--rate", "500", *seconds, "--out", str(tmp_path / "ls.bin")),
            publisher("record", "--rate", "50", *seconds, "--out", str(tmp_path / "rec.bin")),
        ]
        # publishing is paced to 500 Hz but may fall behind on a loaded machine: wait generously
        assert op.spin_until(lambda: all(p.poll() is not None for p in procs), 4 * SECONDS + 60)
        outputs = [finish(p) for p in procs]
        stopped = op.stop("publishers done")
        assert op.spin_until(lambda: len(op.events) >= 2, 5)
    finally:
        for p in procs:
            finish(p, timeout_s=1)
        op.close()
        rclpy.shutdown()
        recorder.terminate()
        code, _, err = finish(recorder)
    for rc, out, perr in outputs:
        assert rc == 0 and out.startswith("started"), perr
    assert code == 0, err[-2000:]
    assert stopped.success and stopped.bag_path == started.bag_path
    assert [e.event for e in op.events] == [0, 1] and op.events[1].message_count == stopped.message_count

    sent_ls, sent_rec = read_sent(tmp_path / "ls.bin"), read_sent(tmp_path / "rec.bin")
    assert len(sent_ls) == int(500 * SECONDS) and len(sent_rec) == int(50 * SECONDS)
    ep = open_episode(started.bag_path)
    assert [bytes(b) for b in ep.raw("/lowstate").blobs] == sent_ls  # zero drops, byte-identical
    assert [bytes(b) for b in ep.raw("/policy/record").blobs] == sent_rec
    ep.validate(["/lowstate", "/policy/record"], max_gap_s=None)  # consecutive ticks, no time reversal
    np.testing.assert_array_equal(ep.lowstate().tick, np.arange(len(sent_ls)))
    assert ep.policy().observation.shape == (len(sent_rec), 380)
    assert ep.metadata["status"] == "complete" and ep.metadata["user"] == {"operator": "pytest"}
    assert ep.metadata["stop_reason"] == "publishers done" and ep.metadata["git_revision"]
