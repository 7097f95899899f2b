"""Auto mode over DDS: an episode per POLICY run of the policy node, with its metadata and reasons."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

rclpy = pytest.importorskip("rclpy")
from asap_msgs.msg import PolicyStatus  # noqa: E402
from harness import Operator, start_recorder  # noqa: E402

from asap_logger.reader import open_episode  # noqa: E402
from asap_testing.dds import finish  # noqa: E402

pytestmark = pytest.mark.graph
SHA = "ab" * 32


def _status(mode: int, name: str, fault: str = "") -> PolicyStatus:
    return PolicyStatus(
        mode=mode, mode_name=name, fault=fault, policy_name="kick_v3", policy_sha256=SHA, motion_name="kick"
    )


def test_one_episode_per_policy_run(tmp_path: Path) -> None:
    rclpy.init()
    recorder = start_recorder(tmp_path, "auto_episodes:=true")
    op = Operator()
    pub = op.node.create_publisher(PolicyStatus, "/policy/status", 10)

    def publish_until(msg: PolicyStatus, predicate, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not predicate():
            pub.publish(msg)
            op.spin_until(predicate, 0.1)
        return predicate()

    try:
        op.wait_ready()
        assert op.spin_until(lambda: pub.get_subscription_count() >= 1, 30)
        publish_until(_status(2, "HOLD"), lambda: False, 0.5)  # no episode while holding
        assert not op.events
        assert publish_until(_status(3, "POLICY"), lambda: len(op.events) >= 1, 20), "no episode started"
        assert publish_until(_status(4, "DAMPING", "tilt 0.9 rad"), lambda: len(op.events) >= 2, 20)
        publish_until(_status(4, "DAMPING"), lambda: False, 0.5)  # still DAMPING: nothing new
    finally:
        op.close()
        rclpy.shutdown()
        recorder.terminate()
        code, _, err = finish(recorder)
    assert code == 0, err[-2000:]
    started, stopped = op.events[:2]
    assert (started.event, stopped.event, len(op.events)) == (0, 1, 2)
    assert (
        started.episode_id.endswith("_kick")
        and stopped.reason == "policy left POLICY for DAMPING (fault: tilt 0.9 rad)"
    )
    meta = json.loads((Path(stopped.bag_path) / "episode.json").read_text())
    assert meta["policy"] == {"name": "kick_v3", "sha256": SHA, "motion": "kick", "mode": "POLICY"}
    assert meta["start_reason"] == "policy entered POLICY mode" and meta["status"] == "complete"
    modes = open_episode(stopped.bag_path).decode("/policy/status", ["mode"])["mode"][:, 0]
    assert modes[0] == 3 and modes[-1] == 4  # the statuses that opened and closed the episode are in it
