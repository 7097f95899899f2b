"""Helpers for tests that run real rclpy nodes and processes over DDS (no sleeps-and-hope)."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path


def isolate() -> None:
    """Keep this test session's DDS traffic to itself: a random ``ROS_DOMAIN_ID`` (unless one is set) and
    localhost discovery, so parallel runs and other processes on the machine never cross-talk. Call it
    before anything imports rclpy (a conftest.py); processes the tests spawn inherit it."""
    os.environ.setdefault("ROS_DOMAIN_ID", str(random.SystemRandom().randint(1, 101)))
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")


def spawn(script: str | Path, *args: str, **popen_kwargs) -> subprocess.Popen:
    """Start ``script`` (a path, or ``-m module``) with this interpreter in its own process."""
    cmd = [sys.executable, *(["-m", str(script)[3:]] if str(script).startswith("-m ") else [str(script)])]
    return subprocess.Popen([*cmd, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, **popen_kwargs)


def spin_until(node, predicate: Callable[[], bool], timeout_s: float, executor=None) -> bool:
    """Spin ``node`` until ``predicate()`` holds or ``timeout_s`` passes; return the predicate."""
    # imported here: every conftest.py imports this module (isolate) first, also where rclpy is absent
    # (the robot's Python 3.10 test venv)
    import rclpy

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        if executor is not None:
            executor.spin_once(timeout_sec=0.01)
        else:
            rclpy.spin_once(node, timeout_sec=0.01)
    return predicate()


def wait_for(predicate: Callable[[], bool], timeout_s: float) -> bool:
    """Poll ``predicate()`` (others spin the nodes) until it holds or ``timeout_s`` passes; return it."""
    deadline = time.monotonic() + timeout_s
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.02)
    return predicate()


def finish(proc: subprocess.Popen, timeout_s: float = 10.0) -> tuple[int, str, str]:
    """Wait for a process (terminating it if needed); return (code, stdout, stderr)."""
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            out, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
    return proc.returncode, out, err


@contextlib.contextmanager
def runner_graph(*args: str, log: Path) -> Iterator[subprocess.Popen]:
    """``python -m asap_bringup.runner *args`` (a graph of nodes as users start it), its output in ``log``;
    on exit Ctrl-C as a user stops it (SIGKILL to its process group after 15 s), then the log's tail is
    printed for the test report."""
    with log.open("w") as out:
        runner = subprocess.Popen([sys.executable, "-m", "asap_bringup.runner", *args], stdout=out,
                                  stderr=subprocess.STDOUT, start_new_session=True,
                                  env=dict(os.environ, PYTHONUNBUFFERED="1"))
        try:
            yield runner
        finally:
            runner.send_signal(signal.SIGINT)
            try:
                runner.wait(15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(runner.pid, signal.SIGKILL)
                runner.wait()
    print(log.read_text()[-4000:])
