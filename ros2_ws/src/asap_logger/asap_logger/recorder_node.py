"""The ``recorder`` node: a thin rclpy shell over ``asap_logger.recorder.Recorder``.

Subscribes the configured topics with raw (serialized) delivery as they appear in the graph,
with QoS matched to their publishers, and pushes the CDR bytes with the middleware's receive
time. Episodes start and stop through ``~/start_episode`` / ``~/stop_episode`` and, in auto mode,
with the policy node's POLICY mode. Publishes ``~/episode_events`` (transient local) and a status
on ``/diagnostics``.
"""

from __future__ import annotations

import importlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import rclpy
from asap_msgs.msg import EpisodeEvent as EpisodeEventMsg
from asap_msgs.msg import PolicyStatus
from asap_msgs.srv import StartEpisode, StopEpisode
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rclpy.parameter import parameter_value_to_python
from rclpy.parameter_client import AsyncParameterClient
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message

from asap_core import interfaces
from asap_logger.bag import BagCfg, TopicInfo, qos_profile
from asap_logger.errors import ConfigError, DefinitionNotFoundError, StorageError
from asap_logger.msgdefs import load_definition
from asap_logger.recorder import EpisodeEvent, Recorder, RecorderCfg, auto_action, git_revision

if TYPE_CHECKING:  # annotation only: the robot's older rclpy (Humble) need not define it
    from rclpy.subscription import MessageInfo

DEFAULT_TOPICS = [
    interfaces.LOWSTATE,
    interfaces.LOWCMD,
    interfaces.POLICY_RECORD,
    interfaces.POLICY_STATUS,
    interfaces.ODOMETRY,
    interfaces.JOINT_STATES,
    interfaces.DIAGNOSTICS,
    interfaces.TF,
    interfaces.TF_STATIC,
]
# name: (default, description); every parameter is read-only (fixed at configure time).
PARAMETERS: dict[str, tuple[object, str]] = {
    "output_dir": ("~/asap_episodes", "episodes are written to <output_dir>/<episode_id>/"),
    "topics": (DEFAULT_TOPICS, "topics to record, subscribed when they appear (others are ignored)"),
    "status_topic": (interfaces.POLICY_STATUS, "asap_msgs/PolicyStatus of the policy node (auto mode)"),
    "auto_episodes": (True, "one episode per POLICY run of the policy node"),
    "chunk_period_s": (0.5, "close a chunk at most this long after its first message (crash loses <= this)"),
    "chunk_bytes": (4 << 20, "close a chunk at this size (bytes)"),
    "max_file_bytes": (0, "split to a new .mcap past this size (bytes, 0 = never)"),
    "max_file_duration_s": (0.0, "split to a new .mcap past this duration (s, 0 = never)"),
    "compression": ("", "chunk compression: '' (none), 'zstd' or 'lz4'"),
    "fsync": (True, "fsync every chunk (power-loss safety)"),
    "writer_period_s": (0.05, "writer thread drain period (s)"),
    "queue_limit_mb": (256, "backlog beyond which messages are dropped (MiB)"),
    "min_free_mb": (64, "refuse to start an episode with less free disk (MiB)"),
    "qos_depth": (1000, "history depth of the recording subscriptions"),
    "discovery_period_s": (1.0, "how often the graph is checked for new topics (s)"),
    "episode_metadata_json": ("", "JSON object stored in every episode (e.g. robot id, operator)"),
    "twin_node": (interfaces.TWIN_NODE, "node whose parameters describe the simulated twin ('' = none)"),
    "twin_parameters": (["profile", "clock_mode", "seed"], "twin_node parameters stored with each episode"),
}


