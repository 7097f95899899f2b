"""``g1_sim``: the simulated G1 on the robot's own topics (a thin rclpy shell over asap_sim.twin).

Topics, parameters, clock modes and the lock-step protocol are documented in the package README.
One dedicated thread owns the twin: it steps physics, publishes /lowstate (and /clock, /odometry,
/joint_states) and keeps time (absolute deadlines in realtime, as fast as possible in lockstep).
The executor thread only receives commands, remote and service calls, and hands them over; the one
exception, /sim/reset, resets the twin under the loop's lock so the reply means "done".
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import rclpy
from asap_msgs.msg import WirelessRemote
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from nav_msgs.msg import Odometry
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.time import Time
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger
from unitree_hg.msg import LowCmd, LowState

from asap_core import g1, interfaces, remote
from asap_core.variants import SIM_MODE_MACHINE
from asap_sim.motor import MotorCommand
from asap_sim.profiles import load_profile
from asap_sim.twin import DRIVES, Drive, Twin, TwinConfig, TwinState
from asap_sim.wire import LowCmdDecoder, LowStateEncoder, clock_cdr

CLOCK_MODES = ("realtime", "lockstep")
WATCHERS_EVERY = 50
"""States between two checks for /odometry and /joint_states subscribers (built only when watched)."""
MAX_LAG_S = 0.1
"""Realtime: a loop this far behind its deadlines skips ahead instead of bursting (counted)."""


@dataclass(frozen=True)
class _Param:
    name: str
    default: Any
    description: str
    range: tuple[float, float] | None = None


PARAMETERS = (
    _Param("profile", "nominal", "dynamics profile: a shipped name (nominal, weak_ankles, latency, "
           "heavy_torso, isaacsim, tired_ankles, unitree_mujoco) or a path to a YAML file"),
    _Param("clock_mode", "realtime", "realtime: wall clock, 500 Hz on absolute deadlines; lockstep: "
           "publishes /clock and steps as fast as it can"),
    _Param("seed", -1, "sensor-noise seed; -1 takes the profile's", (-1, 2**31 - 1)),
    _Param("mode_machine", SIM_MODE_MACHINE, "G1 variant reported in LowState; LowCmds must echo it",
           (0, 255)),
    _Param("band_held", True, "start with the gantry band holding the pelvis (/sim/release_band frees it)"),
    _Param("initial_pose", "asap", "start pose, a name of asap_core.g1.DEFAULT_POSES"),
    _Param("state_rate_hz", 500.0, "LowState rate in simulated time (Hz)", (10.0, 1000.0)),
    _Param("drive", "engine", "joint drive: engine (the PD on the current state every physics step, as a "
           "G1's motor drivers) or held (as Unitree's simulator: the PD of the previous step's sensors, held "
           "over the step; with physics_dt 0.005 and state_rate_hz 200 it is unitree_mujoco's default)"),
    _Param("physics_dt", 0.002, "physics step (s); the state period must be a whole number of steps",
           (0.0005, 0.005)),
    _Param("wait_for_cmd", False, "lockstep: after every sync state, wait for one LowCmd before stepping on"),
    _Param("sync_every", 10, "lockstep: states per sync state (10 = 50 Hz at 500 Hz)", (1, 10000)),
    _Param("resend_s", 0.5, "lockstep: re-publish the sync state and its /clock after this long without "
           "a LowCmd (wall s; covers late discovery and a lost sample)", (0.01, 60.0)),
    _Param("rt_priority", 0, "realtime: SCHED_FIFO priority of the loop thread (1-99; the executor "
           "thread one below; 0 = normal scheduling); needs CAP_SYS_NICE, falls back with a warning",
           (0, 99)),
    _Param("odometry_every", 1, "publish /odometry every N states", (1, 10000)),
    _Param("joint_states_every", 1, "publish /joint_states every N states", (1, 10000)),
    _Param("world_frame", "world", "frame of the ground-truth odometry pose"),
    _Param("base_frame", "pelvis", "child frame of /odometry (twist expressed in it)"),
)
"""Every parameter, declared once (all read-only): name, default, description, range."""


@dataclass(frozen=True, kw_only=True)
class SimConfig:
    """The node's parameters, read once."""

    profile: str
    clock_mode: str
    seed: int
    mode_machine: int
    band_held: bool
    initial_pose: str
    state_rate_hz: float
    drive: Drive
    physics_dt: float
    wait_for_cmd: bool
    sync_every: int
    resend_s: float
    rt_priority: int
    odometry_every: int
    joint_states_every: int
    world_frame: str
    base_frame: str

    @property
    def steps_per_state(self) -> int:
        """Physics steps between two published states."""
        return round(1.0 / (self.state_rate_hz * self.physics_dt))

    def validate(self) -> None:
        """Raise ValueError naming the parameter and what is allowed."""
        if self.clock_mode not in CLOCK_MODES:
            raise ValueError(f"clock_mode {self.clock_mode!r}: use one of {CLOCK_MODES}")
        if self.initial_pose not in g1.DEFAULT_POSES:
            raise ValueError(f"initial_pose {self.initial_pose!r}: use one of {sorted(g1.DEFAULT_POSES)}")
        if self.drive not in DRIVES:
            raise ValueError(f"drive {self.drive!r}: use one of {DRIVES}")
        ratio = 1.0 / (self.state_rate_hz * self.physics_dt)
        if abs(ratio - round(ratio)) > 1e-6 or round(ratio) < 1:
            raise ValueError(f"state_rate_hz {self.state_rate_hz} and physics_dt {self.physics_dt}: "
                             f"the state period must be a whole number (>= 1) of physics steps")


