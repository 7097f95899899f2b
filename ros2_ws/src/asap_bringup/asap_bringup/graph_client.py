"""Drive a running sim2sim graph (twin ``g1_sim`` + ``policy_node`` + ``recorder``) as an operator does.

The ASAP loop needs real trajectories: the policy run on the twin (or the robot), recorded. This client
does what an operator does, over the graph's own services (names: :mod:`asap_core.interfaces`), so
``asap-push``, training's demo and the collectors never reach into the nodes:

    reset the twin (initial pose, at rest, in the band) → RAMP to the policy's default pose → HOLD
    → POLICY (the recorder opens a bag) → release the band → the motion ends (the node goes to HOLD at
    phase 1) or the policy trips a fault (DAMPING) → catch the robot in the band → the recorder closes
    the bag → its path.

Start the graph first: ``python -m asap_bringup.runner sim2sim policy:=<onnx> dynamics_profile:=<name>
episodes_dir:=<dir>``. Training imports this module inside the functions that drive the graph, so
that importing ``asap_training`` stays ROS-free.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import rclpy
from asap_msgs.msg import EpisodeEvent, PolicyStatus
from asap_msgs.srv import LoadPolicy, SetMode
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions
from std_srvs.srv import Trigger

from asap_core import interfaces
from asap_core.modes import Event, Mode

log = logging.getLogger(__name__)
STATUS_HISTORY = 2000
"""Statuses kept (a lock-step twin can send 50/s): an episode's start and end lie within it."""

START_HINT = (
    "start the graph with `python -m asap_bringup.runner sim2sim policy:=<onnx> "
    "dynamics_profile:=<profile> episodes_dir:=<dir>` (same ROS_DOMAIN_ID)"
)


class GraphError(RuntimeError):
    """A node of the graph refused a request or did not do what it should have, with why."""


class GraphNotReadyError(GraphError):
    """A node, service or topic the request needs is not in the graph."""


@dataclass(frozen=True, kw_only=True)
class GraphNames:
    """Names of the graph's nodes, services and topics (defaults: :mod:`asap_core.interfaces`)."""

    set_mode: str = interfaces.SET_MODE
    load_policy: str = interfaces.LOAD_POLICY
    policy_status: str = interfaces.POLICY_STATUS
    twin_reset: str = interfaces.SIM_RESET
    release_band_on_new_command: str = interfaces.SIM_RELEASE_BAND_ON_NEW_COMMAND
    hold_band: str = interfaces.SIM_HOLD_BAND
    recorder_start: str = interfaces.resolve(interfaces.START_EPISODE, interfaces.RECORDER_NODE)
    episode_events: str = interfaces.resolve(interfaces.EPISODE_EVENTS, interfaces.RECORDER_NODE)
    recorder_node: str = interfaces.RECORDER_NODE
    recorded: tuple[str, ...] = (
        interfaces.LOWSTATE, interfaces.POLICY_RECORD, interfaces.POLICY_STATUS, interfaces.ODOMETRY)
    """Topics the recorder must be subscribed to before an episode is worth running."""


@dataclass(frozen=True, kw_only=True)
class GraphClientCfg:
    """How long to wait for what."""

    names: GraphNames = field(default_factory=GraphNames)
    service_timeout_s: float = 10.0
    """For a service to appear and answer (LoadPolicy gets ``load_timeout_s`` to answer)."""
    load_timeout_s: float = 60.0
    """LoadPolicy validates and dry-runs the artifact before answering."""
    ready_timeout_s: float = 60.0
    """:meth:`GraphClient.run_episode` waits this long for the graph the first time."""
    ramp_timeout_s: float = 60.0
    """From RAMP requested to HOLD reached, wall s (the node's ``ramp_s`` is 3 s of node time; a lock-step
    twin on a busy machine runs slower than real time)."""
    recorder_timeout_s: float = 20.0
    """For the recorder to open the bag after POLICY starts and to close it after POLICY ends."""
    prepare_attempts: int = 3
    """Reset + ramp tries before a fault during the ramp is an error."""
    progress_period_s: float = 1.0
    node_name: str = "asap_graph_client"
    """The operator enclave's client name (config/security/policy.xml)."""


