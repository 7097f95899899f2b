"""Command line of ``asap-deltadyn`` (:mod:`asap_training.baselines.delta_dynamics`): the DeltaDynamics
baseline."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict

from asap_core.config_options import ConfigParser
from asap_training.baselines import delta_dynamics as library
from asap_training.baselines.delta_dynamics import DeltaDynCfg, simulator_overrides, train_delta_dynamics
from asap_training.cli.common import add_dataset, add_out, add_quiet, add_threads, load_dataset, parse
from asap_training.eval.openloop import open_loop_errors


def parser() -> ConfigParser:
    """The options of ``asap-deltadyn``."""
    p = ConfigParser("asap-deltadyn", library.__doc__)
    add_dataset(p)
    add_out(p, "model file .pt (training report: .json next to it)", required=True)
    p.field(DeltaDynCfg, "k_steps", "--k")
    p.fields(DeltaDynCfg, "rounds", "epochs", "starts_per_round", "hidden", "profile", "physics_dt", "seed")
    add_threads(p, quiet=False)
    p.add_argument("--no-eval", action="store_true", help="skip the open-loop replay errors before/after")
    add_quiet(p)
    return p


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of ``asap-deltadyn``: fit, save, and report (with the open-loop errors without and
    with the correction, at the rate it was fitted for)."""
    p = parser()
    args = parse(p, argv)
    dataset = load_dataset("asap-deltadyn", args.dataset)
    cfg = p.config(args, DeltaDynCfg)
    t0 = time.monotonic()
    model, log = train_delta_dynamics(dataset, cfg, progress=not args.quiet)
    sha = model.save(args.out)
    report = {
        "model": str(args.out),
        "sha256": sha,
        "meta": asdict(model.meta),
        "config": asdict(cfg),
        "rounds": log,
        "train_wall_s": time.monotonic() - t0,
    }
    if not args.no_eval:
        rate = {"physics_dt": cfg.physics_dt, "decimation": round(dataset.control_dt / cfg.physics_dt)}
        report["open_loop_without"] = open_loop_errors(dataset, profile=cfg.profile, env_overrides=rate)
        report["open_loop_with"] = open_loop_errors(
            dataset, profile=cfg.profile, env_overrides={**rate, **simulator_overrides(args.out)}
        )
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: v for k, v in report.items() if k not in ("meta", "config")}, indent=2))


if __name__ == "__main__":
    main()
