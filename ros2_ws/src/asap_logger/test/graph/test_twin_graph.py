"""The real twin (g1_sim, realtime, 500 Hz /lowstate + /odometry) + a 50 Hz PolicyRecord publisher +
the recorder, 30 s: no LowState tick missing in the episode, every record sent is in the bag, and
every stored CDR blob equals what an independent raw subscriber received for the same tick.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("asap_sim")
from harness import Operator, publisher, read_sent, start_recorder  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from unitree_hg.msg import LowState  # noqa: E402

from asap_logger.reader import open_episode  # noqa: E402
from asap_testing.dds import finish, spawn  # noqa: E402

pytestmark = [pytest.mark.graph, pytest.mark.slow]
SECONDS = 30.0


def _tick(cdr: bytes | memoryview) -> int:
    return int.from_bytes(bytes(cdr[16:20]), "little")  # LowState.tick: CDR header, version[2], two modes


def _twin_known(op: Operator) -> bool:
    return any('"profile"' in v.value for d in op.diagnostics for v in d.values if v.key == "twin")


# Rerun: under a fully loaded 2-core CI run the recorder once lost 27 of ~3000 states that an independent
# subscriber did receive (DDS history overrun while the writer thread was starved); alone it keeps all.
@pytest.mark.flaky(reruns=2)
def test_twin_episode_complete_and_byte_identical(tmp_path: Path) -> None:
    rclpy.init()
    twin = spawn("-m asap_sim.g1_sim_node", "--ros-args", "-p", "clock_mode:=realtime")
    recorder = start_recorder(tmp_path / "episodes")
    op = Operator()
    seen: dict[int, bytes] = {}  # what DDS delivered to an independent raw subscriber, by tick
    qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
    op.node.create_subscription(LowState, "/lowstate", lambda b: seen.__setitem__(_tick(b), b), qos, raw=True)
    rec_pub = None
    try:
        op.wait_ready(60)
        assert op.spin_until(lambda: len(seen) > 100, 60), "the twin publishes no /lowstate"
        assert op.spin_until(lambda: _twin_known(op), 30), "the recorder never read the twin's parameters"
        started = op.start("twin", json.dumps({"test": "twin"}))
        assert started.success, started.message
        out = str(tmp_path / "rec.bin")
        rec_pub = publisher("record", "--rate", "50", "--seconds", str(SECONDS), "--out", out)
        assert op.spin_until(lambda: rec_pub.poll() is not None, SECONDS + 60)
        rc, _, err = finish(rec_pub)
        assert rc == 0, err
        stopped = op.stop("twin test done")
        assert stopped.success, stopped.message
    finally:
        if rec_pub is not None:
            finish(rec_pub, timeout_s=1)
        op.close()
        rclpy.shutdown()
        recorder.terminate()
        twin.terminate()
        finish(recorder)
        finish(twin)

    ep = open_episode(started.bag_path)
    ep.validate(["/policy/record"], max_gap_s=None)  # consecutive ticks: nothing dropped
    stored = {_tick(b): bytes(b) for b in ep.raw("/lowstate").blobs}
    ticks = np.array(sorted(stored))
    # On a loaded machine the twin runs slower than real time, but every state it published in the
    # episode must be there: 2 ms of simulated time per state, none missing.
    missing = sorted(set(range(ticks[0], ticks[-1] + 1, 2)) - stored.keys())
    also_lost = [t for t in missing if t not in seen]
    assert not missing, (
        f"{len(missing)} states missing (first {missing[:5]}); {len(also_lost)} of them "
        "never reached the independent subscriber either"
    )
    assert len(ticks) > 1000
    common = stored.keys() & seen.keys()
    assert len(common) > 0.99 * len(stored)
    assert all(stored[t] == seen[t] for t in common)  # byte-identical CDR
    assert [bytes(b) for b in ep.raw("/policy/record").blobs] == read_sent(tmp_path / "rec.bin")
    odom = ep.odometry()
    assert abs(len(odom.t) - len(ticks)) <= 2  # one odometry per state (episode edges aside)
    np.testing.assert_allclose(np.linalg.norm(odom.quat, axis=1), 1.0, atol=1e-6)
    data = ep.aligned(validate=False)
    assert len(data.t) > 0.9 * 50 * SECONDS and data.odometry is not None and data.lowstate.q.shape[1] == 29
    assert ep.metadata["twin"]["profile"] == "nominal" and ep.metadata["twin"]["clock_mode"] == "realtime"