@dataclass(frozen=True)
class LoadResult:
    """The policy node's answer to LoadPolicy."""

    accepted: bool
    message: str
    """The reason when refused, a summary when accepted."""
    sha256: str
    name: str


@dataclass(frozen=True)
class ModeReply:
    """The policy node's answer to SetMode."""

    accepted: bool
    mode: Mode
    """Mode after the request."""
    message: str


@dataclass(frozen=True)
class NodeStatus:
    """The newest ``/policy/status`` (the fields the client uses)."""

    mode: Mode
    fault: str
    policy_name: str
    policy_sha256: str
    motion_name: str
    phase: float
    lowstate_age_ms: float
    """-1 until the node has a LowState."""


class EpisodeEnd(Enum):
    """How the POLICY run of an episode ended."""

    COMPLETE = "complete"
    """The motion ran to phase 1 and the node went to HOLD on its own."""
    FAULT = "fault"
    """The node latched DAMPING (a fall trips the tilt limit): a finished, shorter episode."""
    TIMEOUT = "timeout"
    """Still in POLICY after ``timeout_s``: the client requested HOLD."""
    INTERRUPTED = "interrupted"
    """Someone else moved the node out of POLICY before the motion ended."""


@dataclass(frozen=True)
class EpisodeOutcome:
    """One recorded episode."""

    bag: Path
    episode_id: str
    end: EpisodeEnd
    reason: str
    """The fault, or the recorder's stop reason."""
    final_phase: float
    policy_s: float
    """Wall seconds from POLICY accepted to POLICY left."""


@dataclass(frozen=True)
class Progress:
    """What :meth:`GraphClient.run_episode` is doing (for a progress display)."""

    stage: str
    """``prepare``, ``ramp``, ``policy``, ``stop`` or ``done``."""
    message: str
    phase: float | None = None


ProgressFn = Callable[[Progress], None]


def episode_end(mode: Mode, phase: float, timed_out: bool) -> EpisodeEnd:
    """Classify how POLICY was left from the mode it was left for and the last phase seen."""
    if mode is Mode.DAMPING:
        return EpisodeEnd.FAULT
    if timed_out:
        return EpisodeEnd.TIMEOUT
    return EpisodeEnd.COMPLETE if phase >= 0.999 else EpisodeEnd.INTERRUPTED


def _request_event(request: Mode | Event) -> Event:
    """A SetMode request (values equal ``SetMode.REQUEST_*``) from a target mode or an event."""
    return Event[f"REQUEST_{request.name}"] if isinstance(request, Mode) else request


