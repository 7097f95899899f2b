"""Where a policy step's wall time goes: the tracking MDP's sections, under torch.profiler.

    python training/bench/profile_step.py                                    # MuJoCo Warp on the CPU, 16 envs
    python training/bench/profile_step.py --sim mujoco_warp --device cuda --num-envs 4096 --json

Runs ``--steps`` policy steps (actions from the reference plus noise, so robots fall and reset as in
training) after a warm-up, and prints per section (the env's reset and its parts, the simulator's step, reset
and state read-back, the compiled MDP functions) the host time per step, the torch ops launched from Python
per step (top-level ``aten::`` calls: on a GPU each is at least one kernel launch) and, on a GPU, the CUDA
kernels per step. On a GPU the step is launch-bound (``training/README.md``): these counts, not the kernels'
own time, are what to cut. ``--json``: one object.
"""

from __future__ import annotations

import argparse
import collections
import json
import time
from collections.abc import Callable
from typing import Any

import torch
import warp as wp
from bench_env import make_env, reference_actions, synchronize
from torch.profiler import ProfilerActivity, profile, record_function

from asap_training.envs.tracking_env import TrackingEnv
from asap_training.sim.mujoco_warp import MujocoWarpSimulator

ENV_SECTIONS = ("reset", "_update_curricula", "_log_episode_sums", "_sample_starts", "_randomize",
                "_initial_state", "_push", "_compose_action", *TrackingEnv.COMPILED)
SIM_SECTIONS = ("step", "reset", "_read_state")


def instrument(env: TrackingEnv) -> None:
    """Wrap the env's and the simulator's sections in profiler ranges (on the instances: the compiled MDP
    functions stay compiled, and each wrapper is its own function, so torch.compile sees distinct code)."""
    for owner, prefix, names in ((env, "env.", ENV_SECTIONS), (env.sim, "sim.", SIM_SECTIONS)):
        for name in names:
            if hasattr(owner, name):
                setattr(owner, name, _ranged(prefix + name, getattr(owner, name)))


def _ranged(label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def ranged(*args: Any, **kwargs: Any) -> Any:
        with record_function(label):
            return fn(*args, **kwargs)

    return ranged


def section_of(event: Any) -> str:
    """The innermost instrumented range an event runs in ("step body" outside all of them)."""
    parent = event.cpu_parent
    while parent is not None:
        if parent.name.startswith(("env.", "sim.")):
            return parent.name
        parent = parent.cpu_parent
    return "step body"


def profile_steps(env: TrackingEnv, steps: int) -> dict[str, Any]:
    """Per-section host ms, top-level torch ops and CUDA kernels per policy step."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if env.device.type == "cuda" else [])
    with torch.inference_mode(), profile(activities=activities) as prof:
        start = time.perf_counter()
        for _ in range(steps):
            env.step(reference_actions(env, noise=0.3))
        synchronize(env.device)
        wall = time.perf_counter() - start
    ms, ops = collections.Counter(), collections.Counter()
    for e in prof.events():
        if e.name.startswith(("env.", "sim.")):
            ms[e.name] += e.cpu_time_total / 1e3  # inclusive: a parent range holds its children's time
        elif e.name.startswith("aten::") and not (e.cpu_parent and e.cpu_parent.name.startswith("aten::")):
            ops[section_of(e)] += 1
    kernels = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
    return {
        "wall_ms_per_step": round(1e3 * wall / steps, 3),
        "torch_ops_per_step": round(sum(ops.values()) / steps, 1),
        "cuda_kernels_per_step": round(kernels / steps, 1),
        "sections": {
            k: {"host_ms_per_step": round(ms[k] / steps, 3), "torch_ops_per_step": round(ops[k] / steps, 1)}
            for k in sorted(set(ms) | set(ops), key=lambda k: -ms.get(k, 0.0))
        },
    }


def main() -> None:
    """Profile one configuration and print a table or one JSON object."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sim", default="mujoco_warp", choices=("mujoco", "mujoco_warp"))
    p.add_argument("--device", default="cpu", help="cpu or cuda (MuJoCo Warp's device)")
    p.add_argument("--num-envs", type=int, default=16)
    p.add_argument("--steps", type=int, default=20, help="profiled policy steps (default 20)")
    p.add_argument("--compile", choices=("auto", "on", "off"), default="auto",
                   help="torch.compile the MDP (TrackingEnvCfg.compile_mdp; auto: on for cuda)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    wp.config.log_level = wp.LOG_WARNING
    env = make_env(args.sim, args.device, args.num_envs, 0, 0.002, 10,
                   {"auto": None, "on": True, "off": False}[args.compile])
    compiled = TrackingEnv.COMPILED[0] in vars(env)  # before instrument() wraps the methods
    instrument(env)
    with torch.inference_mode():  # as profiled (and as rsl_rl collects): compiled once, for this mode
        for _ in range(5):  # warm-up: compilation, graph capture, the first resets
            env.step(reference_actions(env, noise=0.3))
    graphs = isinstance(env.sim, MujocoWarpSimulator) and env.sim.graph
    row = {"sim": args.sim, "device": args.device, "num_envs": args.num_envs, "compile_mdp": compiled,
           "graphs": graphs, **profile_steps(env, args.steps)}
    if args.json:
        print(json.dumps(row))
        return
    print(f"{args.sim} on {args.device}, {args.num_envs} envs: {row['wall_ms_per_step']} ms a step, "
          f"{row['torch_ops_per_step']} torch ops, {row['cuda_kernels_per_step']} CUDA kernels")
    print(f"{'section':>28} {'host ms':>8} {'torch ops':>9}")
    for name, s in row["sections"].items():
        print(f"{name:>28} {s['host_ms_per_step']:>8} {s['torch_ops_per_step']:>9}")


if __name__ == "__main__":
    main()
