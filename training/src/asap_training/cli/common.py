"""Options the training commands share that are no config field: files in and out, threads, quiet.

Config fields become options through :class:`asap_core.config_options.ConfigParser`; these are the
rest, declared here once so that every command spells and explains them alike.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from asap_core.config_options import ConfigParser
from asap_training.data.dataset import RealDataset
from asap_training.parallel import use_threads


def add_run_dir(p: ConfigParser, what: str) -> None:
    """``--run-dir`` (required): ``what`` the directory is to this command."""
    p.add_argument("--run-dir", type=Path, required=True, help=what)


def add_out(p: ConfigParser, what: str, *, required: bool = False) -> None:
    """``--out``: ``what`` this command writes there (with its default when not required)."""
    p.add_argument("--out", type=Path, required=required, help=what)


def add_dataset(p: ConfigParser) -> None:
    """``--dataset`` (required): a real-trajectory dataset (read with :func:`load_dataset`)."""
    p.add_argument("--dataset", type=Path, required=True,
                   help="dataset .npz (from asap-ingest, or a twin rollout)")


def load_dataset(prog: str, path: Path) -> RealDataset:
    """The ``--dataset``, or exit naming the command, the file and why it could not be read."""
    try:
        return RealDataset.load(path)
    except (OSError, ValueError, KeyError) as exc:
        raise SystemExit(f"{prog}: cannot read dataset {path}: {exc}") from None


def add_threads(p: ConfigParser, *, quiet: bool = True) -> None:
    """``--threads`` (:func:`parse` applies it) and, with ``quiet``, ``--quiet`` (no progress bar)."""
    p.add_argument("--threads", type=int, default=0,
                   help="CPU threads for physics and torch (default 0: every core, shared among the "
                   "processes torchrun starts on this machine)")
    if quiet:
        add_quiet(p)


def add_quiet(p: ConfigParser) -> None:
    """``--quiet``: no progress bar."""
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def parse(p: ConfigParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line, this process's ``--threads`` applied (:func:`asap_training.parallel.use_threads`)."""
    args = p.parse_args(argv)
    use_threads(args.threads)
    return args