class RecorderNode(Node):
    """Records configured topics into one rosbag2 MCAP bag per episode."""

    def __init__(self, **kwargs) -> None:
        super().__init__(interfaces.RECORDER_NODE, **kwargs)
        for name, (default, text) in PARAMETERS.items():
            self.declare_parameter(name, default, ParameterDescriptor(description=text, read_only=True))
        p = {name: self.get_parameter(name).value for name in PARAMETERS}
        self._params = p
        self._static_meta = self._parse_json(p["episode_metadata_json"], "episode_metadata_json")
        self._git = git_revision(Path(__file__).resolve().parent)
        cfg = RecorderCfg(
            output_dir=Path(p["output_dir"]).expanduser(),
            writer_period_s=p["writer_period_s"],
            queue_limit_bytes=p["queue_limit_mb"] << 20,
            min_free_bytes=p["min_free_mb"] << 20,
            bag=BagCfg(
                chunk_period_s=p["chunk_period_s"],
                chunk_bytes=p["chunk_bytes"],
                max_file_bytes=p["max_file_bytes"],
                compression=p["compression"],
                max_file_duration_s=p["max_file_duration_s"],
                fsync=p["fsync"],
            ),
        )
        self.recorder = Recorder(cfg, self._on_event)
        self._subscribed: dict[str, object] = {}
        self._skipped: set[str] = set()
        self._status: PolicyStatus | None = None
        self._mode: int | None = None
        self._twin: dict[str, object] = {}
        latched = QoSProfile(
            depth=10, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE
        )
        self._events = self.create_publisher(EpisodeEventMsg, interfaces.EPISODE_EVENTS, latched)
        self._diagnostics = self.create_publisher(DiagnosticArray, interfaces.DIAGNOSTICS, 10)
        self.create_service(StartEpisode, interfaces.START_EPISODE, self._start_srv)
        self.create_service(StopEpisode, interfaces.STOP_EPISODE, self._stop_srv)
        if p["auto_episodes"] and p["status_topic"] not in p["topics"]:
            raise ConfigError(
                f"auto_episodes needs status_topic {p['status_topic']!r} among the recorded topics"
            )
        self._twin_client: AsyncParameterClient | None = None  # created when the twin shows up
        self._twin_pending = False
        self.create_timer(p["discovery_period_s"], self._discover)
        self.create_timer(1.0, self._publish_diagnostics)
        self._discover()
        self.get_logger().info(
            f"recording {p['topics']} into {cfg.output_dir} (auto episodes: {p['auto_episodes']})"
        )

    @staticmethod
    def _parse_json(text: str, what: str) -> dict:
        if not text:
            return {}
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{what} is not valid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise ConfigError(f"{what} must be a JSON object, got {type(value).__name__}")
        return value

    # -- topics -----------------------------------------------------------------------------------
    def _discover(self) -> None:
        graph = dict(self.get_topic_names_and_types())
        for topic in self._params["topics"]:
            if topic in self._subscribed or topic in self._skipped or topic not in graph:
                continue
            publishers = self.get_publishers_info_by_topic(topic)
            if publishers:
                self._subscribe(topic, graph[topic][0], publishers)
        self._refresh_twin()

    def _subscribe(self, topic: str, msgtype: str, publishers: list) -> None:
        try:
            pkg, _, name = msgtype.split("/")
            msg_class = getattr(importlib.import_module(f"{pkg}.msg"), name)
            definition = load_definition(msgtype)
        except (ImportError, AttributeError, ValueError, DefinitionNotFoundError) as exc:
            self._skipped.add(topic)
            self.get_logger().warning(f"not recording {topic} ({msgtype}): {exc}")
            return
        offered = [p.qos_profile for p in publishers]
        reliable = all(q.reliability == ReliabilityPolicy.RELIABLE for q in offered)
        latched = all(q.durability == DurabilityPolicy.TRANSIENT_LOCAL for q in offered)
        qos = QoSProfile(
            depth=self._params["qos_depth"],
            reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
            durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE,
        )
        key = self.recorder.add_topic(TopicInfo(topic, definition, tuple(_qos_dict(q) for q in offered)))
        push = self.recorder.push
        if topic == self._params["status_topic"] and self._params["auto_episodes"]:
            push = self._status_pusher(push)
        taken: list = []

        def on_message(data: bytes, info: MessageInfo) -> None:
            # One executor wake-up per message costs ~0.3 ms in rclpy; so each wake-up also drains
            # whatever else this subscription holds (take_message, as rclpy's executor calls it).
            push(key, info["received_timestamp"], info["source_timestamp"], data)
            handle = taken[0].handle
            with handle:
                while (more := handle.take_message(msg_class, True)) is not None:
                    push(key, more[1]["received_timestamp"], more[1]["source_timestamp"], more[0])

        taken.append(self.create_subscription(msg_class, topic, on_message, qos, raw=True))
        self._subscribed[topic] = taken[0]
        self.get_logger().info(f"recording {topic} ({msgtype}, {qos.reliability.name.lower()})")

    def _status_pusher(self, push: Callable[[int, int, int, bytes], None]) -> Callable:
        """Auto mode: decode each (few Hz) status, so the status that starts an episode is its first
        message and the one that ends it its last."""

        def push_status(key: int, log_ns: int, publish_ns: int, data: bytes) -> None:
            msg = deserialize_message(data, PolicyStatus)
            self._status = msg
            action, self._mode = auto_action(self._mode, msg.mode), msg.mode
            if action == "start":
                self._auto(
                    self._start,
                    msg.motion_name or msg.policy_name or "policy",
                    "policy entered POLICY mode",
                    {},
                )
            push(key, log_ns, publish_ns, data)
            if action == "stop" and self.recorder.episode_id:
                fault = f" (fault: {msg.fault})" if msg.fault else ""
                self._auto(self.recorder.stop, f"policy left POLICY for {msg.mode_name}{fault}")

        return push_status

    def _auto(self, action: Callable, *args) -> None:
        try:
            action(*args)
        except StorageError as exc:
            self.get_logger().error(f"auto episode: {exc}")

    def _refresh_twin(self) -> None:
        """Fetch the twin's parameters once whenever it (re)appears in the graph."""
        twin = self._params["twin_node"]
        if not twin:
            return
        if twin not in self.get_node_names():
            self._twin = {}  # a restarted twin may run another profile
            return
        if self._twin_client is None:
            self._twin_client = AsyncParameterClient(self, twin)
        if self._twin or self._twin_pending or not self._twin_client.services_are_ready():
            return
        names = list(self._params["twin_parameters"])
        self._twin_pending = True

        def store(future) -> None:
            self._twin_pending = False
            self._twin.update(_twin_values(names, future))

        self._twin_client.get_parameters(names).add_done_callback(store)

    # -- episodes ---------------------------------------------------------------------------------
    def _metadata(self, reason: str, extra: dict) -> dict:
        status = self._status
        policy = (
            {}
            if status is None
            else {
                "name": status.policy_name,
                "sha256": status.policy_sha256,
                "motion": status.motion_name,
                "mode": status.mode_name,
            }
        )
        return {
            **self._static_meta,
            "start_reason": reason,
            "policy": policy,
            "twin": dict(self._twin),
            "git_revision": self._git,
            "recorder_parameters": self._params,
            "user": extra,
        }

    def _start(self, name: str, reason: str, extra: dict) -> tuple[str, Path]:
        return self.recorder.start(name, self._metadata(reason, extra))

    def _start_srv(
        self, request: StartEpisode.Request, response: StartEpisode.Response
    ) -> StartEpisode.Response:
        try:
            extra = self._parse_json(request.metadata_json, "metadata_json")
            eid, path = self._start(request.name, "service request", extra)
        except (StorageError, ConfigError) as exc:
            response.success, response.message = False, str(exc)
            self.get_logger().error(f"start_episode refused: {exc}")
            return response
        response.success, response.message, response.episode_id, response.bag_path = (
            True,
            "recording",
            eid,
            str(path),
        )
        return response

    def _stop_srv(self, request: StopEpisode.Request, response: StopEpisode.Response) -> StopEpisode.Response:
        try:
            event = self.recorder.stop(request.reason or "service request")
        except StorageError as exc:
            response.success, response.message = False, str(exc)
            return response
        response.success = event.kind.name == "STOPPED"
        response.message, response.bag_path, response.message_count = (
            event.reason,
            event.bag_path,
            event.message_count,
        )
        return response

    def _on_event(self, event: EpisodeEvent) -> None:
        msg = EpisodeEventMsg(
            event=event.kind.value,
            episode_id=event.episode_id,
            bag_path=event.bag_path,
            reason=event.reason,
            message_count=event.message_count,
        )
        msg.header.stamp = self.get_clock().now().to_msg()
        if self.context.ok():  # the last episode's stop comes during shutdown, with no one to publish to
            self._events.publish(msg)
        text = (f"episode {event.episode_id} {event.kind.name.lower()}: {event.reason} "
                f"({event.message_count} messages, {event.bag_path})")
        # two call sites: rclpy refuses one call site that logs at two severities
        if event.kind.name == "FAILED":
            self.get_logger().error(text)
        else:
            self.get_logger().info(text)

    # -- diagnostics ------------------------------------------------------------------------------
    def _publish_diagnostics(self) -> None:
        s = self.recorder.status()
        level, text = DiagnosticStatus.OK, f"recording {s.episode_id}" if s.episode_id else "idle"
        if s.dropped:
            level, text = DiagnosticStatus.WARN, f"{s.dropped} messages dropped (writer backlog)"
        if s.last_error:
            level, text = DiagnosticStatus.ERROR, s.last_error
        out = self.recorder.cfg.output_dir
        free = shutil.disk_usage(out).free >> 20 if out.exists() else -1
        values = {
            "episode": s.episode_id,
            "messages": s.message_count,
            "queued_bytes": s.queued_bytes,
            "dropped": s.dropped,
            "episodes_done": s.episodes_done,
            "output_dir": str(out),
            "free_mb": free,
            "topics": ",".join(sorted(self._subscribed)),
            "twin": json.dumps(self._twin),
        }
        status = DiagnosticStatus(
            level=level,
            name="asap_logger: recorder",
            message=text,
            hardware_id="",
            values=[KeyValue(key=k, value=str(v)) for k, v in values.items()],
        )
        array = DiagnosticArray(status=[status])
        array.header.stamp = self.get_clock().now().to_msg()
        self._diagnostics.publish(array)

    def destroy_node(self) -> None:
        """Close the open episode before the node goes."""
        self.recorder.shutdown()
        super().destroy_node()


def _qos_dict(q: QoSProfile) -> dict:
    return qos_profile(
        reliability=q.reliability.name.lower(),
        durability=q.durability.name.lower(),
        history=q.history.name.lower(),
        depth=q.depth,
        deadline_ns=q.deadline.nanoseconds,
        lifespan_ns=q.lifespan.nanoseconds,
        liveliness=q.liveliness.name.lower(),
        liveliness_lease_ns=q.liveliness_lease_duration.nanoseconds,
    )


def _twin_values(names: list[str], future) -> dict:
    result = future.result()
    if result is None:
        return {}
    return {n: parameter_value_to_python(v) for n, v in zip(names, result.values, strict=False) if v.type}


def main(args: list[str] | None = None) -> None:
    """Run the recorder until Ctrl-C / SIGTERM; the open episode is closed on the way out."""
    rclpy.init(args=args)
    node = RecorderNode()
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()
