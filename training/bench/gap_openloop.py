"""Open-loop replay on reality gaps: no correction, SysID, πΔ on the nominal simulator and πΔ on SysID's.

    python training/bench/gap_openloop.py [--gap random:10001 ...] [--episodes 4] [--bases nominal sysid]

For each gap, records the shipped policy's excitation episodes on the twin core (as the demo's data
episodes: action noise 0.2, noise seeds 1, 2, ...), then replays them (1 s open loop, E_g-mpjpe, every
window as ``asap-delta`` scores) without correction, in the gap's own simulator (the floor), in the
simulator SysID identifies from them (``asap-demo``'s identification and budget) and with πΔ fitted as
the demo fits it (``asap_training.cli.demo.delta_train_cfg``, data-chosen joints) on each ``--bases``
simulator: ``nominal`` (the paper's) or ``sysid`` (``asap-demo --delta-base sysid``). The twin core is
the node's own tick on the twin without ROS: the demo's data without the graph, in a few seconds per
episode; what this leaves out is the graph's run-to-run variation. Wall time per gap on 2 cores, 4
episodes: ~4 min for SysID, 5-9 min per πΔ fit. Adds each gap's row to ``<out>/results.json`` (a later
run with other ``--bases`` adds its columns) and prints the table of everything there.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench_delta import recording

from asap_sim.profiles import RANDOM_PREFIX
from asap_training.cli.demo import DELTA_BASES, DemoCfg, delta_train_cfg, identify_sysid
from asap_training.data.dataset import RealDataset
from asap_training.delta.train import train_delta
from asap_training.envs.delta_env import DeltaCfg
from asap_training.eval.openloop import open_loop_errors
from asap_training.parallel import use_threads

HORIZON = "1"
"""The open-loop horizon reported (s), the acceptance's."""


def one_second(dataset: RealDataset, **replay: Any) -> float:
    """1 s open-loop E_g-mpjpe of ``dataset`` replayed with ``replay`` (``open_loop_errors``'s keywords)."""
    return float(open_loop_errors(dataset, **replay)[HORIZON]["e_g_mpjpe_mm"])


def measure(gap: str, out: Path, cfg: DemoCfg, bases: list[str]) -> dict[str, float]:
    """One gap's row: mm at 1 s for each replay, and the seconds each fit took."""
    t0 = time.monotonic()
    dataset = recording(gap, seeds=range(1, cfg.episodes + 1), action_noise=cfg.excitation)
    row = {"none": one_second(dataset), "floor": one_second(dataset, profile=gap)}
    print(f"{gap}: {cfg.episodes} episodes ({dataset.num_steps} ticks) in {time.monotonic() - t0:.0f} s; "
          f"uncorrected {row['none']:.1f} mm, floor {row['floor']:.1f} mm", flush=True)  # fmt: skip
    profiles = {"nominal": "nominal"}
    if "sysid" in bases:
        t0 = time.monotonic()
        identified = identify_sysid(replace(cfg, out=out), dataset)  # the demo's, into out/sysid/
        profiles["sysid"] = str(identified)
        row |= {"SysID": one_second(dataset, profile=str(identified)), "SysID_s": time.monotonic() - t0}
        print(f"{gap}: SysID {row['SysID']:.1f} mm in {row['SysID_s']:.0f} s", flush=True)
    for base in bases:
        t0 = time.monotonic()
        train = delta_train_cfg(cfg, profiles[base])
        path, _ = train_delta(dataset, out / f"delta_{base}", train, delta=DeltaCfg(joints=cfg.delta_joints),
                              progress=False)  # fmt: skip
        name = f"πΔ on {base}"
        row |= {name: one_second(dataset, profile=profiles[base], delta_model=path),
                f"{name}_s": time.monotonic() - t0}  # fmt: skip
        print(f"{gap}: {name} {row[name]:.1f} mm ({row[name] / row['none'] - 1:+.0%}) in "
              f"{row[f'{name}_s']:.0f} s", flush=True)  # fmt: skip
    return row


def table(rows: dict[str, dict[str, float]]) -> str:
    """Markdown: mm at 1 s, each correction's change against none in brackets."""
    columns = [c for c in dict.fromkeys(c for row in rows.values() for c in row) if not c.endswith("_s")]
    lines = ["| gap | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for gap, row in rows.items():
        change = {c: f" ({row[c] / row['none'] - 1:+.0%})" for c in row if c not in ("none", "floor")}
        cells = [f"{row[c]:.1f}{change.get(c, '')}" if c in row else "" for c in columns]
        lines.append(f"| `{gap}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    """Measure every gap, print the table."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gap", nargs="+", default=[f"{RANDOM_PREFIX}10001"], help="dynamics profiles")
    p.add_argument("--episodes", type=int, default=DemoCfg.quick().episodes, help="excitation episodes")
    p.add_argument("--bases", nargs="+", default=list(DELTA_BASES), choices=DELTA_BASES,
                   help="simulators πΔ corrects")  # fmt: skip
    p.add_argument("--out", type=Path, default=Path("runs/gap_openloop"), help="output folder")
    args = p.parse_args()
    use_threads(0)
    cfg = DemoCfg(episodes=args.episodes)
    results = args.out / "results.json"
    rows = json.loads(results.read_text()) if results.exists() else {}
    for gap in args.gap:
        rows[gap] = rows.get(gap, {}) | measure(gap, args.out / gap.replace(":", "_"), cfg, args.bases)
        args.out.mkdir(parents=True, exist_ok=True)
        results.write_text(json.dumps(rows, indent=1))
    print(f"\n1 s open loop E_g-mpjpe, mm; {args.episodes} excitation episodes per gap (twin core)")
    print(table(rows))


if __name__ == "__main__":
    main()
