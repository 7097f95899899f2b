"""Command line of ``asap-ingest`` (:mod:`asap_training.data.ingest`): episode bags → a stage-2 dataset."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from asap_core.artifact import ArtifactError
from asap_core.config_options import ConfigParser
from asap_training.cli.common import add_out
from asap_training.data import ingest as library
from asap_training.data.ingest import IngestCfg, IngestError, ingest, summary


def parser() -> ConfigParser:
    """The options of ``asap-ingest``."""
    p = ConfigParser("asap-ingest", library.__doc__)
    p.add_argument("bags", nargs="+", type=Path, help="episode bag directories (or .mcap files)")
    p.add_argument("--artifact", type=Path,
                   help="the policy .onnx that ran: checks its sha256 and control_dt, gives the action joint "
                   "order (without it the 23 asap joints are assumed)")
    p.field(IngestCfg, "mode_machine")
    p.field(IngestCfg, "min_steps")
    add_out(p, "dataset file to write (.npz)", required=True)
    return p


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of ``asap-ingest``; exits 2 with the reason when an episode is refused."""
    p = parser()
    args = p.parse_args(argv)
    try:
        dataset = ingest(args.bags, args.artifact, p.config(args, IngestCfg))
    except (IngestError, ArtifactError) as exc:
        print(f"asap-ingest: refused: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    path = dataset.save(args.out)
    print(summary(dataset))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
