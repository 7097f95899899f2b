"""Command line of ``asap-convert`` (:mod:`asap_training.motion.convert`): ASAP's retargeted ``.pkl`` clips
into the project's ``.npz`` clips, each with a provenance record and its checks, and the licence beside them.

    asap-convert ../shared/data/asap_g1/motions/video_kick_level1_filter_amass.pkl   # into the shipped clips
    asap-convert motions/*.pkl --out /tmp/clips
"""

from __future__ import annotations

import shlex
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from asap_core.config_options import ConfigParser
from asap_core.motion import CLIP_DIR
from asap_sim.kinematics import G1Kinematics
from asap_sim.model import build_model
from asap_training.cli.common import add_out
from asap_training.motion.convert import convert_asap_pkl, summary_line

LICENCE = "LICENSE.asap"


def parser() -> ConfigParser:
    """The options of ``asap-convert``."""
    p = ConfigParser("asap-convert", __doc__)
    p.add_argument("sources", type=Path, nargs="+", help="ASAP/PHC .pkl files")
    add_out(p, f"output folder (default: the shipped clips, {CLIP_DIR})")
    p.add_argument("--licence", type=Path,
                   help=f"the sources' licence, copied beside the clips (default: {LICENCE} in a "
                        "source's folder or the one above it, as in ASAP's data)")
    return p


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of ``asap-convert``."""
    p = parser()
    args = p.parse_args(argv)
    out: Path = args.out or CLIP_DIR
    licence = args.licence or _find_licence(args.sources[0])
    if licence is None or not licence.is_file():
        p.error(f"no {LICENCE} beside {args.sources[0]} or one folder up: pass --licence PATH (the clips "
                "ship with their licence)")
    command = shlex.join(["asap-convert", *(argv if argv is not None else sys.argv[1:])])
    kin = G1Kinematics(build_model())
    for source in args.sources:
        for converted in convert_asap_pkl(source, out, kin, command):
            print(summary_line(converted.record))
    shutil.copyfile(licence, out / LICENCE)


def _find_licence(source: Path) -> Path | None:
    return next((d / LICENCE for d in (source.parent, source.parent.parent) if (d / LICENCE).is_file()), None)


if __name__ == "__main__":
    main()
