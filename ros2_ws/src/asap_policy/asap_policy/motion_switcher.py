"""Release Unitree's built-in controller through the motion-switcher RPC (real robot only).

Before a user program may write /lowcmd, the G1's own locomotion must be released: send
``CHECK_MODE`` (api 1001) on ``/api/motion_switcher/request`` and, while the reply's JSON names an
active mode, ``RELEASE_MODE`` (1003) and wait; bounded attempts (unitree_ros2's
``g1_motion_switch_client``; Isaac's plugin: 5 attempts, 2 s apart). :func:`release` is the pure
procedure over a ``call`` function; :class:`MotionSwitcherClient` supplies it over DDS.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable

from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from unitree_api.msg import Request, Response

from asap_core import interfaces

CHECK_MODE = 1001
RELEASE_MODE = 1003

Reply = tuple[int, str] | None
"""(status code, data) of a response, None when none came in time."""


def active_mode(data: str) -> str:
    """The ``name`` of the active built-in mode in a CHECK_MODE reply ("" = none)."""
    try:
        return str(json.loads(data or "{}").get("name", ""))
    except (json.JSONDecodeError, AttributeError):
        return f"<unreadable reply {data!r}>"


def release(call: Callable[[int], Reply], attempts: int, wait_s: float,
            sleep: Callable[[float], None] = time.sleep) -> tuple[bool, str]:
    """Check and release until no built-in mode is active; (released, what happened)."""
    last = "no reply to CHECK_MODE"
    for attempt in range(1, attempts + 1):
        reply = call(CHECK_MODE)
        if reply is not None:
            code, data = reply
            mode = active_mode(data)
            if code == 0 and not mode:
                return True, f"no built-in mode active (attempt {attempt}/{attempts})"
            last = f"CHECK_MODE code {code}, active mode {mode!r}"
            call(RELEASE_MODE)
        sleep(wait_s)
    return False, f"gave up after {attempts} attempts: {last}"


class MotionSwitcherClient:
    """The RPC over DDS: publish a Request, wait for the Response with the same identity id."""

    def __init__(self, node: Node) -> None:
        qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        self._node = node
        self._pub = node.create_publisher(Request, interfaces.MOTION_SWITCHER_REQUEST, qos)
        self._sub = node.create_subscription(
            Response, interfaces.MOTION_SWITCHER_RESPONSE, self._on_response, qos
        )
        self._ids = itertools.count(int(time.time() * 1000))
        self._replies: dict[int, tuple[int, str]] = {}
        self._arrived = threading.Condition()
        self._timeout_s = 2.0

    def _on_response(self, msg: Response) -> None:
        with self._arrived:
            self._replies[msg.header.identity.id] = (msg.header.status.code, msg.data)
            self._arrived.notify_all()

    def call(self, api_id: int) -> Reply:
        """One request; the reply or None after the timeout."""
        request = Request()
        request.header.identity.id = next(self._ids)
        request.header.identity.api_id = api_id
        self._pub.publish(request)
        with self._arrived:
            self._arrived.wait_for(lambda: request.header.identity.id in self._replies, self._timeout_s)
            return self._replies.pop(request.header.identity.id, None)

    def release(self, attempts: int, timeout_s: float) -> tuple[bool, str]:
        """Run :func:`release` with ``timeout_s`` per reply and between attempts."""
        self._timeout_s = timeout_s
        return release(self.call, attempts, timeout_s)

    def destroy(self) -> None:
        """Take the RPC's publisher and subscription off the node."""
        self._node.destroy_publisher(self._pub)
        self._node.destroy_subscription(self._sub)
