"""Benchmark the policy node: inference latency, LowState->LowCmd latency, 50 Hz jitter, missed ticks.

    python ros2_ws/src/asap_policy/bench/bench_policy.py [--duration 300] [--robot auto|twin|fake]

1. Inference: the node's ``OnnxPolicy`` call vs a bare ``onnxruntime`` ``session.run`` on the same
   ASAP-size model (380 -> 512-256-128 -> 23, ELU), single thread, p50/p99 over many calls.
2. Closed loop: ``policy_node`` (its own process) drives a robot through RAMP -> HOLD -> POLICY and
   tracks a motion as long as ``--duration``. The robot is the simulated twin (``asap_sim``) when it
   is installed, else the MuJoCo-free test double ``test/fake_g1.py``; the episode recorder
   (``asap_logger``) runs too when installed. The node's /policy/status is sampled every 5 s: its
   percentiles cover the last 60 s of ticks, so the report gives the median and worst window.
   Missed ticks and ticks are cumulative counts.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))  # the G1 test double, with the tests


def bench_inference(path: Path, calls: int) -> None:
    import onnxruntime as ort

    from asap_core.artifact import load_artifact
    from asap_core.inference import OnnxPolicy

    artifact = load_artifact(path)
    policy = OnnxPolicy(artifact)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = 1, 1
    bare = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    obs = np.random.default_rng(0).normal(size=(1, 380)).astype(np.float32)
    feed = {artifact.metadata.onnx_input: obs}
    timings: dict[str, list[float]] = {"bare onnxruntime": [], "asap OnnxPolicy": []}
    for _ in range(200):  # warm both
        bare.run(None, feed)
        policy(obs[0])
    for _ in range(calls):  # interleaved, so machine load hits both alike
        t0 = time.perf_counter()
        bare.run(None, feed)
        t1 = time.perf_counter()
        policy(obs[0])
        t2 = time.perf_counter()
        timings["bare onnxruntime"].append(t1 - t0)
        timings["asap OnnxPolicy"].append(t2 - t1)
    print(f"inference, {calls} calls, 380->512-256-128->23, 1 thread:")
    for name, values in timings.items():
        us = np.array(values) * 1e6
        print(f"  {name:18s} p50 {np.percentile(us, 50):7.1f} us   p99 {np.percentile(us, 99):7.1f} us")
    p50 = [np.percentile(v, 50) for v in timings.values()]
    print(f"  ratio asap/bare p50 {p50[1] / p50[0]:.2f}")


LOG_DIR = Path(tempfile.mkdtemp(prefix="bench_policy_"))


def _spawn(module: str, *args: str) -> subprocess.Popen:
    log = (LOG_DIR / f"{module}.log").open("w")
    return subprocess.Popen([sys.executable, "-m", module, *args], stdout=log, stderr=subprocess.STDOUT)


def _wait(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}; process logs in {LOG_DIR}")
        time.sleep(0.05)


def _start_robot(choice: str) -> tuple[str, object]:
    twin = importlib.util.find_spec("asap_sim") is not None and \
        importlib.util.find_spec("asap_sim.g1_sim_node") is not None
    if choice == "twin" or (choice == "auto" and twin):
        return ("asap_sim twin (g1_sim, realtime clock, 500 Hz, gantry band held)",
                _spawn("asap_sim.g1_sim_node", "--ros-args", "-p", "band_held:=true"))
    from fake_g1 import FakeG1

    return "test double test/fake_g1.py (no physics engine)", FakeG1().start()


def bench_loop(path: Path, duration_s: float, robot: str) -> None:
    import rclpy
    from asap_msgs.msg import PolicyStatus
    from asap_msgs.srv import SetMode
    from rclpy.executors import MultiThreadedExecutor

    rclpy.init()
    observer = rclpy.create_node("policy_bench")
    statuses: list[PolicyStatus] = []
    observer.create_subscription(PolicyStatus, "/policy/status", statuses.append, 50)
    client = observer.create_client(SetMode, "/policy/set_mode")
    executor = MultiThreadedExecutor(num_threads=2)
    executor.add_node(observer)
    robot_name, robot_handle = _start_robot(robot)
    if not isinstance(robot_handle, subprocess.Popen):
        executor.add_node(robot_handle)
    threading.Thread(target=executor.spin, daemon=True).start()
    procs = [robot_handle] if isinstance(robot_handle, subprocess.Popen) else []
    logger = importlib.util.find_spec("asap_logger") is not None
    if logger:
        procs.append(_spawn("asap_logger.recorder_node", "--ros-args", "-p", f"output_dir:={LOG_DIR}"))
    node = _spawn("asap_policy.policy_node", "--ros-args", "-p", f"policy_path:={path}",
                  "-p", "ramp_s:=1.0")
    procs.append(node)
    try:
        assert client.wait_for_service(timeout_sec=60.0), "policy_node did not come up"

        def request(value: int) -> None:
            future = client.call_async(SetMode.Request(request=value, reason="bench"))
            _wait(future.done, 30.0, "a SetMode reply")
            assert future.result().accepted, future.result().message

        _wait(lambda: statuses and statuses[-1].fault == "", 60.0, "the node ready (no start block)")
        request(SetMode.Request.REQUEST_RAMP)
        _wait(lambda: statuses[-1].mode == SetMode.Request.REQUEST_HOLD, 60.0, "HOLD after the ramp")
        request(SetMode.Request.REQUEST_POLICY)
        start = statuses[-1]
        samples: list[PolicyStatus] = []
        t_end = time.monotonic() + duration_s
        while time.monotonic() < t_end:
            time.sleep(min(5.0, max(0.0, t_end - time.monotonic())))
            samples.append(statuses[-1])
        end = statuses[-1]
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=10)
        if not isinstance(robot_handle, subprocess.Popen):
            robot_handle.stop()
        executor.shutdown()
        rclpy.shutdown()
    _report(robot_name, logger, duration_s, start, end, samples)


def _report(robot: str, logger: bool, duration_s: float, start, end, samples: list) -> None:
    def spread(field: str) -> str:
        values = np.array([getattr(s, field) for s in samples])
        return f"median {np.median(values):6.3f} ms   worst {values.max():6.3f} ms"

    print(f"closed loop, {duration_s:.0f} s of POLICY at 50 Hz; robot: {robot}; "
          f"logger: {'recording' if logger else 'not installed'}")
    print(f"  mode at end                       {end.mode_name} {end.fault}")
    print(f"  ticks                             {end.tick - start.tick}")
    print(f"  missed ticks                      {end.missed_ticks - start.missed_ticks}")
    print(f"  tick jitter p99 (60 s windows)    {spread('loop_jitter_ms_p99')}")
    print(f"  inference p50 / p99 (in node)     {spread('inference_ms_p50')} / {spread('inference_ms_p99')}")
    print(f"  LowState->LowCmd p50 (windows)    {spread('lowstate_to_lowcmd_ms_p50')}")
    print(f"  LowState->LowCmd p99 (windows)    {spread('lowstate_to_lowcmd_ms_p99')}")
    print(f"  LowState CRC errors               {end.lowstate_crc_errors}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=300.0, help="seconds of POLICY (default 300)")
    ap.add_argument("--calls", type=int, default=5000, help="inference calls per variant")
    ap.add_argument("--robot", choices=("auto", "twin", "fake"), default="auto")
    args = ap.parse_args()

    from asap_core.testing import policies

    with tempfile.TemporaryDirectory() as tmp:
        net = policies.mlp(380, 23, output_gain=0.01)  # an ASAP-size network whose actions stay gentle
        path = policies.write(Path(tmp) / "bench.onnx", net, motion_s=args.duration + 30.0, name="bench")
        bench_inference(path, args.calls)
        bench_loop(path, args.duration, args.robot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
