"""asap-push: send a policy artifact to the running policy node (LoadPolicy) and print its answer.

The node validates the artifact (contract, joints, control period), dry-runs it on the current state
and swaps it in at a tick boundary, or refuses and keeps running the policy it has.

    asap-push training/policies/arm_swing/policy.onnx
    asap-push runs/finetuned/policy.onnx --blend-ticks 25 --timeout 20

Exit status: 0 accepted, 1 refused (the node's reason is printed), 2 no policy node reachable.
The path is resolved here when the file exists here; on a robot the node reads its own file system.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from asap_bringup.graph_client import GraphClient, GraphClientCfg, GraphError, LoadResult
from asap_core.config_options import ConfigParser

ACCEPTED, REFUSED, UNREACHABLE = 0, 1, 2


def describe(result: LoadResult) -> str:
    """The node's answer as one or two lines for a terminal."""
    if result.accepted:
        return f"accepted: {result.name} sha256 {result.sha256}\n{result.message}"
    return f"refused: {result.message}"


def push(path: str | Path, blend_ticks: int = 0, cfg: GraphClientCfg | None = None) -> int:
    """Load ``path`` into the running node; print the answer; return the exit status."""
    try:
        with GraphClient(cfg or GraphClientCfg()) as client:
            result = client.load_policy(path, blend_ticks)
    except GraphError as e:  # not there (GraphNotReadyError), or no answer
        print(f"asap-push: no policy node reachable: {e}", file=sys.stderr)
        return UNREACHABLE
    print(describe(result), file=sys.stdout if result.accepted else sys.stderr)
    return ACCEPTED if result.accepted else REFUSED


def parser() -> ConfigParser:
    """The options of ``asap-push``: ``--timeout`` is the client's ``service_timeout_s``."""
    ap = ConfigParser("asap-push", __doc__)
    ap.add_argument("policy", help="policy artifact (.onnx) written by asap-export")
    ap.add_argument(
        "--blend-ticks",
        type=int,
        default=0,
        help="control ticks blending the old targets into the new policy's (0: the node's swap_blend_ticks)",
    )
    ap.field(GraphClientCfg, "service_timeout_s", "--timeout")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``asap-push``."""
    ap = parser()
    args = ap.parse_args(argv)
    if args.blend_ticks < 0:
        ap.error("--blend-ticks must be >= 0")
    return push(args.policy, args.blend_ticks, ap.config(args, GraphClientCfg))


if __name__ == "__main__":
    raise SystemExit(main())
