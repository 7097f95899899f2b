"""``asap-bag``: inspect and repair episode bags without ROS.

asap-bag info <bag>...       topics, counts, duration, episode metadata, problems
asap-bag reindex <bag>...    close files cut off by a crash, step over damage (never editing a file in
                             place), rebuild metadata.yaml, report what was lost
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from asap_logger.errors import LoggerError
from asap_logger.reader import open_episode
from asap_logger.repair import reindex


def _info(bag: Path) -> None:
    ep = open_episode(bag)
    span = max((ep.raw(t).t_ns[-1] for t, n in ep.counts.items() if n), default=ep.start_ns) - ep.start_ns
    print(f"{bag}: {sum(ep.counts.values())} messages, {span * 1e-9:.2f} s")
    for topic, msgtype in sorted(ep.topics.items()):
        print(f"  {topic:<24} {msgtype:<32} {ep.counts[topic]:>8}")
    for key in ("episode_id", "status", "start_reason", "stop_reason"):
        if key in ep.metadata:
            print(f"  {key}: {ep.metadata[key]}")
    for issue in ep.issues:
        print(f"  ! {issue}")


def _reindex(bag: Path) -> None:
    report = reindex(bag)
    closed = ", ".join(report.closed_files) or "none needed closing"
    print(f"{bag}: {report.message_count} messages; closed: {closed}; metadata.yaml rewritten")
    for problem in report.problems:
        print(f"  ! {problem}")
    for lost in report.lost:
        print(f"  lost: {lost}")
    for backup in report.backups:
        print(f"  original kept as {bag / backup} (it holds bytes the repaired file lacks)")


def parser() -> argparse.ArgumentParser:
    """The arguments of ``asap-bag`` (no options: it has nothing to configure)."""
    p = argparse.ArgumentParser(
        prog="asap-bag", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("command", choices=["info", "reindex"])
    p.add_argument("bags", nargs="+", type=Path, help="episode bag directories")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``asap-bag`` console script."""
    args = parser().parse_args(argv)
    run = {"info": _info, "reindex": _reindex}[args.command]
    status = 0
    for bag in args.bags:
        try:
            run(bag)
        except LoggerError as exc:
            print(f"asap-bag {args.command}: {exc}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
