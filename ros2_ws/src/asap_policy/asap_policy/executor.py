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

    An exception from a callback goes to ``on_error(error, callback name)`` (the node damps and keeps
    spinning, so its status can say why); without one it is raised in the spinning thread, as
    rclpy's executors do.
    """

    def __init__(
        self, offload: Mapping[CallbackGroup, int], *, context: Context | None = None,
        on_error: Callable[[BaseException, str], None] | None = None,
    ) -> None:
        super().__init__(context=context)
        self._pools = {group: ThreadPoolExecutor(threads, thread_name_prefix="offloaded_callback")
                       for group, threads in offload.items()}
        self._on_error = on_error
        self._offloaded: list[tuple[Task, str]] = []

    def spin_once(self, timeout_sec: float | None = None) -> None:
        """Wait for one ready callback and run it (inline, or on its group's pool)."""
        try:
            handler, entity, _ = self.wait_for_ready_callbacks(timeout_sec=timeout_sec)
        except (ShutdownException, TimeoutException):
            return
        pool = next((p for g, p in self._pools.items() if getattr(entity, "callback_group", None) is g), None)
        name = getattr(getattr(entity, "callback", None), "__name__", type(entity).__name__)
        if pool is not None:
            # rclpy yields a task again until it starts executing: submit (and report) it once
            if all(task is not handler for task, _ in self._offloaded):
                self._offloaded.append((handler, name))
                pool.submit(self._run_offloaded, handler, name)
        else:
            handler()
            self._surface(handler, name)
        for done in [d for d in self._offloaded if d[0].done()]:
            self._offloaded.remove(done)
            if self._on_error is None:
                done[0].result()  # raises what the callback raised, in the spinning thread

    def _run_offloaded(self, task: Task, name: str) -> None:
        task()
        if self._on_error is not None:
            self._surface(task, name)  # at once: the spinning thread may wait long for new work

    def _surface(self, task: Task, name: str) -> None:
        """Raise what the callback raised, or hand it to ``on_error``."""
        if self._on_error is None:
            task.result()
        elif (error := task.exception()) is not None:
            self._on_error(error, name)

    def shutdown(self, timeout_sec: float | None = None) -> bool:
        """Stop spinning; blocked offloaded callbacks are not waited for."""
        done = super().shutdown(timeout_sec)
        for pool in self._pools.values():
            pool.shutdown(wait=False)
        return done
