"""Command line of ``asap-eval`` (:mod:`asap_training.eval.evaluate`): closed-loop metrics of an artifact."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from asap_core.config_options import ConfigParser
from asap_training.cli.common import add_out
from asap_training.eval import evaluate as library
from asap_training.eval.evaluate import EvalCfg, evaluate


def parser() -> ConfigParser:
    """The options of ``asap-eval``."""
    p = ConfigParser("asap-eval", library.__doc__)
    p.add_argument("artifact", type=Path, help="policy .onnx (asap_core artifact)")
    p.fields(EvalCfg, "motion", "profile", "backend", "physics_hz", "twin_drive", "twin_physics_hz",
             "twin_held_lag", "hold_gains")
    add_out(p, "folder for eval.json and eval.png (default: print only)")
    return p


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of ``asap-eval``."""
    p = parser()
    args = p.parse_args(argv)
    print(json.dumps(evaluate(args.artifact, p.config(args, EvalCfg), args.out), indent=2))


if __name__ == "__main__":
    main()
