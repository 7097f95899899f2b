"""Command line of ``asap-delta`` (:mod:`asap_training.delta.train`): fit πΔ to a real-trajectory dataset."""

from __future__ import annotations

import json
from argparse import Namespace
from collections.abc import Sequence
from dataclasses import replace

from asap_core.config_options import ConfigParser
from asap_training.cli.common import add_dataset, add_run_dir, add_threads, load_dataset, parse
from asap_training.delta import train as library
from asap_training.delta.gains import GainCalibrationCfg
from asap_training.delta.train import MODELS, DeltaTrainCfg, train_delta
from asap_training.delta.warm_start import WarmStartCfg
from asap_training.envs.delta_env import DeltaCfg
from asap_training.eval.openloop import open_loop_errors


def parser() -> ConfigParser:
    """The options of ``asap-delta``."""
    p = ConfigParser("asap-delta", library.__doc__)
    add_dataset(p)
    add_run_dir(p, "output directory (outside git)")
    p.field(DeltaTrainCfg, "model", choices=MODELS)
    p.fields(DeltaTrainCfg, "iterations", "num_envs")
    p.field(DeltaCfg, "horizon_s", "--horizon")
    p.field(DeltaCfg, "joints")
    p.fields(DeltaTrainCfg, "profile", "select_every")
    p.field(DeltaTrainCfg, "warm_start", "--no-warm-start")
    p.fields(WarmStartCfg, "search_ticks", "visited_rounds", "torque_weight", "ridge")
    p.field(GainCalibrationCfg, "iterations", "--gain-iterations")
    p.field(DeltaTrainCfg, "seed")
    add_threads(p)
    return p


def configs(p: ConfigParser, args: Namespace) -> tuple[DeltaTrainCfg, DeltaCfg]:
    """The fit's and πΔ's settings from the command line (the warm start's own options included)."""
    cfg = p.config(args, DeltaTrainCfg)
    if cfg.warm_start is not None:
        cfg = replace(cfg, warm_start=p.config(args, WarmStartCfg, cfg.warm_start))
    cfg = replace(cfg, gains=p.config(args, GainCalibrationCfg, cfg.gains))
    return cfg, p.config(args, DeltaCfg)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of ``asap-delta``: fit, then write and print the open-loop errors without and with πΔ."""
    p = parser()
    args = parse(p, argv)
    dataset = load_dataset("asap-delta", args.dataset)
    cfg, delta = configs(p, args)
    path, sha = train_delta(dataset, args.run_dir, cfg, delta=delta, progress=not args.quiet)
    report = {
        "delta_model": str(path),
        "sha256": sha,
        "without_delta": open_loop_errors(dataset, profile=cfg.profile),
        "with_delta": open_loop_errors(dataset, profile=cfg.profile, delta_model=path),
    }
    (args.run_dir / "open_loop.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
