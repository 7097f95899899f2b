#!/usr/bin/env bash
# Stage-1 training of the agile skills (issue "Agile whole-body skills") on one NVIDIA GPU: one run per ASAP
# clip shipped in asap_core/clips, MuJoCo Warp, the recipe of the shipped arm_swing policy (500 Hz physics,
# ASAP's observations, rewards, curricula and randomization), every run resumable: run the script again and
# each skill continues from its last checkpoint (run folders keep their configs). Run from the repository
# root after `make setup` (or in the training image).
#
#   bash training/bench/train_agile_gpu.sh                                   # the four skills, 6000 its each
#   SKILLS=video_kick_level1 ITERATIONS=2000 bash training/bench/train_agile_gpu.sh
#   SIM=mujoco DEVICE=cpu NUM_ENVS=8 ITERATIONS=1 bash training/bench/train_agile_gpu.sh   # a CPU dry run
#
# 6000 iterations x 8192 envs x 24 steps = 1.2e9 samples a skill (ASAP's scale): ~2.2 h a skill at the
# 151k samples/s measured on one H200. Then: asap-eval runs/agile/<skill>/policy.onnx --motion <skill>.
set -euo pipefail
RUNS="${RUNS:-runs/agile}"
ITERATIONS="${ITERATIONS:-6000}"
NUM_ENVS="${NUM_ENVS:-8192}"
SIM="${SIM:-mujoco_warp}"
DEVICE="${DEVICE:-cuda}"
SKILLS="${SKILLS:-video_kick_level1 video_side_jump_level1 CR7_video_CR7_level1 video_single_foot_balance_level1}"
[ -f scripts/env.sh ] && [ -x .venv/bin/python ] && source scripts/env.sh
for skill in $SKILLS; do
  echo "== $skill -> $RUNS/$skill"
  python -m asap_training.cli.train --run-dir "$RUNS/$skill" --resume --motion "$skill" \
    --env-config training/policies/arm_swing/params/env.yaml --num-envs "$NUM_ENVS" \
    --sim "$SIM" --device "$DEVICE" --iterations "$ITERATIONS"
done
