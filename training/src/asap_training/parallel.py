"""How many CPU threads this process steps physics and runs torch with, under torchrun or alone."""

from __future__ import annotations

import os

import torch

_threads: int | None = None


def available_cores() -> int:
    """CPU cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def distributed_rank() -> tuple[int, int, int]:
    """(global rank, local rank, processes on this machine) from torchrun's environment; (0, 0, 1) alone."""
    return (int(os.getenv("RANK", "0")), int(os.getenv("LOCAL_RANK", "0")),
            int(os.getenv("LOCAL_WORLD_SIZE", "1")))


def _share_of_cores() -> int:
    """This machine's cores shared among the processes torchrun started on it."""
    return max(1, available_cores() // distributed_rank()[2])


def default_threads() -> int:
    """What ``threads=0`` means: the count :func:`use_threads` set, else :func:`_share_of_cores`."""
    return _threads or _share_of_cores()


def use_threads(requested: int = 0) -> int:
    """Set the threads of this process (physics workers and torch's intra-op pool): ``requested``, or this
    process's share of the cores for 0. Command lines call it once with their ``--threads``."""
    global _threads
    _threads = requested or _share_of_cores()
    torch.set_num_threads(_threads)
    return _threads
