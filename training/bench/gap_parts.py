"""Where a random gap's open-loop error comes from: each part of it left out of the simulator, and each
part alone put in.

    python training/bench/gap_parts.py [--gap random:9001] [--episodes 4]

Records the shipped policy's excitation episodes on the twin core under the gap (as the demo's data
episodes: action noise 0.2, noise seeds 1, 2, ...), then replays them (1 s open loop, E_g-mpjpe, every
window as ``asap-delta`` scores) in simulators that have every part of the gap but one (the error that
part alone causes: what a correction of everything else would leave) and only one part (what a correction
of that part alone would leave). The uncorrected simulator is the baseline; the full gap's simulator
gives the floor.

Then the exact joint-level correction: the Δa that makes the nominal drive give the gap's joint torques
for its latency, weak motors and added damping, in closed form from πΔ's own inputs (see
:func:`joint_level_correction`). A per-joint πΔ can express it; what it leaves is what joint targets do
not correct one joint at a time (dry friction, rotor inertia, torque saturation) or at all (torso mass,
pelvis CoM, floor friction): a yardstick for a fitted πΔ on the same data (``asap-delta``'s
``open_loop.json``). The parts of a real robot's gap are unknown: this is for the sim-to-sim gaps πΔ is
measured on.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import yaml
from bench_delta import SHIPPED

from asap_core.artifact import PolicyMetadata, load_artifact
from asap_sim.profiles import RANDOM_PREFIX, random_profile_dict
from asap_training.data.dataset import RealDataset
from asap_training.envs.delta_env import DeltaCfg, delta_obs_layout
from asap_training.envs.tracking_env import TrackingEnv
from asap_training.eval.evaluate import eval_env_cfg, rollout_twin
from asap_training.eval.openloop import open_loop_errors
from asap_training.parallel import use_threads

PARTS = ("torque_scale", "joint_friction", "joint_damping", "armature", "link_mass_scale", "base_com_offset",
         "actuation_latency_ms", "ground_friction")  # fmt: skip
"""The gap's dynamics; its sensor noise is in the recordings and in no replay."""


def excitation_episodes(gap: str, episodes: int) -> RealDataset:
    """The demo's data episodes, on the twin core."""
    artifact = load_artifact(SHIPPED)
    runs = [rollout_twin(artifact, TrackingEnv(eval_env_cfg(artifact)), gap, seed=1 + i, action_noise=0.2)
            for i in range(episodes)]  # fmt: skip
    joints = tuple(artifact.metadata.joint_names)
    return RealDataset(tuple(r.trajectory for r in runs), 0.02, joints, artifact.sha256, 0)


def joint_level_correction(gap: dict, meta: PolicyMetadata) -> Callable[[np.ndarray], np.ndarray]:
    """Δa (every action joint) from πΔ's observation: with torque scale s, added damping d, the policy's
    gains kp, kd, action scale σ and default pose q0, the gap's motor gives s (kp (q0 + σ a_eff − q) − kd q̇)
    − d q̇, the nominal one kp (q0 + σ (a + Δa) − q) − kd q̇; equal for

        Δa = s a_eff − a − (s − 1)(q − q0) / σ − ((s − 1) kd + d) q̇ / (kp σ),

    a_eff the command the latency leaves in force over the period: the previous action for its delayed
    share (all of it past one period: the action before that, up to half a period on these gaps, is not
    in πΔ's input)."""
    joints = meta.joint_names
    s = np.array([gap["torque_scale"].get(j, 1.0) for j in joints])
    d = np.array([gap["joint_damping"].get(j, 0.0) for j in joints])
    kp, kd, sigma = meta.array("kp"), meta.array("kd"), meta.array("action_scale")
    delayed = min(gap["actuation_latency_ms"] / 1000 / meta.control_dt, 1.0)
    cols = delta_obs_layout(len(joints), DeltaCfg().action_history)
    dof_vel_scale = DeltaCfg().obs_scales["dof_vel"]

    def correction(obs: np.ndarray) -> np.ndarray:
        a, previous = obs[:, cols["action"]], obs[:, cols["earlier_actions"]][:, : len(joints)]
        q_off, dq = obs[:, cols["dof_pos"]], obs[:, cols["dof_vel"]] / dof_vel_scale
        a_eff = (1 - delayed) * a + delayed * previous
        return s * a_eff - a - (s - 1) * q_off / sigma - ((s - 1) * kd + d) * dq / (kp * sigma)

    return correction


def main() -> None:
    """Print the table."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gap", default=f"{RANDOM_PREFIX}9001", help="a random gap, random:<seed>")
    p.add_argument("--episodes", type=int, default=4, help="excitation episodes recorded")
    args = p.parse_args()
    use_threads(0)
    gap = random_profile_dict(int(args.gap.removeprefix(RANDOM_PREFIX)))
    dataset = excitation_episodes(args.gap, args.episodes)
    scratch = Path(tempfile.mkdtemp(prefix="gap_parts_"))

    def error(parts: list[str]) -> float:
        path = scratch / f"{len(parts)}_{'_'.join(parts)[:80]}.yaml"
        path.write_text(yaml.safe_dump({k: gap[k] for k in parts}))
        return open_loop_errors(dataset, profile=str(path))["1"]["e_g_mpjpe_mm"]

    none, floor = error([]), error(list(PARTS))
    print(gap["description"])
    print(f"{args.episodes} excitation episodes, {dataset.num_steps} ticks; 1 s open loop E_g-mpjpe: "
          f"uncorrected {none:.1f} mm, the gap's own simulator (floor) {floor:.1f} mm")  # fmt: skip
    print(f"{'part':22s} {'it alone missing':>17s} {'it alone corrected':>19s}   (mm; x uncorrected)")
    for part in PARTS:
        missing, corrected = error([q for q in PARTS if q != part]), error([part])
        ratios = f"({missing / none:.2f}, {corrected / none:.2f})"
        print(f"{part:22s} {missing:17.1f} {corrected:19.1f}   {ratios}")
    exact = joint_level_correction(gap, load_artifact(SHIPPED).metadata)
    joint_level = open_loop_errors(dataset, correction=exact)["1"]["e_g_mpjpe_mm"]
    print(f"exact joint-level correction (latency, weak motors, damping) in the nominal simulator: "
          f"{joint_level:.1f} mm ({joint_level / none - 1:+.0%})")


if __name__ == "__main__":
    main()