class GraphClient:
    """A client node of the sim2sim graph with its own rclpy context, spun on a background thread.

    Use as a context manager (or call :meth:`close`). Not for concurrent use from several threads.
    """

    def __init__(self, cfg: GraphClientCfg | None = None, progress: ProgressFn | None = None) -> None:
        self.cfg = cfg or GraphClientCfg()
        self.progress = progress
        self.last_episode: EpisodeOutcome | None = None
        names = self.cfg.names
        self._context = rclpy.Context()
        rclpy.init(args=[], context=self._context, signal_handler_options=SignalHandlerOptions.NO)
        self._node = rclpy.create_node(self.cfg.node_name, context=self._context)
        self._cv = threading.Condition()
        self._statuses: deque[Any] = deque(maxlen=STATUS_HISTORY)  # PolicyStatus, in arrival order
        self._status_count = 0  # statuses received so far (the newest is number count - 1)
        self._events: list[Any] = []  # EpisodeEvent, in arrival order
        reliable = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)
        latched = QoSProfile(
            depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        self._node.create_subscription(PolicyStatus, names.policy_status, self._on_status, reliable)
        self._node.create_subscription(EpisodeEvent, names.episode_events, self._on_event, latched)
        self._clients: dict[str, Any] = {
            names.set_mode: self._node.create_client(SetMode, names.set_mode),
            names.load_policy: self._node.create_client(LoadPolicy, names.load_policy),
            **{
                n: self._node.create_client(Trigger, n)
                for n in (
                    names.twin_reset,
                    names.release_band_on_new_command,
                    names.hold_band,
                    names.recorder_start,
                )
            },
        }
        self._executor = SingleThreadedExecutor(context=self._context)
        self._executor.add_node(self._node)
        self._spinner = threading.Thread(target=self._spin, name="graph_client", daemon=True)
        self._spinner.start()
        self._ready = False

    def __enter__(self) -> GraphClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop spinning and leave the graph."""
        self._executor.shutdown(timeout_sec=2.0)
        self._spinner.join(timeout=2.0)  # the spin thread must be out of the wait set first
        self._node.destroy_node()
        self._context.try_shutdown()

    def _spin(self) -> None:
        with contextlib.suppress(ExternalShutdownException):
            self._executor.spin()

    def _on_status(self, msg: Any) -> None:
        with self._cv:
            self._statuses.append(msg)
            self._status_count += 1
            self._cv.notify_all()

    def _statuses_since(self, count: int) -> list[Any]:
        """Statuses received after the first ``count`` (call under ``_cv``)."""
        new = self._status_count - count
        return list(self._statuses)[-new:] if new > 0 else []

    def _on_event(self, msg: Any) -> None:
        with self._cv:
            self._events.append(msg)
            self._cv.notify_all()

    # -- state ----------------------------------------------------------------------------------

    def status(self) -> NodeStatus | None:
        """The newest /policy/status, None before the first."""
        with self._cv:
            msg = self._statuses[-1] if self._statuses else None
        if msg is None:
            return None
        return NodeStatus(
            Mode(msg.mode),
            msg.fault,
            msg.policy_name,
            msg.policy_sha256,
            msg.motion_name,
            float(msg.phase),
            float(msg.lowstate_age_ms),
        )

    def _wait(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        with self._cv:
            return self._cv.wait_for(predicate, timeout_s)

    def _report(self, stage: str, message: str, phase: float | None = None) -> None:
        log.info("%s: %s", stage, message)
        if self.progress is not None:
            self.progress(Progress(stage, message, phase))

    def missing(self) -> list[str]:
        """What the graph still lacks for an episode (empty = ready), each naming its node."""
        names, node = self.cfg.names, self._node
        services = {n for n, _ in node.get_service_names_and_types()}
        owners = {
            names.set_mode: "policy_node",
            names.load_policy: "policy_node",
            names.twin_reset: "twin g1_sim",
            names.release_band_on_new_command: "twin g1_sim",
            names.hold_band: "twin g1_sim",
            names.recorder_start: "recorder",
        }
        out = [f"service {s} ({owner})" for s, owner in owners.items() if s not in services]
        status = self.status()
        if status is None:
            out.append(f"{names.policy_status} (policy_node)")
        elif status.lowstate_age_ms < 0:
            out.append("policy_node has no /lowstate yet (twin g1_sim)")
        for topic in names.recorded:
            readers = {i.node_name for i in node.get_subscriptions_info_by_topic(topic)}
            if names.recorder_node not in readers:
                out.append(f"recorder subscribed to {topic}")
        return out

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        """Wait until the twin, the policy node and the recorder are up and connected.

        Raises :class:`GraphNotReadyError` naming everything still missing.
        """
        deadline = time.monotonic() + timeout_s
        while (missing := self.missing()) and time.monotonic() < deadline:
            time.sleep(0.1)
        if missing:
            raise GraphNotReadyError(
                f"sim2sim graph not ready after {timeout_s:g} s, missing: {'; '.join(missing)}. {START_HINT}"
            )
        self._ready = True

    # -- services -------------------------------------------------------------------------------

    def _call(self, service: str, request: Any, answer_s: float | None = None) -> Any:
        client = self._clients[service]
        if not client.wait_for_service(timeout_sec=self.cfg.service_timeout_s):
            raise GraphNotReadyError(
                f"service {service} not available after {self.cfg.service_timeout_s:g} s; {START_HINT}"
            )
        done = threading.Event()
        future = client.call_async(request)
        future.add_done_callback(lambda _: done.set())
        answer_s = self.cfg.service_timeout_s if answer_s is None else answer_s
        if not done.wait(answer_s):
            client.remove_pending_request(future)
            raise GraphError(f"service {service} did not answer within {answer_s:g} s")
        return future.result()

    def load_policy(self, path: str | Path, blend_ticks: int = 0) -> LoadResult:
        """Send an artifact to the running policy node (LoadPolicy); the node validates, dry-runs and
        swaps it in, or refuses and keeps the running one. ``blend_ticks`` 0 = the node's default.

        A path that exists here is sent absolute (the node resolves it in its own working folder).
        """
        local = Path(path).expanduser()
        sent = str(local.resolve()) if local.exists() else str(path)
        request = LoadPolicy.Request(path=sent, blend_ticks=int(blend_ticks))
        reply = self._call(self.cfg.names.load_policy, request, self.cfg.load_timeout_s)
        return LoadResult(reply.accepted, reply.message, reply.policy_sha256, reply.policy_name)

    def set_mode(self, request: Mode | Event, reason: str = "asap graph client") -> ModeReply:
        """Ask the policy node for a mode (``Mode.RAMP``, ...) or an event (``Event.RESET``)."""
        event = _request_event(request)
        msg = SetMode.Request(request=event.value, reason=reason)
        reply = self._call(self.cfg.names.set_mode, msg)
        return ModeReply(reply.accepted, Mode(reply.mode), reply.message)

    def _require_mode(self, request: Mode | Event, reason: str) -> Mode:
        reply = self.set_mode(request, reason)
        if not reply.accepted:
            raise GraphError(
                f"policy_node refused {_request_event(request).name} in {reply.mode.name}: {reply.message}"
            )
        return reply.mode

    def _trigger(self, service: str) -> str:
        reply = self._call(service, Trigger.Request())
        if not reply.success:
            raise GraphError(f"{service} refused: {reply.message}")
        return reply.message

    def reset_twin(self) -> str:
        """Twin back to its initial pose at rest, held by the band (sim time runs on)."""
        return self._trigger(self.cfg.names.twin_reset)

    def release_band_on_new_command(self) -> str:
        """Arm the twin's band to let go with the first LowCmd that differs from the current one."""
        return self._trigger(self.cfg.names.release_band_on_new_command)

    def hold_band(self) -> str:
        """Catch the twin's pelvis where it is and turn it upright."""
        return self._trigger(self.cfg.names.hold_band)

    # -- episodes -------------------------------------------------------------------------------

    def run_episode(self, timeout_s: float = 60.0, *, release_band: bool = True) -> Path:
        """One episode (see the module docstring); the closed bag's folder. Details: :attr:`last_episode`."""
        return self.record_episode(timeout_s, release_band=release_band).bag

    def record_episode(self, timeout_s: float = 60.0, *, release_band: bool = True) -> EpisodeOutcome:
        """Reset, ramp, run the policy until the motion ends or a fault, and wait for the recorder's bag.

        ``timeout_s`` bounds the POLICY run (wall s): past it the client requests HOLD and the episode
        ends as TIMEOUT. A fault (DAMPING) is a finished episode (``end`` FAULT), not an error. Raises
        :class:`GraphError` when a node refuses a step (naming it and its reason) or the recorder fails.
        """
        if not self._ready:
            self.wait_ready(self.cfg.ready_timeout_s)
        self._prepare()
        with self._cv:
            known = {e.episode_id for e in self._events}
            seen = self._status_count
        if release_band:
            # with the policy's first command, as a gantry is lowered under a running policy: HOLD
            # cannot balance the free robot, and each tick it stood in HOLD first was a tick of falling
            # the policy inherited (measured on the twin core, tired_ankles: released 2 ticks before
            # POLICY, the shipped policy fell at 1.6 s; with its first tick, at 2.9 s, as from a free
            # start). Armed in the twin, not called after POLICY: a call after POLICY's reply let the
            # policy run 1-2 ticks on the band, more the busier the machine (in every loaded episode)
            self.release_band_on_new_command()
        reply = self.set_mode(Mode.POLICY, "episode start")
        if not reply.accepted:
            self._safe_stop(release_band)
            raise GraphError(f"policy_node refused POLICY in {reply.mode.name}: {reply.message}")
        t0 = time.monotonic()
        self._report("policy", "POLICY started")
        started = self._wait_event(lambda e: e.event == e.STARTED and e.episode_id not in known)
        if started is None:
            self._safe_stop(release_band)
            raise GraphError(
                f"recorder did not open an episode within {self.cfg.recorder_timeout_s:g} s "
                f"of POLICY (is auto_episodes on?)"
            )
        left, phase, timed_out = self._run_policy(seen, t0, timeout_s)
        policy_s = time.monotonic() - t0
        self._safe_stop(release_band)
        end = self._wait_event(lambda e: e.event != e.STARTED and e.episode_id == started.episode_id)
        if end is None:
            raise GraphError(
                f"recorder did not close episode {started.episode_id} within "
                f"{self.cfg.recorder_timeout_s:g} s"
            )
        if end.event == end.FAILED:
            raise GraphError(
                f"recorder failed episode {started.episode_id}: {end.reason} "
                f"(what was written is in {end.bag_path})"
            )
        kind = episode_end(Mode(left.mode), phase, timed_out)
        reason = left.fault if kind is EpisodeEnd.FAULT else end.reason
        outcome = EpisodeOutcome(Path(end.bag_path), started.episode_id, kind, reason, phase, policy_s)
        self.last_episode = outcome
        self._report(
            "done",
            f"episode {outcome.episode_id} {kind.value} at phase {phase:.2f} after "
            f"{policy_s:.1f} s ({reason}); {end.message_count} messages in {outcome.bag}",
            phase,
        )
        return outcome

    def _prepare(self) -> None:
        """Motors off (or damped), twin reset into the band, RAMP to the default pose, HOLD.

        A refused RAMP or a fault during it (e.g. a stale LowState on a loaded machine) is retried from
        the reset, up to ``prepare_attempts`` times: nothing was recorded yet.
        """
        for attempt in range(1, self.cfg.prepare_attempts + 1):
            fault = self._reset_and_ramp()
            if not fault:
                return
            message = f"policy_node did not ramp (attempt {attempt}): {fault}"
            if attempt == self.cfg.prepare_attempts:
                raise GraphError(message)
            self._report("prepare", f"{message}; resetting again")

    def _reset_and_ramp(self) -> str:
        """One try of :meth:`_prepare`; why the ramp did not end in HOLD, empty on success."""
        status = self.status()
        mode = status.mode if status else Mode.ZERO_TORQUE
        if mode is Mode.POLICY:
            mode = self._require_mode(Mode.HOLD, "episode prepare")
        if mode in (Mode.RAMP, Mode.HOLD):
            mode = self._require_mode(Mode.ZERO_TORQUE, "episode prepare: motors off for the twin reset")
        self._report("prepare", self.reset_twin())
        if mode is Mode.DAMPING:
            self._require_mode(Event.RESET, "episode prepare: clear the latched fault")
        if refused := self._ticks_on_the_reset_twin():
            return refused
        with self._cv:
            seen = self._status_count
        reply = self.set_mode(Mode.RAMP, "episode prepare")
        if not reply.accepted:  # e.g. "no fresh LowState" while a busy machine lags
            return f"RAMP refused in {reply.mode.name}: {reply.message}"
        self._report("ramp", "RAMP to the policy's default pose")

        def settled() -> bool:
            tail = self._statuses_since(seen)
            return bool(tail) and tail[-1].mode in (Mode.HOLD, Mode.DAMPING)

        if not self._wait(settled, self.cfg.ramp_timeout_s):
            raise GraphError(f"policy_node did not reach HOLD within {self.cfg.ramp_timeout_s:g} s of RAMP")
        status = self.status()
        if status is not None and status.mode is Mode.DAMPING:  # (settled: there is one)
            return f"DAMPING latched during the ramp: {status.fault or '(no reason given)'}"
        return ""

    def _ticks_on_the_reset_twin(self) -> str:
        """Let node ticks pass after the reset, so that RAMP starts from the reset pose; why not, else "".

        RAMP interpolates from the state of its first tick, and the first tick after a reset may still run
        on a state from before it: a lock-step twin reset while it waited for the node's command at a
        sync state had already published that state (in real time, a state in flight does the same).
        Started from there (the robot hanging limp in the band), the ramp first pulled the reset robot
        toward that pose; its feet scuffed in the band and the policy started from another stance and
        fell (1 of 12 evaluation episodes; the twin core, ramped from the limp state, reproduces that
        episode to 0.004 rad). A SetMode reply comes after the tick that applied it: in lock-step the
        tick after the first reply runs on a state the twin published after the reset; the second
        request is the margin for a real-time twin, whose states race the ticks."""
        for _ in range(2):
            reply = self.set_mode(Mode.ZERO_TORQUE, "episode prepare: a tick on the reset twin")
            if not reply.accepted:
                return f"ZERO_TORQUE refused in {reply.mode.name}: {reply.message}"
        return ""

    def _run_policy(self, seen: int, t0: float, timeout_s: float) -> tuple[Any, float, bool]:
        """Wait until a status after ``seen`` leaves POLICY (having been in it); progress meanwhile.

        Returns (the status that left POLICY, the run's last phase, whether the client stopped it).
        The leaving status carries the phase of the last tick that ran the policy.
        """
        state = {"in": False, "phase": 0.0}

        def left() -> Any:
            state["in"] = False  # each call scans the statuses since ``seen`` from the start
            for s in self._statuses_since(seen):
                if s.mode == Mode.POLICY:
                    state["in"], state["phase"] = True, float(s.phase)
                elif state["in"] or s.mode == Mode.DAMPING:
                    return s
            return None

        timed_out, stopped_at = False, None
        while True:
            period = self.cfg.progress_period_s
            if not timed_out and time.monotonic() - t0 > timeout_s:
                self._report("stop", f"still in POLICY after {timeout_s:g} s: requesting HOLD")
                self.set_mode(Mode.HOLD, "episode timeout")
                timed_out, stopped_at = True, time.monotonic()
            if stopped_at is not None and time.monotonic() - stopped_at > self.cfg.service_timeout_s:
                raise GraphError(f"policy_node stayed in POLICY {self.cfg.service_timeout_s:g} s after HOLD")
            with self._cv:
                self._cv.wait_for(lambda: left() is not None, period)
                out = left()
            if out is not None:
                return out, float(out.phase) if state["in"] else 0.0, timed_out
            self._report(
                "policy", f"phase {state['phase']:.2f} ({time.monotonic() - t0:.0f} s)", state["phase"]
            )

    def _safe_stop(self, band: bool) -> None:
        """Out of POLICY (to HOLD) and the robot caught in the band."""
        if band:
            self.hold_band()
        status = self.status()
        if status is not None and status.mode is Mode.POLICY:
            self.set_mode(Mode.HOLD, "episode stop")

    def _wait_event(self, match: Callable[[Any], bool]) -> Any:
        found: list[Any] = []

        def seen() -> bool:
            found[:] = [e for e in self._events if match(e)]
            return bool(found)

        return found[0] if self._wait(seen, self.cfg.recorder_timeout_s) else None