def _descriptor(p: _Param) -> ParameterDescriptor:
    descriptor = ParameterDescriptor(description=p.description, read_only=True)
    if p.range is not None and isinstance(p.default, float):
        descriptor.floating_point_range = [FloatingPointRange(from_value=p.range[0], to_value=p.range[1])]
    elif p.range is not None:
        descriptor.integer_range = [IntegerRange(from_value=int(p.range[0]), to_value=int(p.range[1]),
                                                 step=1)]
    return descriptor


def _reliable(depth: int = 10) -> QoSProfile:
    return QoSProfile(depth=depth, reliability=ReliabilityPolicy.RELIABLE)


class G1SimNode(Node):
    """The twin behind /lowcmd, /lowstate, /odometry, /joint_states, /clock and /sim/*."""

    def __init__(self, **node_kwargs: Any) -> None:
        super().__init__(interfaces.TWIN_NODE, **node_kwargs)
        for p in PARAMETERS:
            self.declare_parameter(p.name, p.default, _descriptor(p))
        self.cfg = SimConfig(**{p.name: self.get_parameter(p.name).value for p in PARAMETERS})
        self.cfg.validate()
        profile = load_profile(self.cfg.profile)
        self.twin = Twin(profile, TwinConfig(physics_dt=self.cfg.physics_dt, band_held=self.cfg.band_held,
                                             initial_pose=self.cfg.initial_pose, drive=self.cfg.drive,
                                             seed=None if self.cfg.seed < 0 else self.cfg.seed))
        self._lockstep = self.cfg.clock_mode == "lockstep"
        self._decoder = LowCmdDecoder()
        self._encoder = LowStateEncoder(self.cfg.mode_machine)
        self._command = MotorCommand.off()
        self._remote = remote.encode()
        self._band_request: bool | None = None
        self._last_lowcmd = b""  # the newest accepted LowCmd, as received
        self._release_on_new_command: bytes | None = None  # armed: the LowCmd the band waits to change
        self._cmd_arrived = threading.Event()
        self._stop = threading.Event()
        self._twin_lock = threading.Lock()  # the loop's read/step vs a /sim/reset from the executor
        self.counters = dict.fromkeys(("lowcmd_accepted", "lowcmd_crc_errors", "lowcmd_mode_machine_mismatch",
                                       "states_published", "deadline_overruns", "sync_resends", "resets"), 0)
        self._physics_steps = 0
        self._band_released_s: float | None = None  # sim time of the latest release
        self._watched = (False, False)
        self._lateness_s: list[float] = []
        self._make_interfaces()
        self._thread = threading.Thread(target=self._run, name="g1_sim_loop", daemon=True)
        self._thread.start()
        self.get_logger().info(
            f"G1 twin up: profile {profile.name!r}, {self.cfg.clock_mode}, {self.cfg.state_rate_hz:g} Hz "
            f"states, physics dt {self.cfg.physics_dt:g} s ({self.cfg.drive} drive), "
            f"mode_machine {self.cfg.mode_machine}, "
            f"band {'held' if self.cfg.band_held else 'released'}")

    # -- interfaces (executor thread) -----------------------------------------------------------

    def _make_interfaces(self) -> None:
        # a deeper writer history than the usual 10 rides out a subscriber's scheduling hiccups
        self._lowstate_pub = self.create_publisher(LowState, interfaces.LOWSTATE, _reliable(depth=100))
        self._odom_pub = self.create_publisher(Odometry, interfaces.ODOMETRY, _reliable())
        self._joints_pub = self.create_publisher(JointState, interfaces.JOINT_STATES, _reliable())
        self._clock_pub = (self.create_publisher(Clock, interfaces.CLOCK, _reliable()) if self._lockstep
                           else None)
        self._diag_pub = self.create_publisher(DiagnosticArray, interfaces.DIAGNOSTICS, _reliable())
        self._lowcmd_sub = self.create_subscription(LowCmd, interfaces.LOWCMD, self._on_lowcmd, _reliable(),
                                                    raw=True)
        self.create_subscription(WirelessRemote, interfaces.SIM_WIRELESS_REMOTE, self._on_remote, _reliable())
        self.create_service(Trigger, interfaces.SIM_RELEASE_BAND, self._on_release_band)
        self.create_service(Trigger, interfaces.SIM_RELEASE_BAND_ON_NEW_COMMAND, self._on_arm_release)
        self.create_service(Trigger, interfaces.SIM_HOLD_BAND, self._on_hold_band)
        self.create_service(Trigger, interfaces.SIM_RESET, self._on_reset)
        self.create_timer(1.0, self._publish_diagnostics)
        self._odom = Odometry()
        self._odom.header.frame_id, self._odom.child_frame_id = self.cfg.world_frame, self.cfg.base_frame
        self._joints = JointState(name=list(g1.MOTOR_ORDER))

    def _on_lowcmd(self, data: bytes) -> None:
        crc_ok, mode_machine, cmd = self._decoder.decode(data)
        if not crc_ok:
            self.counters["lowcmd_crc_errors"] += 1
            self.get_logger().warning("LowCmd with a wrong CRC ignored", throttle_duration_sec=1.0)
        elif mode_machine != self.cfg.mode_machine:
            self.counters["lowcmd_mode_machine_mismatch"] += 1
            self.get_logger().warning(f"LowCmd for mode_machine {mode_machine} ignored; this G1 is "
                                   f"{self.cfg.mode_machine} (echo LowState.mode_machine)",
                                   throttle_duration_sec=1.0)
        else:
            self.counters["lowcmd_accepted"] += 1
            armed = self._release_on_new_command
            if armed is not None and data != armed:
                with self._twin_lock:  # the loop applies the release and this command in one advance
                    self._release_on_new_command, self._band_request = None, False
                    self._command = cmd
            else:
                self._command = cmd
            self._last_lowcmd = data
            self._cmd_arrived.set()

    def _on_remote(self, msg: WirelessRemote) -> None:
        self._remote = remote.encode(msg.keys, msg.lx, msg.rx, msg.ry, msg.l2, msg.ly)

    def _on_release_band(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        self._band_request = False
        res.success, res.message = True, "band released at the next state"
        return res

    def _on_arm_release(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        """Let go with the first LowCmd that differs from the newest one, in the state it starts
        acting: a policy started now runs its first tick free, whatever the wall-clock delays."""
        self._release_on_new_command = self._last_lowcmd
        res.success = True
        res.message = "band released with the first LowCmd that differs from the current one"
        return res

    def _on_hold_band(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        self._release_on_new_command = None
        self._band_request = True
        res.success, res.message = True, "band catches the pelvis where it is at the next state"
        return res

    def _on_reset(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        """Back to the initial pose at rest, held by the band; time runs on (ticks never go back)."""
        with self._twin_lock:
            self._band_request = self._release_on_new_command = None
            self.twin.reset(keep_time=True, band_held=True)
            self.counters["resets"] += 1
            t = self.twin.time_s
        res.success = True
        res.message = (f"twin reset to the {self.cfg.initial_pose!r} pose at rest, held by the band "
                       f"(sim time {t:.3f} s runs on)")
        self.get_logger().info(res.message)
        return res

    def _publish_diagnostics(self) -> None:
        lateness = np.array(self._lateness_s[-2000:]) * 1e3
        released = self._band_released_s
        values = {**self.counters, "physics_steps": self._physics_steps,
                  "sim_time_s": f"{self.twin.time_s:.3f}", "band_held": self.twin.band_held,
                  "band_released_s": "" if released is None else f"{released:.3f}",
                  "profile": self.twin.profile.name, "clock_mode": self.cfg.clock_mode}
        if lateness.size:
            values |= {"publish_lateness_ms_p50": f"{np.percentile(lateness, 50):.3f}",
                       "publish_lateness_ms_p99": f"{np.percentile(lateness, 99):.3f}"}
        status = DiagnosticStatus(level=DiagnosticStatus.OK, name="g1_sim", hardware_id="g1_twin",
                                  message=f"{self.counters['states_published']} states",
                                  values=[KeyValue(key=k, value=str(v)) for k, v in values.items()])
        array = DiagnosticArray(status=[status])
        array.header.stamp = self.get_clock().now().to_msg()
        self._diag_pub.publish(array)

    # -- the loop (sim thread) ------------------------------------------------------------------

    def _run(self) -> None:
        if self.cfg.rt_priority and not self._lockstep:
            self.use_fifo_scheduling(self.cfg.rt_priority)
        try:
            self._loop()
        except Exception:
            if self.context.ok() and not self._stop.is_set():
                raise  # a real fault; after shutdown, publishers fail on an invalid context

    def use_fifo_scheduling(self, priority: int) -> None:
        """Run the calling thread SCHED_FIFO at ``priority``; warn and go on if refused."""
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
        except (OSError, AttributeError) as err:
            self.get_logger().warning(f"rt_priority {priority}: SCHED_FIFO refused ({err}); running with "
                                   f"normal scheduling (grant CAP_SYS_NICE or set rt_priority:=0)")

    def _loop(self) -> None:
        """Publish the state, then advance to the next one; the first state is the start (tick 0)."""
        period = 1.0 / self.cfg.state_rate_hz
        if self._lockstep and self.cfg.wait_for_cmd:
            self._wait_for_a_client()
        deadline = time.monotonic()
        index = 0
        while not self._stop.is_set():
            with self._twin_lock:
                state = self.twin.read_state()
            lowstate = self._encoder.encode(state, self._command.mode, self._remote)
            if self._lockstep:
                # sync states by sim time (ticks 0, 20, 40 ms... by default), not by count: a reset
                # or a start that is not at t = 0 keeps them on the policy's sim-time deadlines
                state_index = round(state.time_s * self.cfg.state_rate_hz)
                sync = self.cfg.wait_for_cmd and state_index % self.cfg.sync_every == 0
                if sync:
                    self._cmd_arrived.clear()  # only a command sent after this state counts
                clock = clock_cdr(state.time_s)
                self._publish(state, lowstate, index)
                assert self._clock_pub is not None, "lock-step creates /clock"
                self._clock_pub.publish(clock)
                if sync:
                    self._wait_for_command(lowstate, clock)
            else:
                deadline = self._sleep_until(deadline + period)
                self._publish(state, lowstate, index)
            self._advance()
            index += 1

    def _advance(self) -> None:
        with self._twin_lock:
            if self._band_request is not None:
                held, self._band_request = self._band_request, None
                if held:
                    self.twin.hold_band()
                else:
                    self.twin.release_band()
                    self._band_released_s = self.twin.time_s
            self.twin.set_command(self._command)
            self.twin.step(self.cfg.steps_per_state)
        self._physics_steps += self.cfg.steps_per_state

    def _sleep_until(self, deadline: float) -> float:
        """Sleep to an absolute deadline; record lateness; skip ahead when hopelessly behind."""
        now = time.monotonic()
        if now < deadline:
            time.sleep(deadline - now)
            now = time.monotonic()
        elif now - deadline > MAX_LAG_S:
            self.counters["deadline_overruns"] += 1
            return now
        self._lateness_s.append(now - deadline)
        if len(self._lateness_s) > 20000:
            del self._lateness_s[:10000]
        return deadline

    def _wait_for_a_client(self) -> None:
        """Lock-step handshake: start once a /lowstate reader and a /lowcmd writer are matched."""
        while not self._stop.is_set() and not (self._lowstate_pub.get_subscription_count()
                                               and self._lowcmd_sub.get_publisher_count()):
            time.sleep(0.01)

    def _wait_for_command(self, lowstate: bytes, clock: bytes) -> None:
        """Lock-step sync: block until one LowCmd arrives, re-sending the sync state now and then.

        The /clock of the sync state goes out again too: a client on sim time that lost it (rclpy's
        clock subscription is best effort, depth 1) waits for that time before it ticks and answers.
        """
        while not self._cmd_arrived.wait(self.cfg.resend_s):
            if self._stop.is_set():
                return
            self.counters["sync_resends"] += 1
            self._lowstate_pub.publish(lowstate)
            assert self._clock_pub is not None, "lock-step creates /clock"
            self._clock_pub.publish(clock)
        self._cmd_arrived.clear()

    def _publish(self, state: TwinState, lowstate: bytes, index: int) -> None:
        self._lowstate_pub.publish(lowstate)
        self.counters["states_published"] += 1
        if index % WATCHERS_EVERY == 0:  # asking DDS every state costs as much as a publish
            self._watched = (self._odom_pub.get_subscription_count() > 0,
                             self._joints_pub.get_subscription_count() > 0)
        stamp = None
        if index % self.cfg.odometry_every == 0 and self._watched[0]:
            stamp = self._stamp(state)
            self._odom_pub.publish(self._odometry(state, stamp))
        if index % self.cfg.joint_states_every == 0 and self._watched[1]:
            self._joints.header.stamp = stamp or self._stamp(state)
            self._joints.position, self._joints.velocity = state.q.tolist(), state.dq.tolist()
            self._joints.effort = state.tau_est.tolist()
            self._joints_pub.publish(self._joints)

    def _stamp(self, state: TwinState) -> Any:
        if self._lockstep:
            return Time(nanoseconds=round(state.time_s * 1e9)).to_msg()
        return self.get_clock().now().to_msg()

    def _odometry(self, state: TwinState, stamp: Any) -> Odometry:
        odom = self._odom
        odom.header.stamp = stamp
        pose = odom.pose.pose
        pose.position.x, pose.position.y, pose.position.z = state.base_pos_w.tolist()
        w, x, y, z = state.base_quat_wxyz.tolist()
        pose.orientation.w, pose.orientation.x, pose.orientation.y, pose.orientation.z = w, x, y, z
        twist = odom.twist.twist
        twist.linear.x, twist.linear.y, twist.linear.z = state.base_lin_vel_b.tolist()
        twist.angular.x, twist.angular.y, twist.angular.z = state.base_ang_vel_b.tolist()
        return odom

    def stop(self) -> None:
        """Stop and join the sim thread."""
        self._stop.set()
        self._cmd_arrived.set()
        self._thread.join(timeout=5.0)


def main(args: list[str] | None = None) -> None:
    """Run ``g1_sim`` until interrupted."""
    rclpy.init(args=args)
    node = None
    try:
        node = G1SimNode()
        if node.cfg.rt_priority and node.cfg.clock_mode == "realtime":
            # The executor thread holds the GIL in its callbacks; preempted there at normal priority
            # it would stall the FIFO loop thread (priority inversion through the GIL).
            node.use_fifo_scheduling(max(1, node.cfg.rt_priority - 1))
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if node is not None:
            node.stop()
            node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()
