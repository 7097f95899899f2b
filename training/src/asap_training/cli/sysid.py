"""Command line of ``asap-sysid`` (:mod:`asap_training.baselines.sysid`): the SysID baseline."""

from __future__ import annotations

import json
from collections.abc import Sequence

from asap_core.config_options import ConfigParser
from asap_training.baselines import sysid as library
from asap_training.baselines.sysid import GROUPINGS, SysidCfg, identify
from asap_training.cli.common import add_dataset, add_out, add_threads, load_dataset, parse
from asap_training.eval.metrics import ERROR_METRICS


def parser() -> ConfigParser:
    """The options of ``asap-sysid``."""
    p = ConfigParser("asap-sysid", library.__doc__)
    add_dataset(p)
    add_out(p, "identified profile .yaml (the search record: .json next to it)", required=True)
    p.field(SysidCfg, "max_evaluations", "--max-evals")
    p.field(SysidCfg, "groups", choices=GROUPINGS)
    p.fields(SysidCfg, "extended", "base_profile", "only")
    p.field(SysidCfg, "metric", choices=ERROR_METRICS)
    p.field(SysidCfg, "max_windows")
    add_threads(p)
    return p


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of ``asap-sysid``."""
    p = parser()
    args = parse(p, argv)
    dataset = load_dataset("asap-sysid", args.dataset)
    cfg = p.config(args, SysidCfg)
    result = identify(dataset, args.out, cfg, progress=not args.quiet)
    changed = {
        param.name: round(float(v), 4)
        for param, v in zip(result.params, result.values, strict=True)
        if v != param.nominal
    }
    print(
        f"{args.out}: open-loop {cfg.metric} "
        f"{result.objective_before:.2f} -> {result.objective_after:.2f} mm "
        f"after {result.evaluations} replays ({result.wall_s:.0f} s); changed: {json.dumps(changed)}"
    )


if __name__ == "__main__":
    main()
