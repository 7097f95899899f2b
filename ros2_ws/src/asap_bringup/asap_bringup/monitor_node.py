"""``monitor``: reference ghost, live skeleton, foot contacts, status text, tracking error for RViz/Foxglove.

A thin rclpy shell over :class:`asap_bringup.monitor_core.MonitorCore` (see its docstring for what is
computed and where the numbers come from). Inputs are stored as they arrive (the 500 Hz topics as raw
bytes, decoded only at the publish rate); a timer at ``rate_hz`` publishes:

- ``/monitor/markers`` (visualization_msgs/MarkerArray): namespaces ``reference`` (ghost points and
  bones), ``robot`` (measured points and bones), ``contacts`` (a disc under each foot, green in
  contact), ``status`` (text above the robot: policy, mode, phase, tracking error, base source, faults);
- ``/monitor/tracking_error_m`` and ``/monitor/tracking_error_local_m`` (std_msgs/Float32, only while
  the policy runs; the first only with a measured base);
- ``/monitor/reference`` (asap_msgs/ReferenceMotion: reference joints and their errors);
- ``/tf`` ``world -> pelvis`` from the base pose, when ``tf2_msgs`` is installed (full ROS 2 installs;
  not the PyPI wheels) and ``publish_tf`` is true;
- ``/diagnostics`` (1 Hz): ``asap_monitor: tracking``.

Names are :mod:`asap_core.interfaces`' (remappable with ``--ros-args -r``).
"""

from __future__ import annotations

import time
from dataclasses import fields

import rclpy
from asap_msgs.msg import PolicyRecord, PolicyStatus, ReferenceMotion
from builtin_interfaces.msg import Time as TimeMsg
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import Point, Quaternion
from nav_msgs.msg import Odometry
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rclpy.publisher import Publisher
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import JointState
from std_msgs.msg import ColorRGBA, Float32
from visualization_msgs.msg import Marker, MarkerArray

from asap_bringup.monitor_core import MonitorCfg, MonitorCore, MonitorFrame
from asap_core import interfaces

DESCRIPTIONS = {
    "rate_hz": "markers / errors / reference publish rate (Hz)",
    "frame_id": "frame of the markers; parent of the published base transform",
    "base_frame": "child frame of the published base transform (the URDF root link)",
    "odometry_timeout_s": "an /odometry pose older than this is ignored (s)",
    "contact_height_m": "a foot this close to its flat-standing height is drawn in contact (m)",
    "motion_path": "folders (':'-separated) searched for <motion>.npz when the motion is not shipped",
    "publish_tf": "publish frame_id -> base_frame on /tf (needs tf2_msgs)",
}
REFERENCE_RGBA = (1.0, 0.55, 0.0, 0.6)
ROBOT_RGBA = (0.1, 0.45, 1.0, 0.9)


def _rgba(r: float, g: float, b: float, a: float) -> ColorRGBA:
    return ColorRGBA(r=float(r), g=float(g), b=float(b), a=float(a))


def _points(array) -> list[Point]:
    return [Point(x=float(p[0]), y=float(p[1]), z=float(p[2])) for p in array]


