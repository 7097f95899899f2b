"""The motion-switcher release procedure against scripted replies (no robot, no DDS)."""

from __future__ import annotations

import pytest

pytest.importorskip("rclpy")
from asap_policy.motion_switcher import CHECK_MODE, RELEASE_MODE, active_mode, release


def scripted(replies: list) -> tuple[list[int], object]:
    calls: list[int] = []
    checks = iter(replies)

    def call(api_id: int):
        calls.append(api_id)
        return next(checks) if api_id == CHECK_MODE else (0, "")
    return calls, call


def test_releases_until_no_mode_is_active() -> None:
    calls, call = scripted([(0, '{"form":"0","name":"ai"}'), (0, '{"form":"0","name":""}')])
    ok, message = release(call, attempts=5, wait_s=0.0, sleep=lambda s: None)
    assert ok and "attempt 2/5" in message
    assert calls == [CHECK_MODE, RELEASE_MODE, CHECK_MODE]


def test_gives_up_after_bounded_attempts() -> None:
    calls, call = scripted([None, (0, '{"name":"normal"}'), (0, '{"name":"normal"}')])
    slept: list[float] = []
    ok, message = release(call, attempts=3, wait_s=2.0, sleep=slept.append)
    assert not ok and "3 attempts" in message and "'normal'" in message
    assert slept == [2.0, 2.0, 2.0] and calls.count(CHECK_MODE) == 3


def test_active_mode_parsing() -> None:
    assert active_mode('{"name": "ai"}') == "ai"
    assert active_mode("") == ""
    assert active_mode("oops").startswith("<unreadable")
