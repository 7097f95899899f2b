"""Command line of ``asap-author`` (:mod:`asap_training.motion.authoring`): regenerate the shipped clips."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from asap_core.config_options import ConfigParser
from asap_core.motion import CLIP_DIR, save_clip
from asap_sim.model import build_model
from asap_training.cli.common import add_out
from asap_training.motion import authoring as library
from asap_training.motion.authoring import CLIPS, AuthorCfg, ClipAuthor


def parser() -> ConfigParser:
    """The options of ``asap-author``."""
    p = ConfigParser("asap-author", library.__doc__)
    p.add_argument("--clip", action="append", choices=sorted(CLIPS),
                   help="clip to author (repeatable; default: all)")
    add_out(p, f"output folder (default: the package's clips folder, {CLIP_DIR})")
    p.field(AuthorCfg, "fps")
    return p


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of ``asap-author``: author the clips and write them as ``.npz``."""
    p = parser()
    args = p.parse_args(argv)
    out: Path = args.out or CLIP_DIR
    author = ClipAuthor(build_model(timestep=0.005), p.config(args, AuthorCfg))
    out.mkdir(parents=True, exist_ok=True)
    for name in args.clip or sorted(CLIPS):
        clip = author.author(name, CLIPS[name])
        save_clip(clip, out / f"{name}.npz")
        print(f"{name}: {clip.num_frames} frames, {clip.duration_s:.2f} s -> {out / (name + '.npz')}")


if __name__ == "__main__":
    main()
