"""Benchmark the G1 twin: physics steps/s in the twin core and in the g1_sim node vs raw mj_step on the
same model in the same run, and /lowstate publish jitter in realtime mode.

    source scripts/env.sh && python ros2_ws/src/asap_sim/bench/bench_sim.py [--seconds 5]

Every figure is measured on a robot held by the band with the ASAP pose commanded (feet on the floor,
so contacts are active). The node runs in its own process; this process only listens (its listener
thread runs SCHED_FIFO where allowed, so the instrument keeps up on a busy machine).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time

import mujoco
import numpy as np

from asap_core import g1
from asap_sim.motor import MotorCommand
from asap_sim.twin import Twin


def _standing_twin() -> Twin:
    twin = Twin()
    kp, kd = g1.gains(g1.MOTOR_ORDER, "asap")
    twin.set_command(MotorCommand.position(g1.default_pose(g1.MOTOR_ORDER, "asap"), kp, kd))
    twin.step(250)
    return twin


def raw_mj_step_rate(seconds: float) -> float:
    """mj_step alone on the twin's model: no drives, no band, no Python per step.

    The held, standing state (its drive torques and band wrench frozen) is restored every 100
    steps, so the contacts stay those of a standing robot and the frozen forces cannot run away.
    """
    twin = _standing_twin()
    data = mujoco.MjData(twin.model)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        mujoco.mj_copyData(data, twin.model, twin.data)
        mujoco.mj_step(twin.model, data, nstep=100)
        steps += 100
    return steps / (time.perf_counter() - start)


def twin_core_rate(seconds: float) -> tuple[float, float]:
    """(physics steps/s, states/s) of Twin.step + read_state: the node's loop without DDS."""
    twin = _standing_twin()
    states, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        twin.step(1)
        twin.read_state()
        states += 1
    rate = states / (time.perf_counter() - start)
    return rate, rate


def _spawn_sim(*params: str) -> subprocess.Popen:
    args = [a for p in params for a in ("-p", p)]
    return subprocess.Popen([sys.executable, "-m", "asap_sim.g1_sim_node", "--ros-args", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


def node_rates(seconds: float) -> dict[str, float]:
    """Lock-step g1_sim with nobody listening but /diagnostics: physics steps/s and real-time factor."""
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray

    rclpy.init()
    node = rclpy.create_node("bench_sim_diag")
    samples: list[tuple[float, dict[str, str]]] = []
    node.create_subscription(DiagnosticArray, "/diagnostics", lambda m: samples.extend(
        (time.monotonic(), {kv.key: kv.value for kv in status.values})
        for status in m.status if status.name == "g1_sim"), 10)
    proc = _spawn_sim("clock_mode:=lockstep")
    try:
        deadline = time.monotonic() + seconds + 30.0
        while len(samples) < 2 + int(seconds) and time.monotonic() < deadline:
            rclpy.spin_once(node, timeout_sec=0.1)
    finally:
        _stop(proc)
        node.destroy_node()
        rclpy.shutdown()
    if len(samples) < 3:
        raise RuntimeError("g1_sim published no diagnostics; run it by hand to see why")
    (t0, a), (t1, b) = samples[1], samples[-1]
    dt = t1 - t0
    return {"steps_per_s": (int(b["physics_steps"]) - int(a["physics_steps"])) / dt,
            "realtime_factor": (float(b["sim_time_s"]) - float(a["sim_time_s"])) / dt}


def realtime_jitter(seconds: float, rt_priority: int) -> dict[str, float]:
    """Realtime g1_sim: /lowstate inter-arrival jitter at a subscriber and the node's own lateness."""
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from unitree_hg.msg import LowState

    rclpy.init()
    node = rclpy.create_node("bench_sim_jitter")
    arrivals: list[float] = []
    diag: dict[str, str] = {}
    node.create_subscription(LowState, "/lowstate", lambda _b: arrivals.append(time.monotonic()),
                             QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE), raw=True)
    node.create_subscription(DiagnosticArray, "/diagnostics", lambda m: diag.update(
        {kv.key: kv.value for s in m.status if s.name == "g1_sim" for kv in s.values}), 10)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    def spin() -> None:  # the measuring instrument must not be what falls behind on a busy machine
        with contextlib.suppress(PermissionError):
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(40))
        executor.spin()

    spinner = threading.Thread(target=spin, daemon=True)
    spinner.start()
    proc = _spawn_sim("clock_mode:=realtime", f"rt_priority:={rt_priority}")
    try:
        deadline = time.monotonic() + 60.0
        while len(arrivals) < 100 and time.monotonic() < deadline:
            time.sleep(0.05)
        first = len(arrivals)
        time.sleep(seconds)
        window = np.array(arrivals[first:])
        if window.size < 2:
            raise RuntimeError("no /lowstate from g1_sim; run it by hand to see why")
    finally:
        _stop(proc)
        executor.shutdown()
        spinner.join(timeout=5.0)
        node.destroy_node()
        rclpy.shutdown()
    jitter_ms = np.abs(np.diff(window) - 0.002) * 1e3
    return {"rate_hz": (window.size - 1) / (window[-1] - window[0]),
            "sub_jitter_p50_ms": float(np.percentile(jitter_ms, 50)),
            "sub_jitter_p99_ms": float(np.percentile(jitter_ms, 99)),
            "node_lateness_p50_ms": float(diag.get("publish_lateness_ms_p50", "nan")),
            "node_lateness_p99_ms": float(diag.get("publish_lateness_ms_p99", "nan")),
            "deadline_overruns": float(diag.get("deadline_overruns", "nan"))}


def main() -> int:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0, help="measuring time per figure")
    args = parser.parse_args()
    os.environ.setdefault("ROS_DOMAIN_ID", str(random.SystemRandom().randint(1, 101)))
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"

    raw = raw_mj_step_rate(args.seconds)
    core, _ = twin_core_rate(args.seconds)
    node = node_rates(args.seconds)
    raw_after = raw_mj_step_rate(args.seconds)  # the machine's load drifts: bracket the node run
    raw_mean = (raw + raw_after) / 2
    print(f"load average          {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"raw mj_step           {raw:9.0f} steps/s (before) {raw_after:9.0f} (after)")
    print(f"twin core             {core:9.0f} steps/s  ratio to raw {core / raw_mean:5.2f}  (drives, band, "
          f"read_state)")
    print(f"g1_sim lock-step      {node['steps_per_s']:9.0f} steps/s  ratio to raw "
          f"{node['steps_per_s'] / raw_mean:5.2f}  real-time factor {node['realtime_factor']:.1f}x")
    for priority in (0, 50):
        rt = realtime_jitter(args.seconds, priority)
        print(f"g1_sim realtime rt_priority={priority:<2d} /lowstate {rt['rate_hz']:.1f} Hz; subscriber "
              f"jitter p50 {rt['sub_jitter_p50_ms']:.3f} ms p99 {rt['sub_jitter_p99_ms']:.3f} ms; node "
              f"publish lateness p50 {rt['node_lateness_p50_ms']:.3f} ms p99 "
              f"{rt['node_lateness_p99_ms']:.3f} ms; overruns {rt['deadline_overruns']:.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
