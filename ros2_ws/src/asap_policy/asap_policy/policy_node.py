"""policy_node: runs a policy artifact on the G1 (or its twin) at the artifact's rate, safely.

A thin rclpy shell over the ROS-free control loop (``asap_policy.control_loop``: deadlines, command
writer, stall watchdog, hot-swap hand-over), whose tick is ``asap_core.control.Controller``. The node
goes through the steps of a ros2_controllers controller, which ``main`` takes in order:

- ``configure()``: parameters, the initial policy (fail fast), the controller and the loop;
- ``activate()``: publishers, the /lowstate subscription, services, timers, the loader, then the
  threads: from here on the node commands the robot;
- ``deactivate()``: stop the threads, leave an actively held robot damped, take down what
  ``activate()`` made; a later ``activate()`` starts with DAMPING latched.

(Plain methods, not an ``rclpy.lifecycle`` node: the asap_policy README, "Steps", says why.)

Threads (while active):

- control thread: absolute deadlines on the node clock (steady time, or sim time with
  ``use_sim_time``); each tick decodes the newest raw /lowstate, runs the controller, publishes
  /lowcmd at once, then the per-tick record and joint states;
- command writer: repeats the latest command at ``writer_rate_hz`` between ticks and, if no tick
  completes for ``stall_timeout_ms``, sends DAMPING on its own and latches the fault;
- executor (``asap_policy.executor.InlineExecutor``): the raw /lowstate callback (stores bytes
  only) and /clock in the spinning thread; SetMode, LoadPolicy and the timers (the /lowcmd
  publisher check, status, diagnostics) each on a pool of their own, so a load never delays a
  mode request; the load itself runs on the one loader thread (``asap_policy.loader``).

Nothing raises out of the node once active: a fault or an internal error (control tick, any
callback, the writer) latches DAMPING, logged once; service callbacks always answer, with the reason.
"""

from __future__ import annotations

import array
import signal
import threading
import time
from typing import Literal

import numpy as np
import rclpy
from asap_msgs.msg import PolicyRecord, PolicyStatus
from asap_msgs.srv import LoadPolicy, SetMode
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.callback_groups import CallbackGroup, MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.clock import JumpThreshold
from rclpy.duration import Duration
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions
from rclpy.time import Time
from sensor_msgs.msg import JointState
from unitree_hg.msg import LowCmd, LowState

from asap_core import g1, interfaces
from asap_core.control import Controller, LoadedPolicy, RobotState
from asap_core.modes import Mode, Transition, request_event
from asap_policy import params
from asap_policy.control_loop import ControlLoop, Outputs, TickReport, TickRequest, standing_state
from asap_policy.executor import InlineExecutor
from asap_policy.loader import LoadRefusedError, PolicyLoader, prepare
from asap_policy.motion_switcher import MotionSwitcherClient
from asap_policy.motor_health import motor_health

LOWCMD_CHECK_PERIOD_S = 0.2
"""How often the graph is searched for another /lowcmd publisher."""

LifecycleState = Literal["unconfigured", "inactive", "active"]
"""The primary states of a ROS 2 lifecycle node that this node goes through."""


def _descriptor(p: params.Param) -> ParameterDescriptor:
    d = ParameterDescriptor(description=p.description, read_only=True)
    if p.choices:
        d.additional_constraints = f"one of {list(p.choices)}"
    if p.bounds and isinstance(p.default, float):
        d.floating_point_range = [FloatingPointRange(from_value=float(p.bounds[0]),
                                                     to_value=float(p.bounds[1]))]
    elif p.bounds and isinstance(p.default, int) and not isinstance(p.default, bool):
        d.integer_range = [IntegerRange(from_value=int(p.bounds[0]), to_value=int(p.bounds[1]), step=1)]
    return d


