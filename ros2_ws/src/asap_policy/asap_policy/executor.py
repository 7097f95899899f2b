"""The policy node's executor: callbacks run inline, blocking services on a small thread pool."""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from rclpy.callback_groups import CallbackGroup
from rclpy.context import Context
from rclpy.executors import Executor, ShutdownException, TimeoutException
from rclpy.task import Task


class InlineExecutor(Executor):
    """Runs every callback in the spinning thread, except those of the ``offload`` groups (services
    that block while a model loads or until a control tick applies them; slow timers), which get pool
    threads.

    rclpy's MultiThreadedExecutor hands *every* callback to a thread pool and scans its list of pending
    futures after each one. With /lowstate at 500 Hz (and /clock at 500 Hz under sim time) the policy
    node spent ~95 % of a core in that hand-off once a backlog formed, and a lock-step graph crawled at
    0.1x real time (py-spy: ``_spin_once_impl``/``Future.done`` and pool workers on top). The hot
    callbacks here only store bytes or a time, so running them inline costs less than any hand-off.
    """

    def __init__(
        self, offload: Iterable[CallbackGroup], threads: int = 2, *, context: Context | None = None
    ) -> None:
        super().__init__(context=context)
        self._offload = tuple(offload)
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="offloaded_callback")
        self._offloaded: list[Task] = []

    def spin_once(self, timeout_sec: float | None = None) -> None:
        """Wait for one ready callback and run it (inline, or on the pool for the offload group)."""
        try:
            handler, entity, _ = self.wait_for_ready_callbacks(timeout_sec=timeout_sec)
        except (ShutdownException, TimeoutException):
            return
        if any(getattr(entity, "callback_group", None) is group for group in self._offload):
            self._pool.submit(handler)
            self._offloaded.append(handler)
        else:
            handler()
            handler.result()  # raises what the callback raised, as rclpy's executors do
        for task in [t for t in self._offloaded if t.done()]:
            self._offloaded.remove(task)
            task.result()

    def shutdown(self, timeout_sec: float | None = None) -> bool:
        """Stop spinning; blocked offloaded callbacks are not waited for."""
        done = super().shutdown(timeout_sec)
        self._pool.shutdown(wait=False)
        return done
