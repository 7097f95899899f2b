"""Where a random gap's open-loop error comes from: each part of it left out of the simulator, and each
part alone put in.

    python training/bench/gap_parts.py [--gap random:9001] [--episodes 4]

Records the shipped policy's excitation episodes on the twin core under the gap (as the demo's data
episodes: action noise 0.2, noise seeds 1, 2, ...), then replays them (1 s open loop, E_g-mpjpe, every
window as ``asap-delta`` scores) in simulators that have every part of the gap but one (the error that
part alone causes: what a correction of everything else would leave) and only one part (what a correction
of that part alone would leave). The uncorrected simulator is the baseline; the full gap's simulator
gives the floor.

Then the joint-level correction in closed form: the Δa that makes the nominal drive give the gap's
joint torques for its latency, weak motors and added damping at the start of each control period, from
πΔ's own inputs (:func:`joint_level_correction`), clipped to ±``DeltaCfg.max_delta`` as a πΔ file's is.
A per-joint πΔ can express it. It is exact for a whole-period latency only (test): within a period the
drive's stiffness and damping stay the nominal ones and a fractional latency is averaged. How close it
comes is printed too: the closed form in a simulator that has every other part of the gap, against the
floor. What it leaves in the nominal simulator is what joint targets do not correct one joint at a time
(dry friction, rotor inertia, torque saturation, the wrists outside the policy's joints) or at all (torso
mass, pelvis CoM, floor friction): a yardstick for a fitted πΔ on the same data (``asap-delta``'s
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
from bench_delta import SHIPPED, recording

from asap_core.artifact import PolicyMetadata, load_artifact
from asap_sim.motor import latency_steps
from asap_sim.profiles import RANDOM_PREFIX, random_profile_dict
from asap_training.cli.demo import DemoCfg
from asap_training.data.dataset import RealDataset
from asap_training.envs.delta_env import DeltaCfg, delta_env_cfg, delta_obs_layout
from asap_training.eval.openloop import open_loop_errors
from asap_training.parallel import use_threads

PARTS = ("torque_scale", "joint_friction", "joint_damping", "armature", "link_mass_scale", "base_com_offset",
         "actuation_latency_ms", "ground_friction")  # fmt: skip
"""The gap's dynamics; its sensor noise is in the recordings and in no replay."""
JOINT_LEVEL = ("torque_scale", "joint_damping", "actuation_latency_ms")
"""The parts :func:`joint_level_correction` corrects."""


def joint_level_correction(
    gap: dict, meta: PolicyMetadata, dataset: RealDataset
) -> Callable[[np.ndarray], np.ndarray]:
    """Δa (every action joint) from πΔ's observation: with torque scale s, added damping d, the policy's
    gains kp, kd, action scale σ and default pose q0, the gap's motor gives s (kp (q0 + σ a_eff − q) − kd q̇)
    − d q̇, the nominal one kp (q0 + σ (a + Δa) − q) − kd q̇; equal at the period's start for

        Δa = s a_eff − a − (s − 1)(q − q0) / σ − ((s − 1) kd + d) q̇ / (kp σ),

    a_eff the command the latency leaves in force over the period: the previous action for its delayed
    share of the physics steps (all of them past one period: the action before that, up to half a period
    on these gaps, is not in πΔ's input)."""
    joints = meta.joint_names
    s = np.array([gap["torque_scale"].get(j, 1.0) for j in joints])
    d = np.array([gap["joint_damping"].get(j, 0.0) for j in joints])
    kp, kd, sigma = meta.array("kp"), meta.array("kd"), meta.array("action_scale")
    sim = delta_env_cfg(dataset, num_envs=1)
    delayed = min(latency_steps(gap["actuation_latency_ms"], sim.physics_dt) / sim.decimation, 1.0)
    delta = DeltaCfg()
    cols = delta_obs_layout(len(joints), delta.action_history)
    dof_vel_scale = delta.obs_scales["dof_vel"]

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
    dataset = recording(args.gap, seeds=range(1, args.episodes + 1), action_noise=DemoCfg().excitation)
    closed_form = joint_level_correction(gap, load_artifact(SHIPPED).metadata, dataset)
    with tempfile.TemporaryDirectory(prefix="gap_parts_") as scratch:

        def error(parts: list[str], correction: Callable[[np.ndarray], np.ndarray] | None = None) -> float:
            path = Path(scratch) / "profile.yaml"  # written and read before the next replay
            path.write_text(yaml.safe_dump({k: gap[k] for k in parts}))
            return open_loop_errors(dataset, profile=str(path), correction=correction)["1"]["e_g_mpjpe_mm"]

        report(gap["description"], args.episodes, dataset, error, closed_form)


def report(
    description: str, episodes: int, dataset: RealDataset,
    error: Callable[..., float], closed_form: Callable[[np.ndarray], np.ndarray],
) -> None:  # fmt: skip
    """Print the table: ``error(parts, correction)`` replays the dataset in a simulator with those parts."""
    none, floor = error([]), error(list(PARTS))
    print(description)
    print(f"{episodes} excitation episodes, {dataset.num_steps} ticks; 1 s open loop E_g-mpjpe: "
          f"uncorrected {none:.1f} mm, the gap's own simulator (floor) {floor:.1f} mm")  # fmt: skip
    print(f"{'part':22s} {'it alone missing':>17s} {'it alone corrected':>19s}   (mm; x uncorrected)")
    for part in PARTS:
        missing, corrected = error([other for other in PARTS if other != part]), error([part])
        ratios = f"({missing / none:.2f}, {corrected / none:.2f})"
        print(f"{part:22s} {missing:17.1f} {corrected:19.1f}   {ratios}")
    joint_level = error([], closed_form)
    beside = error([part for part in PARTS if part not in JOINT_LEVEL], closed_form)
    print(f"joint-level correction in closed form (latency, weak motors, damping) in the nominal simulator: "
          f"{joint_level:.1f} mm ({joint_level / none - 1:+.0%}); in one with the gap's other parts "
          f"{beside:.1f} mm (the floor {floor:.1f}: how close the closed form comes to exact)")  # fmt: skip


if __name__ == "__main__":
    main()