class MonitorNode(Node):
    """The monitor node (see the module docstring)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(interfaces.MONITOR_NODE, **kwargs)
        defaults = MonitorCfg()
        values = {}
        for f in fields(MonitorCfg):
            descriptor = ParameterDescriptor(description=DESCRIPTIONS[f.name], read_only=True)
            values[f.name] = self.declare_parameter(f.name, getattr(defaults, f.name), descriptor).value
        self.cfg = MonitorCfg(**values)
        self.core = MonitorCore(self.cfg)
        if self.core.kinematics is None:
            self.get_logger().warning(f"no FK, status text only: {self.core.kinematics_error}")
        self._raw: dict[str, tuple[bytes, float]] = {}

        reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        latest = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT)
        self.create_subscription(PolicyStatus, interfaces.POLICY_STATUS, self._on_status, reliable)
        self.create_subscription(PolicyRecord, interfaces.POLICY_RECORD, self._on_record, latest)
        for topic, kind in ((interfaces.JOINT_STATES, JointState), (interfaces.ODOMETRY, Odometry)):
            self.create_subscription(kind, topic, self._store(topic), latest, raw=True)
        self._markers = self.create_publisher(MarkerArray, interfaces.MONITOR_MARKERS, reliable)
        self._error = self.create_publisher(Float32, interfaces.MONITOR_ERROR, reliable)
        self._error_local = self.create_publisher(Float32, interfaces.MONITOR_ERROR_LOCAL, reliable)
        self._reference = self.create_publisher(ReferenceMotion, interfaces.MONITOR_REFERENCE, reliable)
        self._diag = self.create_publisher(DiagnosticArray, interfaces.DIAGNOSTICS, reliable)
        self._tf: Publisher | None = None
        self._tf_types: tuple[type, type] | None = None
        if self.cfg.publish_tf:
            self._tf_types = _tf_types()
            if self._tf_types is None:
                self.get_logger().info(
                    "tf2_msgs not installed: no /tf from the monitor (RViz's TF and "
                    "RobotModel displays need a full ROS 2 install)"
                )
            else:
                self._tf = self.create_publisher(self._tf_types[0], interfaces.TF, reliable)
        self._last = MonitorFrame(("starting",))
        self.create_timer(1.0 / self.cfg.rate_hz, self._publish)
        self.create_timer(1.0, self._publish_diagnostics)
        self.get_logger().info(f"monitor up: {self.cfg.rate_hz:g} Hz, markers in {self.cfg.frame_id!r}")

    # -- inputs ---------------------------------------------------------------------------------

    def _store(self, topic: str):
        def callback(data: bytes) -> None:
            self._raw[topic] = (data, time.monotonic())

        return callback

    def _on_status(self, msg: PolicyStatus) -> None:
        self.core.set_status(
            policy_name=msg.policy_name,
            policy_sha256=msg.policy_sha256,
            motion_name=msg.motion_name,
            mode=msg.mode,
            phase=msg.phase,
            fault=msg.fault,
        )

    def _on_record(self, msg: PolicyRecord) -> None:
        self.core.set_phase(msg.mode, msg.phase)

    def _decode_inputs(self) -> None:
        if (raw := self._raw.pop(interfaces.JOINT_STATES, None)) is not None:
            js = deserialize_message(raw[0], JointState)
            self.core.set_joints(js.name, js.position)
        if (raw := self._raw.pop(interfaces.ODOMETRY, None)) is not None:
            pose = deserialize_message(raw[0], Odometry).pose.pose
            self.core.set_base(
                (pose.position.x, pose.position.y, pose.position.z),
                (pose.orientation.w, pose.orientation.x, pose.orientation.y, pose.orientation.z),
                raw[1],
            )

    # -- outputs --------------------------------------------------------------------------------

    def _publish(self) -> None:
        self._decode_inputs()
        frame = self._last = self.core.frame(time.monotonic())
        stamp = self.get_clock().now().to_msg()
        self._markers.publish(MarkerArray(markers=self._marker_list(frame, stamp)))
        if frame.error_m is not None:
            self._error.publish(Float32(data=frame.error_m))
        if frame.error_local_m is not None:
            self._error_local.publish(Float32(data=frame.error_local_m))
        if frame.ref_joint_pos is not None and frame.joint_error is not None:
            msg = ReferenceMotion(
                motion_name=self.core.motion_name,
                phase=self.core.phase,
                joint_names=list(frame.joint_names),
                joint_pos=frame.ref_joint_pos.tolist(),
                joint_pos_error=frame.joint_error.tolist(),
                mean_abs_joint_error=float(abs(frame.joint_error).mean()),
            )
            msg.header.stamp = stamp
            self._reference.publish(msg)
        self._publish_tf(frame, stamp)

    def _marker(self, ns: str, mid: int, kind: int, stamp: TimeMsg, rgba, scale: float) -> Marker:
        m = Marker(ns=ns, id=mid, type=kind, action=Marker.ADD)
        m.header.frame_id, m.header.stamp = self.cfg.frame_id, stamp
        m.pose.orientation.w = 1.0
        m.scale.x = m.scale.y = m.scale.z = scale
        m.color = _rgba(*rgba)
        return m

    def _marker_list(self, frame: MonitorFrame, stamp: TimeMsg) -> list[Marker]:
        clear = Marker(action=Marker.DELETEALL)
        clear.header.frame_id, clear.header.stamp = self.cfg.frame_id, stamp
        out = [clear]
        edges = self.core.kinematics.edges if self.core.kinematics is not None else ()
        for ns, points, rgba in (
            ("reference", frame.ref_points, REFERENCE_RGBA),
            ("robot", frame.live_points, ROBOT_RGBA),
        ):
            if points is None:
                continue
            joints = self._marker(ns, 0, Marker.SPHERE_LIST, stamp, rgba, 0.05)
            joints.points = _points(points)
            bones = self._marker(ns, 1, Marker.LINE_LIST, stamp, rgba, 0.015)
            bones.points = _points([points[i] for edge in edges for i in edge])
            out += [joints, bones]
        for k, (foot, (pos, contact)) in enumerate(sorted(frame.feet.items())):
            disc = self._marker(
                "contacts",
                k,
                Marker.CYLINDER,
                stamp,
                (0.1, 0.85, 0.2, 0.9) if contact else (0.5, 0.5, 0.5, 0.4),
                0.12,
            )
            disc.scale.z = 0.01
            disc.pose.position = Point(x=float(pos[0]), y=float(pos[1]), z=0.005)
            disc.text = f"{foot}: {'contact' if contact else 'swing'}"
            out.append(disc)
        text = self._marker("status", 0, Marker.TEXT_VIEW_FACING, stamp, (1.0, 1.0, 1.0, 1.0), 0.07)
        anchor = frame.base.pos if frame.base is not None else (0.0, 0.0, 0.8)
        text.pose.position = Point(x=float(anchor[0]), y=float(anchor[1]), z=float(anchor[2]) + 1.0)
        text.text = "\n".join(frame.status_lines)
        out.append(text)
        return out

    def _publish_tf(self, frame: MonitorFrame, stamp: TimeMsg) -> None:
        if self._tf is None or self._tf_types is None or frame.base is None:
            return
        tf_message, transform_stamped = self._tf_types
        t = transform_stamped()
        t.header.stamp, t.header.frame_id, t.child_frame_id = stamp, self.cfg.frame_id, self.cfg.base_frame
        p, q = frame.base.pos, frame.base.quat_wxyz
        t.transform.translation.x, t.transform.translation.y, t.transform.translation.z = map(float, p)
        t.transform.rotation = Quaternion(w=float(q[0]), x=float(q[1]), y=float(q[2]), z=float(q[3]))
        self._tf.publish(tf_message(transforms=[t]))

    def _publish_diagnostics(self) -> None:
        f, core = self._last, self.core
        if core.kinematics is None:
            level, message = DiagnosticStatus.WARN, "no forward kinematics: status text only"
        elif core.motion_name and core.reference() is None:
            level, message = DiagnosticStatus.WARN, f"reference {core.motion_name!r} unavailable"
        else:
            level, message = DiagnosticStatus.OK, "; ".join(f.status_lines[-2:])
        values = {
            "motion": core.motion_name,
            "mode": core.mode_name,
            "phase": f"{core.phase:.3f}",
            "base_source": f.base.source if f.base is not None else "",
            "tracking_error_m": "" if f.error_m is None else f"{f.error_m:.4f}",
            "tracking_error_local_m": "" if f.error_local_m is None else f"{f.error_local_m:.4f}",
            "contacts": ",".join(k for k, (_, c) in sorted(f.feet.items()) if c),
        }
        status = DiagnosticStatus(
            level=level,
            name="asap_monitor: tracking",
            hardware_id="unitree_g1",
            message=message,
            values=[KeyValue(key=k, value=str(v)) for k, v in values.items()],
        )
        msg = DiagnosticArray(status=[status])
        msg.header.stamp = self.get_clock().now().to_msg()
        self._diag.publish(msg)


def _tf_types() -> tuple[type, type] | None:
    """(TFMessage, TransformStamped) where ``tf2_msgs`` is installed, else None."""
    try:  # imported here: tf2_msgs is optional (absent from the PyPI ROS wheels)
        from geometry_msgs.msg import TransformStamped
        from tf2_msgs.msg import TFMessage
    except ImportError:
        return None
    return TFMessage, TransformStamped


def main(args: list[str] | None = None) -> None:
    """Run the monitor until Ctrl-C / SIGTERM."""
    rclpy.init(args=args)
    node = None
    try:
        node = MonitorNode()
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()
