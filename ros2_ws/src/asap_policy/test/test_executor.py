"""InlineExecutor: fast callbacks keep running while an offloaded service callback blocks; errors surface.

Real rclpy in one process: a publisher, a subscription and a Trigger service on a node spun by the
executor in a thread, driven through DDS by a client node.
"""

from __future__ import annotations

import threading
import time

import pytest

rclpy = pytest.importorskip("rclpy")
from rclpy.callback_groups import ReentrantCallbackGroup  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from std_msgs.msg import Int32  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from asap_policy.executor import InlineExecutor  # noqa: E402


def _wait(condition, timeout_s: float = 10.0) -> bool:
    end = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < end:
        time.sleep(0.01)
    return condition()


@pytest.fixture
def context():
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    yield ctx
    rclpy.try_shutdown(context=ctx)


def test_subscriptions_run_while_an_offloaded_service_blocks(context) -> None:
    server = rclpy.create_node("inline_server", context=context)
    blocking = ReentrantCallbackGroup()
    release, received, threads = threading.Event(), [], set()

    def serve(_req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        threads.add(threading.current_thread().name)
        release.wait(10.0)  # like SetMode waiting for the control tick that applies it
        res.success, res.message = True, f"served after {len(received)} messages"
        return res

    def on_int(msg: Int32) -> None:
        threads.add(threading.current_thread().name)
        received.append(msg.data)

    server.create_service(Trigger, "/inline_test/block", serve, callback_group=blocking)
    server.create_subscription(Int32, "/inline_test/ints", on_int, 10)
    executor = InlineExecutor(offload={blocking: 2}, context=context)
    executor.add_node(server)
    spinner = threading.Thread(target=executor.spin, name="spinner", daemon=True)
    spinner.start()

    client_node = rclpy.create_node("inline_client", context=context)
    client_exec = SingleThreadedExecutor(context=context)
    client_exec.add_node(client_node)
    pub = client_node.create_publisher(Int32, "/inline_test/ints", 10)
    client = client_node.create_client(Trigger, "/inline_test/block")
    try:
        assert client.wait_for_service(10.0)
        future = client.call_async(Trigger.Request())
        assert _wait(lambda: (client_exec.spin_once(0.01), bool(threads))[1])  # the service is blocking now
        for i in range(5):
            pub.publish(Int32(data=i))
        # the subscription is served although the service callback has not returned
        assert _wait(lambda: (client_exec.spin_once(0.01), len(received) == 5)[1]), received
        assert not future.done()
        release.set()
        assert _wait(lambda: (client_exec.spin_once(0.01), future.done())[1])
        assert future.result().message == "served after 5 messages"
        assert "spinner" in threads and any(t.startswith("offloaded_callback") for t in threads)
    finally:
        release.set()
        executor.shutdown()
        spinner.join(5.0)
        client_exec.shutdown()


def test_an_inline_callback_error_reaches_the_spinning_thread(context) -> None:
    node = rclpy.create_node("inline_error", context=context)
    node.create_timer(0.01, lambda: 1 / 0)
    executor = InlineExecutor(offload={ReentrantCallbackGroup(): 2}, context=context)
    executor.add_node(node)
    try:
        with pytest.raises(ZeroDivisionError):
            executor.spin_once(timeout_sec=2.0)
    finally:
        executor.shutdown()


def test_a_blocked_group_does_not_delay_another_and_errors_go_to_on_error(context) -> None:
    """SetMode must never wait behind LoadPolicy: each offloaded group has a pool of its own."""
    server = rclpy.create_node("inline_groups", context=context)
    loads, modes = ReentrantCallbackGroup(), ReentrantCallbackGroup()
    release, errors = threading.Event(), []

    def block(_req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        release.wait(10.0)  # like a load that takes seconds
        res.success = True
        return res

    def answer(_req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        res.success = True
        return res

    def boom(_req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        raise RuntimeError("planted")

    server.create_service(Trigger, "/groups/load", block, callback_group=loads)
    server.create_service(Trigger, "/groups/mode", answer, callback_group=modes)
    server.create_service(Trigger, "/groups/boom", boom, callback_group=modes)
    executor = InlineExecutor(offload={loads: 2, modes: 2}, context=context,
                              on_error=lambda e, name: errors.append((name, str(e))))
    executor.add_node(server)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    client_node = rclpy.create_node("groups_client", context=context)
    client_exec = SingleThreadedExecutor(context=context)
    client_exec.add_node(client_node)
    clients = {n: client_node.create_client(Trigger, f"/groups/{n}") for n in ("load", "mode", "boom")}
    try:
        assert all(c.wait_for_service(10.0) for c in clients.values())
        blocked = [clients["load"].call_async(Trigger.Request()) for _ in range(2)]  # both load threads
        time.sleep(0.2)
        mode = clients["mode"].call_async(Trigger.Request())
        assert _wait(lambda: (client_exec.spin_once(0.01), mode.done())[1])
        assert not any(f.done() for f in blocked)
        clients["boom"].call_async(Trigger.Request())
        assert _wait(lambda: (client_exec.spin_once(0.01), bool(errors))[1])
        assert errors == [("boom", "planted")] and spinner.is_alive()
    finally:
        release.set()
        executor.shutdown()
        spinner.join(5.0)
        client_exec.shutdown()
