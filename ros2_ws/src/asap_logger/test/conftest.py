"""DDS isolation, the graph tests' helpers on the path, and synthetic episodes (slow to serialize, so
each is built once per session)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from asap_logger.testing.bags import Truth, write_episode
from asap_testing.dds import isolate

isolate()
sys.path[:0] = [str(Path(__file__).parent / "graph")]  # harness.py, stream_publisher.py


@pytest.fixture(scope="session")
def episode(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Truth]:
    """A 0.6 s episode with every stream, its ground truth."""
    path = tmp_path_factory.mktemp("bags") / "ep"
    return path, write_episode(path, seconds=0.6)
