"""Shared fixtures: synthetic episodes are slow to serialize, so each is built once per session."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parent / "graph")]
from synth_bags import Truth, write_episode  # noqa: E402


@pytest.fixture(scope="session")
def episode(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Truth]:
    """A 0.6 s episode with every stream, its ground truth."""
    path = tmp_path_factory.mktemp("bags") / "ep"
    return path, write_episode(path, seconds=0.6)
