#!/usr/bin/env bash
# The arm_swing policy for Unitree's simulator at its default 5 ms step (unitree_mujoco's held drive):
# four fine-tunings of the shipped arm_swing (~20 min on 2 cores). Usage: policy_unitree_sim.sh [OUT_DIR]
#   1. the unitree_mujoco_5ms gains on the G1's own drive (ASAP's kd rings on the held drive at 5 ms);
#   2-4. the held drive with its lag share 0.8, 0.9, 1.0, each pulled toward step 1's actions.
# The last run directory's policy.onnx is the result (training/policies/arm_swing_unitree_sim ships one).
set -euo pipefail
out=${1:-runs/arm_swing_unitree_sim}
if [[ -e "$out" ]]; then  # asap-finetune would continue the runs found there, not start over
    echo "$out exists: remove it to make the policy again, or name another folder" >&2
    exit 2
fi
common=(--physics-dt 0.005 --select-every 25 --seed 0)
asap-finetune --parent training/policies/arm_swing --run-dir "$out/gains" --iterations 300 \
    --gain-set unitree_mujoco_5ms --no-action-delay "${common[@]}"
parent=$out/gains
for lag in 0.8 0.9 1.0; do
    asap-finetune --parent "$parent" --run-dir "$out/lag_$lag" --iterations 150 --held-drive-lag "$lag" \
        --anchor 0.1 --anchor-run "$out/gains" "${common[@]}"
    parent=$out/lag_$lag
done
echo "$parent/policy.onnx: the policy for Unitree's simulator at 5 ms"
