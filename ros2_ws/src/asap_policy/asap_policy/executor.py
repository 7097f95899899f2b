"""The policy node's executor: callbacks run inline, blocking ones on small pools of their own."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor

from rclpy.callback_groups import CallbackGroup
from rclpy.context import Context
from rclpy.executors import Executor, ShutdownException, TimeoutException
from rclpy.task import Task


class InlineExecutor(Executor):
    """Runs every callback in the spinning thread, except those of the ``offload`` groups (services
    that block while a model loads or until a control tick applies them; slow timers), each of which
    gets a thread pool of its own, so a blocked group never delays another (SetMode never waits
    behind LoadPolicy).

    rclpy's MultiThreadedExecutor hands *every* callback to a thread pool and scans its list of pending
    futures after each one. With /lowstate at 500 Hz (and /clock at 500 Hz under sim time) the policy
    node spent ~95 % of a core in that hand-off once a backlog formed, and a lock-step graph crawled at
    0.1x real time (py-spy: ``_spin_once_impl``/``Future.done`` and pool workers on top). The hot
    callbacks here only store bytes or a time, so running them inline costs less than any hand-off.

    An exception from a callback goes to ``on_error`` (the node damps and keeps spinning, so its
    status can say why); without one it is raised in the spinning thread, as rclpy's executors do.
    """

    def __init__(
        self, offload: Mapping[CallbackGroup, int], *, context: Context | None = None,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        super().__init__(context=context)
        self._pools = {group: ThreadPoolExecutor(threads, thread_name_prefix="offloaded_callback")
                       for group, threads in offload.items()}
        self._on_error = on_error
        self._offloaded: list[Task] = []

    def spin_once(self, timeout_sec: float | None = None) -> None:
        """Wait for one ready callback and run it (inline, or on its group's pool)."""
        try:
            handler, entity, _ = self.wait_for_ready_callbacks(timeout_sec=timeout_sec)
        except (ShutdownException, TimeoutException):
            return
        pool = next((p for g, p in self._pools.items() if getattr(entity, "callback_group", None) is g), None)
        if pool is not None:
            pool.submit(handler)
            self._offloaded.append(handler)
        else:
            handler()
            self._surface(handler)
        for task in [t for t in self._offloaded if t.done()]:
            self._offloaded.remove(task)
            self._surface(task)

    def _surface(self, task: Task) -> None:
        """Raise what the callback raised, or hand it to ``on_error``."""
        if self._on_error is None:
            task.result()
        elif (error := task.exception()) is not None:
            self._on_error(error)

    def shutdown(self, timeout_sec: float | None = None) -> bool:
        """Stop spinning; blocked offloaded callbacks are not waited for."""
        done = super().shutdown(timeout_sec)
        for pool in self._pools.values():
            pool.shutdown(wait=False)
        return done
