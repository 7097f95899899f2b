"""Run the recorder node as a process and drive it over DDS the way an operator would."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import rclpy
from asap_msgs.msg import EpisodeEvent
from asap_msgs.srv import StartEpisode, StopEpisode
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

from asap_testing.dds import spawn, spin_until

HERE = Path(__file__).parent
PUBLISHER = HERE / "stream_publisher.py"


def start_recorder(output_dir: Path, *params: str, **popen_kwargs):
    """The recorder node in its own process (auto episodes off, fast discovery)."""
    args = [
        "--ros-args",
        "-p",
        f"output_dir:={output_dir}",
        "-p",
        "auto_episodes:=false",
        "-p",
        "discovery_period_s:=0.2",
    ]
    for p in params:
        args += ["-p", p]
    return spawn("-m asap_logger.recorder_node", *args, **popen_kwargs)


def read_sent(path: Path) -> list[bytes]:
    """The blobs a stream_publisher wrote with ``--out``."""
    data, out, pos = path.read_bytes(), [], 0
    while pos < len(data):
        (n,) = struct.unpack_from("<I", data, pos)
        out.append(data[pos + 4 : pos + 4 + n])
        pos += 4 + n
    return out


class Operator:
    """A test node with the recorder's services, its episode events and /diagnostics."""

    def __init__(self) -> None:
        self.node = rclpy.create_node("logger_test_operator")
        self.start_client = self.node.create_client(StartEpisode, "/recorder/start_episode")
        self.stop_client = self.node.create_client(StopEpisode, "/recorder/stop_episode")
        self.events: list[EpisodeEvent] = []
        self.diagnostics: list = []
        latched = QoSProfile(
            depth=10, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE
        )
        self.node.create_subscription(EpisodeEvent, "/recorder/episode_events", self.events.append, latched)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 10)

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        self.diagnostics += [s for s in msg.status if s.name == "asap_logger: recorder"]

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        assert self.start_client.wait_for_service(timeout_sec=timeout_s), "recorder services never appeared"

    def call(self, client, request, timeout_s: float = 20.0):
        future = client.call_async(request)
        assert spin_until(self.node, future.done, timeout_s), f"{client.srv_name} did not answer"
        return future.result()

    def start(self, name: str, metadata_json: str = "") -> StartEpisode.Response:
        return self.call(self.start_client, StartEpisode.Request(name=name, metadata_json=metadata_json))

    def stop(self, reason: str = "test") -> StopEpisode.Response:
        return self.call(self.stop_client, StopEpisode.Request(reason=reason))

    def spin_until(self, predicate, timeout_s: float) -> bool:
        return spin_until(self.node, predicate, timeout_s)

    def close(self) -> None:
        self.node.destroy_node()


def publisher(kind: str, *args: str):
    """A stream_publisher process."""
    return spawn(PUBLISHER, kind, *args)


__all__ = ["Operator", "publisher", "read_sent", "start_recorder", "sys"]