class PolicyNode(Node):
    """The policy node (see the module docstring): ``configure()``, ``activate()``, then spin it in
    an ``InlineExecutor`` with ``offloaded_callbacks``; ``deactivate()`` to stop."""

    values: params.Validated
    """Validated parameters (from ``configure()``)."""
    loop: ControlLoop
    """The control loop, its controller and its stats (from ``configure()``)."""
    offloaded_callbacks: dict[CallbackGroup, int]
    """Callback groups that block -> pool threads for each: the executor's ``offload`` argument."""

    def __init__(self, **kwargs) -> None:
        super().__init__(interfaces.POLICY_NODE, **kwargs)
        self.lifecycle_state: LifecycleState = "unconfigured"

    # -- lifecycle ------------------------------------------------------------------------------

    def configure(self) -> None:
        """Declare and validate the parameters, load ``policy_path`` (an artifact that LoadPolicy
        would refuse is an error here, not a warning later), build the controller and the loop.
        Raises ValueError (parameters) or RuntimeError (the artifact); nothing is published yet."""
        self._expect("unconfigured", "configure")
        for p in params.PARAMS:
            self.declare_parameter(p.name, p.default, _descriptor(p))
        self.values = v = params.validate({p.name: self.get_parameter(p.name).value for p in params.PARAMS})
        policy = self._load_initial(v["policy_path"])
        self._dt = policy.artifact.metadata.control_dt if policy else 1.0 / v["control_rate_hz"]
        self._sim_time = bool(self.get_parameter("use_sim_time").value)
        clock = self.get_clock()  # ROS time: sim time under use_sim_time; stamps otherwise
        now_ns = (lambda: clock.now().nanoseconds) if self._sim_time else time.monotonic_ns
        outputs = Outputs(send_lowcmd=self._publish_lowcmd, tick_done=self._publish_tick,
                          ok=lambda: self.lifecycle_state == "active" and self.context.ok())
        self.loop = ControlLoop(params.loop_cfg(v, self._sim_time),
                                Controller(params.control_cfg(v, self._dt), policy),
                                now_ns, self.get_logger(), outputs)
        # The services block (waiting for a tick; waiting for the loader): pool threads, not the
        # executor's own, and a pool each, so a load never delays a mode request (an e-stop). The
        # timers query the graph and build messages (ms each): on a pool thread too, so the
        # /lowstate callback never waits behind them.
        self._mode_group, self._load_group = ReentrantCallbackGroup(), ReentrantCallbackGroup()
        self._timer_group = MutuallyExclusiveCallbackGroup()
        self.offloaded_callbacks = {self._mode_group: 2, self._load_group: 2, self._timer_group: 1}
        self.lifecycle_state = "inactive"

    def activate(self) -> None:
        """Publishers, the /lowstate subscription, services, timers and the loader, then the control
        and writer threads (and, on the real robot, the motion-switcher release)."""
        self._expect("inactive", "activate")
        v, reliable = self.values, QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        before = self._lowcmd_publisher_gids()
        self._lowcmd_pub = self.create_publisher(LowCmd, interfaces.LOWCMD, reliable)
        self._own_lowcmd_gid = _own_gid(before, self._lowcmd_publisher_gids())
        keep_10, keep_100 = QoSProfile(depth=10), QoSProfile(depth=100)
        self._record_pub = self.create_publisher(PolicyRecord, interfaces.POLICY_RECORD, keep_100)
        self._status_pub = self.create_publisher(PolicyStatus, interfaces.POLICY_STATUS, reliable)
        self._joint_pub = self.create_publisher(JointState, interfaces.JOINT_STATES, keep_10)
        self._diag_pub = self.create_publisher(DiagnosticArray, interfaces.DIAGNOSTICS, keep_10)
        self._lowstate_sub = self.create_subscription(
            LowState, interfaces.LOWSTATE, self.loop.on_lowstate,
            QoSProfile(depth=5, reliability=ReliabilityPolicy.BEST_EFFORT), raw=True)
        self._policy_services = (
            self.create_service(SetMode, interfaces.SET_MODE, self._answering(self._on_set_mode),
                                callback_group=self._mode_group),
            self.create_service(LoadPolicy, interfaces.LOAD_POLICY, self._answering(self._on_load_policy),
                                callback_group=self._load_group))
        self._policy_timers = tuple(
            self.create_timer(period, callback, callback_group=self._timer_group)
            for period, callback in ((LOWCMD_CHECK_PERIOD_S, self._check_lowcmd_publishers),
                                     (1.0 / v["status_rate_hz"], self._publish_status),
                                     (1.0 / v["diagnostics_rate_hz"], self._publish_diagnostics)))
        self._loader = PolicyLoader(params.loader_cfg(v, self._dt), self.loop.current_state)
        # under sim time the loop's threads wait for /clock steps: one jump callback wakes them
        self._clock_jump = self.get_clock().create_jump_callback(
            JumpThreshold(min_forward=Duration(nanoseconds=1), min_backward=Duration(nanoseconds=-1),
                          on_clock_change=True),
            post_callback=self.loop.notify_clock,
        ) if self._sim_time else None
        self._switcher = None if self.loop.released else MotionSwitcherClient(self)
        self.lifecycle_state = "active"
        self.loop.start()
        self._release_thread = None
        if self._switcher is not None:
            self._release_thread = threading.Thread(target=self._release, args=(self._switcher,),
                                                    name="release", daemon=True)
            self._release_thread.start()
        name = self.loop.controller.policy.artifact.metadata.name if self.loop.controller.policy else "none"
        self.get_logger().info(f"ready: policy {name}, {1 / self._dt:.0f} Hz, "
                               f"{'sim' if self._sim_time else 'steady'} clock")

    def deactivate(self, crashed: bool = False) -> None:
        """Stop the threads; leave the robot damped if it was under stiffness control, or whatever
        the mode if the node is going down on an unexpected error; then take down what
        ``activate()`` made."""
        self._expect("active", "deactivate")
        self.loop.stop(crashed)
        self.lifecycle_state = "inactive"  # nothing is published from here on
        if self._release_thread is not None:
            self._release_thread.join(timeout=1.0)
        self._loader.close()
        if self._clock_jump is not None:
            self._clock_jump.unregister()
        if self._switcher is not None:
            self._switcher.destroy()
        for pub in (self._lowcmd_pub, self._record_pub, self._status_pub, self._joint_pub, self._diag_pub):
            self.destroy_publisher(pub)
        self.destroy_subscription(self._lowstate_sub)
        for service in self._policy_services:
            self.destroy_service(service)
        for timer in self._policy_timers:
            self.destroy_timer(timer)

    def _expect(self, state: LifecycleState, step: str) -> None:
        if self.lifecycle_state != state:
            raise RuntimeError(f"{step}() needs the node {state}; it is {self.lifecycle_state}")

    def _load_initial(self, path: str) -> LoadedPolicy | None:
        """Fail fast: an artifact that LoadPolicy would refuse is an error at start, not a warning."""
        if not path:
            return None
        try:
            policy = prepare(path, params.loader_cfg(self.values, 0.0), standing_state(), check_dt=False)
        except LoadRefusedError as e:
            raise RuntimeError(f"policy_path {path}: {e}") from None
        self.get_logger().info(f"policy {policy.artifact.metadata.name} sha256 {policy.artifact.sha256}")
        return policy

    def _release(self, switcher: MotionSwitcherClient) -> None:
        v = self.values
        ok, message = switcher.release(v["motion_switcher_attempts"], v["motion_switcher_timeout_s"])
        if ok:  # two call sites: rclpy refuses one call site that logs at two severities
            self.get_logger().info(f"motion switcher: {message}")
        else:
            self.get_logger().error(f"motion switcher: {message}")
        self.loop.motion_switcher_released(ok, message)

    # -- graph ----------------------------------------------------------------------------------

    def _lowcmd_publisher_gids(self) -> set[bytes]:
        return {bytes(i.endpoint_gid) for i in self.get_publishers_info_by_topic(interfaces.LOWCMD)}

    def _check_lowcmd_publishers(self) -> None:
        """Any /lowcmd publisher but ours (by GID: a node name proves nothing) blocks leaving
        ZERO_TORQUE and, in an active mode, is a fault: two controllers fight over the motors."""
        others = sorted(f"{i.node_namespace.rstrip('/')}/{i.node_name} "
                        f"(gid {bytes(i.endpoint_gid).hex()[:24]})"
                        for i in self.get_publishers_info_by_topic(interfaces.LOWCMD)
                        if bytes(i.endpoint_gid) != self._own_lowcmd_gid)
        self.loop.block_start(f"another /lowcmd publisher: {others}" if others else "")

    # -- services -------------------------------------------------------------------------------

    def _answering(self, callback):
        """A service callback that always answers: an unexpected error refuses the request with
        its reason and damps (it is a bug, and the robot must not run on in an unknown state)."""
        def answer(request, response):
            try:
                return callback(request, response)
            except Exception as e:
                self.internal_error(e, callback.__name__)
                response.accepted, response.message = False, f"internal error, not applied: {e!r}"
                return response
        answer.__name__ = callback.__name__  # errors are reported by callback name
        return answer

    def internal_error(self, error: BaseException, where: str = "a callback") -> None:
        """An unexpected exception anywhere in the node: log it, send DAMPING now, latch it next tick
        (the executor's ``on_error``)."""
        self.loop.internal_error(error, where)

    def _on_set_mode(self, request: SetMode.Request, response: SetMode.Response) -> SetMode.Response:
        try:
            event = request_event(request.request)
        except ValueError as e:
            response.accepted, response.mode, response.message = False, int(self.loop.controller.mode), str(e)
            return response
        submitted = self.loop.submit(TickRequest(event=event))
        result = submitted.result or Transition(self.loop.controller.mode, False, "no control tick ran "
                                                "within 1 s (is the clock running?)")
        response.accepted, response.mode, response.message = result.accepted, int(result.mode), result.reason
        if request.reason:
            self.get_logger().info(f"SetMode {event.name} ({request.reason}): "
                                   f"{'accepted' if result.accepted else 'refused: ' + result.reason}")
        return response

    def _on_load_policy(self, request: LoadPolicy.Request,
                        response: LoadPolicy.Response) -> LoadPolicy.Response:
        response.accepted, response.message = False, ""
        try:
            policy = self._loader.load(request.path)
        except LoadRefusedError as e:
            response.message = f"refused {request.path}: {e}"
            self.get_logger().warning(response.message)
            return response
        artifact, m = policy.artifact, policy.artifact.metadata
        submitted = self.loop.submit(TickRequest(policy=policy, blend_ticks=request.blend_ticks or None))
        response.accepted = submitted.swap == ""
        response.policy_sha256, response.policy_name = artifact.sha256, m.name
        if response.accepted:
            response.message = (f"swapped in {m.name} ({artifact.sha256[:12]}, {m.num_joints} joints, obs "
                                f"{m.observation.dim}, motion {m.motion.name} {m.motion.length_s:.2f} s)")
        else:
            response.message = f"refused {request.path}: " + (submitted.swap or "no control tick ran within "
                                                               "1 s to swap it in")
        if response.accepted:  # two call sites: rclpy fixes a call site's severity at its first use
            self.get_logger().info(response.message)
        else:
            self.get_logger().warning(response.message)
        return response

    # -- outputs --------------------------------------------------------------------------------

    def _publish_lowcmd(self, data: bytes) -> None:
        self._lowcmd_pub.publish(data)

    def _publish_tick(self, report: TickReport) -> None:
        if report.mode_changed:
            self._publish_status()
        self._publish_record(report)
        if report.state is not None:
            self._publish_joint_state(report.state, report.tau_est)

    def _publish_record(self, report: TickReport) -> None:
        out, msg = report.out, PolicyRecord()
        if report.received_ns is not None:  # the state's receive time, on the ROS clock
            received = self.get_clock().now().nanoseconds - (self.loop.now_ns() - report.received_ns)
            msg.header.stamp = Time(nanoseconds=received).to_msg()
        msg.tick, msg.mode, msg.phase = report.tick, int(out.mode), out.phase
        policy = self.loop.controller.policy
        msg.policy_sha256 = policy.artifact.sha256 if policy else ""
        msg.lowstate_tick = report.state.tick if report.state is not None else 0
        for name in ("observation", "action_raw", "action", "q_target"):
            value = getattr(out, name)
            if value is not None:
                setattr(msg, name, array.array("f", np.asarray(value, dtype=np.float32).tobytes()))
        msg.inference_ms = out.inference_s * 1e3
        self._record_pub.publish(msg)

    def _publish_joint_state(self, state: RobotState, tau: np.ndarray) -> None:
        msg = JointState()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.name = list(g1.MOTOR_ORDER)
        msg.position, msg.velocity, msg.effort = state.q.tolist(), state.dq.tolist(), tau.tolist()
        self._joint_pub.publish(msg)

    def _publish_status(self) -> None:
        c, s = self.loop.controller, self.loop.stats
        msg = PolicyStatus()
        if c.policy is not None:
            meta = c.policy.artifact.metadata
            msg.policy_name, msg.policy_sha256, msg.motion_name = meta.name, c.policy.artifact.sha256, \
                meta.motion.name
        msg.missed_ticks, msg.lowstate_crc_errors = s.missed, s.crc_errors
        msg.inference_ms_p50 = s.inference_ms.percentile(50)
        msg.inference_ms_p99 = s.inference_ms.percentile(99)
        msg.loop_jitter_ms_p99 = s.jitter_ms.percentile(99)
        msg.lowstate_to_lowcmd_ms_p50 = s.state_to_cmd_ms.percentile(50)
        msg.lowstate_to_lowcmd_ms_p99 = s.state_to_cmd_ms.percentile(99)
        msg.lowstate_age_ms = s.age_ms
        block = self.loop.start_block
        with self.loop.finished_tick() as tick:  # the tick's mode, phase and count, published in tick order
            mode = tick.mode
            msg.mode, msg.mode_name, msg.phase, msg.tick = int(mode), mode.name, tick.phase, tick.tick
            msg.fault = c.fault or (block if mode is Mode.ZERO_TORQUE else "")
            msg.header.stamp = self.get_clock().now().to_msg()
            self._status_pub.publish(msg)

    def _publish_diagnostics(self) -> None:
        s, c = self.loop.stats, self.loop.controller
        level = DiagnosticStatus.OK
        if c.mode is Mode.DAMPING or s.age_ms < 0:
            level = DiagnosticStatus.ERROR
        elif s.missed or s.crc_errors or s.age_ms > self.values["stale_warn_ms"]:
            level = DiagnosticStatus.WARN
        values = {"mode": c.mode.name, "fault": c.fault, "ticks": s.tick, "missed_ticks": s.missed,
                  "loop_jitter_ms_p99": f"{s.jitter_ms.percentile(99):.3f}",
                  "inference_ms_p99": f"{s.inference_ms.percentile(99):.3f}",
                  "lowstate_age_ms": f"{s.age_ms:.1f}", "lowstate_crc_errors": s.crc_errors}
        status = DiagnosticStatus(level=level, name="asap_policy: control loop",
                                  hardware_id="unitree_g1", message=c.fault or c.mode.name,
                                  values=[KeyValue(key=k, value=str(x)) for k, x in values.items()])
        msg = DiagnosticArray(status=[status, self._motor_diagnostics()])
        msg.header.stamp = self.get_clock().now().to_msg()
        self._diag_pub.publish(msg)

    def _motor_diagnostics(self) -> DiagnosticStatus:
        """Temperatures and fault words of the newest /lowstate (see asap_policy.motor_health)."""
        raw = self.loop.newest_lowstate()
        status = DiagnosticStatus(name="asap_policy: motors", hardware_id="unitree_g1")
        if raw is None:
            status.level, status.message = DiagnosticStatus.STALE, "no /lowstate yet"
            return status
        try:
            health = motor_health(raw)
        except ValueError as e:
            status.level, status.message = DiagnosticStatus.ERROR, f"undecodable /lowstate: {e}"
            return status
        status.level, status.message = bytes([health.level]), health.message
        status.values = [KeyValue(key=k, value=v) for k, v in health.values.items()]
        return status


def _own_gid(before: set[bytes], after: set[bytes]) -> bytes:
    """The GID of the /lowcmd publisher that appeared between two graph snapshots: ours (the graph
    cache lists local endpoints at once). Ambiguous only if another appeared in those microseconds."""
    new = after - before
    if len(new) != 1:
        raise RuntimeError(f"cannot tell this node's /lowcmd publisher among {len(new)} new ones; "
                           "another node created one at the same moment: stop it and restart")
    return new.pop()


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(args: list[str] | None = None) -> None:
    """Configure, activate and spin the node until SIGINT/SIGTERM; then deactivate it, which leaves
    an actively held robot damped. An error that escapes the executor ends the process too, after the
    same damping commands (never in silence)."""
    # rclpy's own handlers would invalidate the context before the final damping command goes out
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    signal.signal(signal.SIGTERM, _interrupt)
    node, crashed = None, False
    try:
        node = PolicyNode()
        node.configure()
        node.activate()
        executor = InlineExecutor(offload=node.offloaded_callbacks, on_error=node.internal_error)
        executor.add_node(node)
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception:
        crashed = True
        raise
    finally:
        if node is not None:
            if node.lifecycle_state == "active":
                node.deactivate(crashed=crashed)
            node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()
