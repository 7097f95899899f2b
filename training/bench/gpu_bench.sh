#!/usr/bin/env bash
# The GPU benchmark of issue "Training at scale": samples/s of the tracking MDP on MuJoCo Warp with PPO at
# 1024, 4096 and 8192 envs on one GPU (goal: >= 150k samples/s at 4096 envs on one H200), the same at 4096
# with the MDP in eager torch (compile_mdp off), the CPU backend on the same machine, the physics alone, and
# the machine. Run from the repository root on a machine with an NVIDIA GPU (driver R580+) after
# `make setup`, or in the training image. Results: one JSON object per line in $OUT (default runs/gpu_bench).
# First run on a machine: ~1.5 min of Warp kernel compilation and ~1 min of torch.compile (both cached).
set -uo pipefail  # a failing measurement does not stop the others
OUT="${OUT:-runs/gpu_bench}"
mkdir -p "$OUT"
[ -f scripts/env.sh ] && [ -x .venv/bin/python ] && source scripts/env.sh
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/machine.txt"
nproc | sed 's/^/cpu cores: /' | tee -a "$OUT/machine.txt"
bench="python training/bench/bench_env.py --json --iterations 3 --steps 48"
# in order of what matters most, should the machine's time run out: the goal configuration first
$bench --configs mujoco_warp:cuda:4096:0 mujoco_warp:cuda:1024:0 mujoco_warp:cuda:8192:0 | tee "$OUT/bench_env.jsonl"
# where a step's time goes at 4096 envs: host ms, torch ops and CUDA kernels per MDP section
python training/bench/profile_step.py --sim mujoco_warp --device cuda --num-envs 4096 --json \
  | tee "$OUT/profile_step.json"
python training/bench/bench_sim_backends.py --sims mujoco_warp --device cuda:0 --num-envs 1024 4096 8192 \
  --json | tee "$OUT/bench_sim_backends.jsonl"
$bench --compile off --configs mujoco_warp:cuda:4096:0 | tee -a "$OUT/bench_env.jsonl"
$bench --configs mujoco:cpu:256:0 | tee -a "$OUT/bench_env.jsonl"
