"""The operator state machine of the policy node, as data and one pure transition function.

    ZERO_TORQUE ──ramp──► RAMP ──(ramp done)──► HOLD ──policy──► POLICY ──(motion done)──► HOLD
         ▲                                                                                    │
         └──────────────── reset ◄── DAMPING ◄── any fault or e-stop, from every mode ◄───────┘

DAMPING is latched: only an explicit reset leaves it, back to ZERO_TORQUE. Requests come from the
``SetMode`` service (values equal ``asap_msgs/SetMode.REQUEST_*``) or from remote combos decoded
from ``LowState.wireless_remote`` (:data:`COMBOS`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, IntEnum

from asap_core.remote import RemoteState


class Mode(IntEnum):
    """Operator modes; values equal ``asap_msgs/PolicyStatus.MODE_*``."""

    ZERO_TORQUE = 0
    RAMP = 1
    HOLD = 2
    POLICY = 3
    DAMPING = 4


ACTIVE_MODES = frozenset({Mode.RAMP, Mode.HOLD, Mode.POLICY})
"""Modes that command positions with stiffness: the state must be fresh and sane in them."""


class Event(Enum):
    """What can move the state machine."""

    REQUEST_ZERO_TORQUE = 0
    REQUEST_RAMP = 1
    REQUEST_HOLD = 2
    REQUEST_POLICY = 3
    REQUEST_DAMPING = 4
    RESET = 5
    RAMP_DONE = 6
    MOTION_DONE = 7
    FAULT = 8


def request_event(request: int) -> Event:
    """The event of a ``SetMode.request`` value (0-5)."""
    if not 0 <= request <= Event.RESET.value:
        raise ValueError(f"unknown SetMode request {request}; expected 0..{Event.RESET.value}")
    return Event(request)


@dataclass(frozen=True)
class Guards:
    """Reasons (empty = none) the node forbids a transition right now."""

    start: str = ""
    """Why the robot may not leave ZERO_TORQUE (another /lowcmd publisher, no fresh state, ...)."""
    policy: str = ""
    """Why POLICY may not start (no policy loaded, pose too far from the default, ...)."""


@dataclass(frozen=True)
class Transition:
    """The outcome of one event."""

    mode: Mode
    accepted: bool
    reason: str = ""


NO_GUARDS = Guards()


def next_mode(mode: Mode, event: Event, guards: Guards = NO_GUARDS) -> Transition:
    """The mode after ``event`` in ``mode``; refusals keep the mode and say why."""
    if event in (Event.FAULT, Event.REQUEST_DAMPING):
        return Transition(Mode.DAMPING, True)
    if mode is Mode.DAMPING:
        if event is Event.RESET:
            return Transition(Mode.ZERO_TORQUE, True)
        return Transition(mode, False, "DAMPING is latched; send a reset first")
    if event is Event.RESET:
        return Transition(mode, False, "nothing to reset (not in DAMPING)")
    target = _TABLE.get((mode, event))
    if target is None:
        return Transition(mode, False, f"{event.name} is not allowed in {mode.name}")
    if mode is Mode.ZERO_TORQUE and target is not Mode.ZERO_TORQUE and guards.start:
        return Transition(mode, False, guards.start)
    if target is Mode.POLICY and mode is not Mode.POLICY and guards.policy:
        return Transition(mode, False, guards.policy)
    return Transition(target, True)


_Z, _R, _H, _P = Mode.ZERO_TORQUE, Mode.RAMP, Mode.HOLD, Mode.POLICY
_TABLE: dict[tuple[Mode, Event], Mode] = {
    (_Z, Event.REQUEST_ZERO_TORQUE): _Z,
    (_Z, Event.REQUEST_RAMP): _R,
    (_R, Event.REQUEST_ZERO_TORQUE): _Z,
    (_R, Event.REQUEST_RAMP): _R,
    (_R, Event.REQUEST_HOLD): _H,
    (_R, Event.RAMP_DONE): _H,
    (_H, Event.REQUEST_ZERO_TORQUE): _Z,
    (_H, Event.REQUEST_RAMP): _R,
    (_H, Event.REQUEST_HOLD): _H,
    (_H, Event.REQUEST_POLICY): _P,
    (_P, Event.REQUEST_HOLD): _H,
    (_P, Event.MOTION_DONE): _H,
}
"""Every allowed (mode, event) pair besides faults, e-stop and reset. Zero torque is refused in
POLICY on purpose: stop through HOLD (stiff) or DAMPING, never by dropping a moving robot."""


COMBOS: tuple[tuple[tuple[str, ...], Event], ...] = (
    (("L2", "B"), Event.REQUEST_DAMPING),  # e-stop, checked first, acts while held
    (("L2", "start"), Event.RESET),
    (("L2", "down"), Event.REQUEST_ZERO_TORQUE),
    (("L2", "up"), Event.REQUEST_RAMP),
    (("L1", "A"), Event.REQUEST_HOLD),
    (("R1", "A"), Event.REQUEST_POLICY),
)
"""Remote button combos (``asap_core.remote`` names) and the request each one sends."""


def remote_events(previous: RemoteState, current: RemoteState) -> list[Event]:
    """Requests from the remote: the e-stop while held, other combos once when pressed."""
    if current.is_pressed(*COMBOS[0][0]):
        return [COMBOS[0][1]]
    return [event for buttons, event in COMBOS[1:]
            if current.is_pressed(*buttons) and not previous.is_pressed(*buttons)]
