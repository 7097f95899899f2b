"""Each ROS package's tests run alone: collected from the package folder with neither this repository's
pytest configuration nor its root ``tests/`` helpers (as ``colcon test`` runs them, or a robot PC that
has only ``ros2_ws/src``). Shared helpers come from installed packages (``asap_testing``,
``asap_core.testing``, ``asap_logger.testing``), declared as ``test_depend``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "ros2_ws" / "src"
PACKAGES = sorted(p.parent.name for p in SRC.glob("*/test") if p.is_dir())


def test_every_python_package_has_tests() -> None:
    expected = {"asap_core", "asap_logger", "asap_policy", "asap_sim", "asap_bringup", "asap_testing"}
    assert expected <= set(PACKAGES)


@pytest.mark.parametrize("package", PACKAGES)
def test_the_package_tests_collect_without_the_repository_configuration(package: str) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-c", "/dev/null",
         "--rootdir", str(SRC / package), str(SRC / package / "test")],
        capture_output=True, text=True, timeout=300, cwd=SRC / package)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert " collected" in run.stdout.splitlines()[-1] and "error" not in run.stdout.splitlines()[-1]
