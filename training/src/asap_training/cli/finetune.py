"""Command line of ``asap-finetune`` (:mod:`asap_training.rl.finetune`): fine-tune a policy in a corrected
simulator and export it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from asap_core.config_options import ConfigParser
from asap_training.cli.common import add_out, add_run_dir, add_threads, parse
from asap_training.envs.delta_model import DeltaModel
from asap_training.rl import finetune as library
from asap_training.rl.finetune import FineTuneCfg, fine_tune


def parser() -> ConfigParser:
    """The options of ``asap-finetune``."""
    p = ConfigParser("asap-finetune", library.__doc__)
    p.add_argument("--parent", type=Path, required=True,
                   help="stage-1 run dir (e.g. training/policies/arm_swing)")
    add_run_dir(p, "output run directory (outside git)")
    add_out(p, "artifact path (default <run-dir>/policy.onnx)")
    p.fields(FineTuneCfg, "iterations", "num_envs")
    p.field(FineTuneCfg, "delta_model", "--delta")
    p.field(FineTuneCfg, "delta_scale_range", nargs=2, metavar=("LOW", "HIGH"))
    p.fields(FineTuneCfg, "profile", "table_vi_dr", "select_every", "select_episodes")
    p.fields(FineTuneCfg, "physics_dt", "held_drive_lag", "gain_set")
    p.field(FineTuneCfg, "action_delay", "--no-action-delay")
    p.fields(FineTuneCfg, "anchor", "anchor_run")
    p.fields(FineTuneCfg, "dataset_sha256", "seed")
    add_threads(p)
    return p


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of ``asap-finetune``."""
    p = parser()
    args = parse(p, argv)
    cfg = p.config(args, FineTuneCfg)
    if not cfg.dataset_sha256 and cfg.delta_model is not None:
        cfg = replace(cfg, dataset_sha256=DeltaModel(cfg.delta_model).meta.dataset_sha256)
    out = args.out or args.run_dir / "policy.onnx"
    sha = fine_tune(args.parent, cfg, args.run_dir, out, progress=not args.quiet)
    print(f"{out}: sha256 {sha}")


if __name__ == "__main__":
    main()
