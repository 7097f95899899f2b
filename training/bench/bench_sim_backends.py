"""Policy steps/s of the simulator backends on the same G1 workload, against raw ``mj_step`` in the same run.

    python training/bench/bench_sim_backends.py                       # CPU backend and MJWarp on Warp's CPU
    python training/bench/bench_sim_backends.py --sims mujoco_warp --device cuda:0 --num-envs 1024 4096 8192

Workload (the simulator protocol only, no MDP): G1s reset standing on the floor, commanded to the default
pose plus noise at 50 Hz (200 Hz physics, asap gains) so they sway and fall; an env whose pelvis drops below
0.5 m is reset, as terminations do. Wall-clock time (``synchronize()`` before reading the clock on a
device) and this process's CPU time (all its threads: per-core figures on a busy machine). The first step
of a backend is timed apart (MJWarp: kernel compilation or cache load, graph capture). One JSON object per
configuration with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import time

import mujoco
import numpy as np
import warp as wp

from asap_core import g1
from asap_sim.model import G1Indices, build_model, standing_base_height
from asap_sim.motor import MotorCommand, MotorParams, drive_ctrl
from asap_sim.profiles import nominal_profile
from asap_training.envs import actions
from asap_training.parallel import available_cores

SIMULATORS = {
    "mujoco": "asap_training.sim.mujoco_cpu:MujocoCpuSimulator",
    "mujoco_warp": "asap_training.sim.mujoco_warp:MujocoWarpSimulator",
}
DT, DECIMATION = 0.005, 4


def make_sim(name: str, model: mujoco.MjModel, num_envs: int, threads: int, device: str):
    """A backend by its ``--sims`` name."""
    extra = {"device": device} if name == "mujoco_warp" else {}
    params = MotorParams.from_profile(nominal_profile())
    return actions.resolve(SIMULATORS[name])([model], num_envs, params, 0, threads=threads, **extra)


def standing(model: mujoco.MjModel) -> tuple[float, np.ndarray, MotorCommand]:
    """Pelvis height, joint positions and hold command of a G1 standing in the default pose."""
    q0 = g1.default_pose(g1.MOTOR_ORDER, "asap")
    hold = MotorCommand.position(q0, *g1.gains(g1.MOTOR_ORDER, "asap"))
    return standing_base_height(model, q0, clearance=-1e-4), q0, hold


def reset_standing(sim, model: mujoco.MjModel, env_ids: np.ndarray) -> None:
    """Put envs upright on the floor in the default pose."""
    height, q0, _ = standing(model)
    n = env_ids.size
    zeros = np.zeros((n, 3))
    sim.reset(env_ids, np.tile([0.0, 0.0, height], (n, 1)), np.tile([1.0, 0.0, 0.0, 0.0], (n, 1)), zeros,
              zeros, np.tile(q0, (n, 1)), np.zeros((n, g1.NUM_MOTORS)))


def run(sim, model: mujoco.MjModel, steps: int, seed: int = 0) -> dict[str, float]:
    """Time ``steps`` policy steps after a first, separately timed one."""
    rng = np.random.default_rng(seed)
    _, _, hold = standing(model)
    sync = getattr(sim, "synchronize", lambda: None)
    reset_standing(sim, model, np.arange(sim.num_envs))
    noise = rng.normal(scale=0.1, size=(steps + 1, sim.num_envs, g1.NUM_MOTORS))
    commands = [MotorCommand.position(hold.q + dq, hold.kp, hold.kd) for dq in noise]
    start = time.perf_counter()
    sim.step(commands[0], DECIMATION)
    sync()
    first = time.perf_counter() - start
    resets = 0
    start, start_cpu = time.perf_counter(), time.process_time()
    for cmd in commands[1:]:
        sim.step(cmd, DECIMATION)
        fallen = (sim.state.root_pos_w[:, 2] < 0.5).nonzero().flatten().cpu().numpy()
        if fallen.size:
            reset_standing(sim, model, fallen)
            resets += fallen.size
    sync()
    elapsed, cpu = time.perf_counter() - start, time.process_time() - start_cpu
    samples = steps * sim.num_envs
    return {"first_step_s": first, "policy_steps_per_s": samples / elapsed,
            "policy_steps_per_cpu_s": samples / cpu, "resets_per_policy_step": resets / steps}


def raw_policy_steps_per_s(model: mujoco.MjModel, steps: int) -> float:
    """One thread of bare ``mj_step`` on one standing G1 holding its pose (the C backend's cost floor)."""
    height, q0, hold = standing(model)
    data, idx = mujoco.MjData(model), G1Indices.from_model(model)
    data.qpos[2], data.qpos[3], data.qpos[idx.qpos] = height, 1.0, q0
    data.ctrl[idx.drive_ctrl] = drive_ctrl(hold, MotorParams.from_profile(nominal_profile()))
    start = time.perf_counter()
    for _ in range(steps):
        mujoco.mj_step(model, data, DECIMATION)
    return steps / (time.perf_counter() - start)


def main() -> None:
    """Print one line (or JSON object) per backend and env count."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sims", nargs="+", choices=sorted(SIMULATORS), default=["mujoco", "mujoco_warp"])
    p.add_argument("--num-envs", type=int, nargs="+", default=[4, 32], help="env counts to measure")
    p.add_argument("--steps", type=int, default=25, help="timed policy steps per configuration")
    p.add_argument("--device", default="cpu", help="Warp device of mujoco_warp: cpu or cuda:N")
    p.add_argument("--threads", type=int, default=0, help="threads of the CPU backend (0 = every core)")
    p.add_argument("--json", action="store_true", help="one JSON object per configuration")
    args = p.parse_args()
    wp.config.log_level = wp.LOG_WARNING  # Warp's module-load lines would interleave with the output
    model = build_model(timestep=DT)
    raw = raw_policy_steps_per_s(model, 200)
    threads = args.threads or available_cores()
    for name in args.sims:
        for n in args.num_envs:
            sim = make_sim(name, model, n, threads, args.device)
            row = {"sim": name, "device": args.device if name == "mujoco_warp" else "cpu", "num_envs": n,
                   "threads": threads if name == "mujoco" else None, **run(sim, model, args.steps),
                   "raw_mj_step_policy_steps_per_s": raw}
            row["ratio_to_raw"] = row["policy_steps_per_s"] / raw
            if hasattr(sim, "memory_per_world_bytes"):
                row["device_bytes_per_world"] = sim.memory_per_world_bytes()
            if hasattr(sim, "close"):
                sim.close()
            if args.json:
                print(json.dumps(row))
            else:
                print(f"{name:>12} {row['device']:>7} envs {n:>6}: {row['policy_steps_per_s']:>9.0f} policy "
                      f"steps/s ({row['ratio_to_raw']:.2f} x raw 1-thread mj_step {raw:.0f}), "
                      f"{row['policy_steps_per_cpu_s']:.0f} per CPU-s; first step "
                      f"{row['first_step_s']:.1f} s; resets/step {row['resets_per_policy_step']:.2f}")


if __name__ == "__main__":
    main()
