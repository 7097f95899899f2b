"""Command line of ``asap-export`` (:mod:`asap_training.rl.export`): a checkpoint → a policy artifact."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from asap_core.config_options import ConfigParser
from asap_training.cli.common import add_out, add_run_dir
from asap_training.rl import export as library
from asap_training.rl.export import export_runner
from asap_training.rl.train import latest_checkpoint, load_run


def parser() -> ConfigParser:
    """The options of ``asap-export``."""
    p = ConfigParser("asap-export", library.__doc__)
    add_run_dir(p, "training run directory")
    p.add_argument("--checkpoint", type=Path, help="checkpoint file (default: the latest in --run-dir)")
    add_out(p, "artifact path (default <run-dir>/policy.onnx)")
    p.add_argument("--name", help="policy name in the metadata (default asap_<motion>)")
    return p


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of ``asap-export``."""
    args = parser().parse_args(argv)
    checkpoint = args.checkpoint or latest_checkpoint(args.run_dir)
    if checkpoint is None:
        raise SystemExit(f"asap-export: no model_*.pt in {args.run_dir}")
    out = args.out or args.run_dir / "policy.onnx"
    run_name = f"{args.run_dir.name}/{checkpoint.name}"
    sha = export_runner(load_run(args.run_dir, checkpoint), out, run_name=run_name, name=args.name)
    print(f"{out}: sha256 {sha}")


if __name__ == "__main__":
    main()
