"""``make test-robot`` (scripts/robot_py310.py) catches what it is there for: a Python 3.11-only API in a
robot-side module, and a robot-side import the image does not install."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import robot_py310


def _package(root: Path, files: dict[str, str]) -> Path:
    pkg = root / "robotpkg"
    pkg.mkdir()
    for name, text in {"__init__.py": "", **files}.items():
        (pkg / name).write_text(text)
    return pkg


def test_module_level_imports_are_followed_and_function_bodies_are_not(tmp_path: Path) -> None:
    pkg = _package(tmp_path, {
        "direct.py": "import numpy\ntry:\n    import scipy\nexcept ImportError:\n    pass\n",
        "lazy.py": "def f():\n    import scipy\n",
        "through.py": "from robotpkg import direct\n",
        "ros.py": "from rclpy.node import Node\n",
    })
    imports = robot_py310.Imports({"numpy", "robotpkg"}, [tmp_path])
    assert imports.missing(pkg / "direct.py") == {"scipy"}
    assert imports.missing(pkg / "lazy.py") == set()
    assert imports.missing(pkg / "through.py") == {"scipy"}
    assert imports.missing(pkg / "ros.py") == {"rclpy"}


@pytest.mark.skipif(not (robot_py310.VENV / "bin" / "python").exists(),
                    reason="no .venv-robot (make test-robot builds it where a Python 3.10 exists)")
def test_a_python_311_only_import_fails_the_python_310_import_check(tmp_path: Path) -> None:
    _package(tmp_path, {"new.py": "from typing import Self\n", "old.py": "from typing import TypeVar\n"})
    vpy = robot_py310.VENV / "bin" / "python"
    env = robot_py310.venv_env(vpy)
    env["PYTHONPATH"] = f"{tmp_path}{os.pathsep}{env['PYTHONPATH']}"
    failed = robot_py310.import_all(vpy, env, ["robotpkg.old", "robotpkg.new"])
    assert list(failed) == ["robotpkg.new"]
    assert "cannot import name 'Self' from 'typing'" in failed["robotpkg.new"]


def test_deferred_imports_are_followed_through_optional_sources(tmp_path: Path) -> None:
    """A robot-side tool may defer MuJoCo through asap_sim (the monitor's FK), never asap_training."""
    pkg = _package(tmp_path, {
        "fk.py": "def f():\n    from optional.kin import K\n",
        "training.py": "def f():\n    from asap_training.motion import build_library\n",
    })
    (tmp_path / "optional").mkdir()
    (tmp_path / "optional" / "__init__.py").write_text("")
    (tmp_path / "optional" / "kin.py").write_text("import mujoco\nimport numpy\n")
    deferred = robot_py310.Imports({"numpy", "robotpkg"}, [tmp_path], deferred=True)
    assert deferred.missing(pkg / "fk.py") == {"mujoco"}
    assert deferred.missing(pkg / "training.py") == {"asap_training"}
    module_level = robot_py310.Imports({"numpy", "robotpkg"}, [tmp_path])
    assert module_level.missing(pkg / "fk.py") == module_level.missing(pkg / "training.py") == set()

