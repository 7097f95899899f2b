"""The operator state machine: every allowed transition, refusals with reasons, remote combos."""

from __future__ import annotations

import pytest

from asap_core import remote
from asap_core.modes import (
    COMBOS,
    Event,
    Guards,
    Mode,
    Transition,
    next_mode,
    remote_events,
    request_event,
)

Z, R, H, P, D = Mode.ZERO_TORQUE, Mode.RAMP, Mode.HOLD, Mode.POLICY, Mode.DAMPING


def test_mode_values_equal_policy_status_constants() -> None:
    # asap_msgs/PolicyStatus.msg: MODE_ZERO_TORQUE=0 ... MODE_DAMPING=4, SetMode.REQUEST_* the same
    assert [m.value for m in (Z, R, H, P, D)] == [0, 1, 2, 3, 4]
    assert [request_event(i) for i in range(6)] == [
        Event.REQUEST_ZERO_TORQUE, Event.REQUEST_RAMP, Event.REQUEST_HOLD, Event.REQUEST_POLICY,
        Event.REQUEST_DAMPING, Event.RESET]
    with pytest.raises(ValueError, match="unknown SetMode request 6"):
        request_event(6)


@pytest.mark.parametrize(("mode", "event", "expected"), [
    (Z, Event.REQUEST_RAMP, R), (R, Event.RAMP_DONE, H), (H, Event.REQUEST_POLICY, P),
    (P, Event.MOTION_DONE, H), (P, Event.REQUEST_HOLD, H), (H, Event.REQUEST_RAMP, R),
    (R, Event.REQUEST_HOLD, H), (H, Event.REQUEST_ZERO_TORQUE, Z), (R, Event.REQUEST_ZERO_TORQUE, Z),
    (D, Event.RESET, Z),
])
def test_allowed_transitions(mode: Mode, event: Event, expected: Mode) -> None:
    t = next_mode(mode, event)
    assert (t.mode, t.accepted, t.reason) == (expected, True, "")


@pytest.mark.parametrize("mode", list(Mode))
@pytest.mark.parametrize("event", [Event.FAULT, Event.REQUEST_DAMPING])
def test_fault_and_estop_damp_from_every_mode(mode: Mode, event: Event) -> None:
    t = next_mode(mode, event, Guards(start="blocked", policy="blocked"))
    assert t.mode is D and t.accepted


@pytest.mark.parametrize("event", [e for e in Event if e not in (Event.RESET, Event.FAULT,
                                                                 Event.REQUEST_DAMPING)])
def test_damping_is_latched_until_reset(event: Event) -> None:
    t = next_mode(D, event)
    assert (t.mode, t.accepted) == (D, False) and "reset" in t.reason


@pytest.mark.parametrize(("mode", "event", "words"), [
    (Z, Event.REQUEST_POLICY, "not allowed in ZERO_TORQUE"),
    (Z, Event.REQUEST_HOLD, "not allowed"),
    (R, Event.REQUEST_POLICY, "not allowed in RAMP"),
    (P, Event.REQUEST_ZERO_TORQUE, "not allowed in POLICY"),
    (P, Event.REQUEST_RAMP, "not allowed"),
    (H, Event.RESET, "nothing to reset"),
    (Z, Event.MOTION_DONE, "not allowed"),
])
def test_refusals_keep_the_mode_and_say_why(mode: Mode, event: Event, words: str) -> None:
    t = next_mode(mode, event)
    assert t.mode is mode and not t.accepted and words in t.reason


def test_guards_block_leaving_zero_torque_and_starting_the_policy() -> None:
    guards = Guards(start="another /lowcmd publisher: rogue_node", policy="no policy loaded")
    assert next_mode(Z, Event.REQUEST_RAMP, guards) == Transition(Z, False, guards.start)
    assert next_mode(Z, Event.REQUEST_ZERO_TORQUE, guards).accepted
    assert next_mode(H, Event.REQUEST_POLICY, guards) == Transition(H, False, "no policy loaded")
    assert next_mode(H, Event.REQUEST_RAMP, guards).mode is R  # the start guard is for ZERO_TORQUE only


def _remote(*buttons: str) -> remote.RemoteState:
    return remote.decode(remote.encode(keys=remote.keys_mask(*buttons)))


def test_remote_combos_fire_once_on_press() -> None:
    none = _remote()
    assert remote_events(none, _remote("L2", "up")) == [Event.REQUEST_RAMP]
    assert remote_events(_remote("L2", "up"), _remote("L2", "up")) == []  # held: once only
    assert remote_events(_remote("L2"), _remote("L2", "up")) == [Event.REQUEST_RAMP]
    assert remote_events(none, _remote("R1", "A")) == [Event.REQUEST_POLICY]
    assert remote_events(none, _remote("A")) == []
    assert {e for _, e in COMBOS} >= {Event.REQUEST_DAMPING, Event.RESET, Event.REQUEST_RAMP,
                                      Event.REQUEST_HOLD, Event.REQUEST_POLICY}


def test_estop_acts_while_held_and_wins_over_other_combos() -> None:
    estop = _remote("L2", "B", "up")
    assert remote_events(_remote(), estop) == [Event.REQUEST_DAMPING]
    assert remote_events(estop, estop) == [Event.REQUEST_DAMPING]
