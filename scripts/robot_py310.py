"""``make test-robot``: the robot side on the robot image's Python 3.10 with the robot pins.

The robot image (``docker/robot.Dockerfile``: ROS 2 Humble, Python 3.10, ``docker/requirements-robot.txt``)
cannot be built here (no Docker engine). This step stands in for it:

1. finds a CPython 3.10: ``--python`` / ``$ASAP_PYTHON310``, else pyenv's newest 3.10.x, else ``python3.10``
   on PATH; where there is none it says so and skips (exit 0);
2. keeps ``.venv-robot/`` holding exactly the robot pins, plus pytest and PyYAML (the image takes
   ``python3-yaml`` from apt) at the versions of ``constraints.txt``; rebuilt only when the pins, the
   interpreter or this script change (a stamp, as ``scripts/setup.sh`` does);
3. imports there, with ROS blocked, every module of the robot-side packages that needs no ROS, and fails
   on any that does not import (a module that imports something the image lacks, other than ROS, fails
   too: add it to the pins or keep it out of robot-side code); imports inside functions are followed
   too, through the sources of the optional packages (``OPTIONAL_SOURCES``): a robot-side tool may
   defer an import only of what ``NOT_IN_ROBOT_IMAGE`` names (the monitor's FK: MuJoCo, through
   ``asap_sim``), never of anything else (``asap_training``);
4. runs there the unit tests of those packages that need no ROS, torch or MuJoCo
   (``pytest -m "not graph and not node"``), plus ``tests/robot/`` and ``tests/faults/``;
5. resolves the pins and everything they pull for CPython 3.10 on manylinux aarch64 (the G1's Jetson
   Orin) and x86_64 (glibc <= 2.35, Humble's Ubuntu 22.04) with wheels only: pip's dry run reads PyPI's
   metadata without downloading the wheels (~10 s); the result is cached per pins; without PyPI the
   check is skipped with that reason, never passed.

    python scripts/robot_py310.py                  # what make test runs
    python scripts/robot_py310.py --python /usr/bin/python3.10 --force
"""

from __future__ import annotations

import argparse
import ast
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "ros2_ws" / "src"
sys.path.insert(0, str(SRC / "asap_testing"))
from asap_testing.ros_free import FORBIDDEN  # noqa: E402

VENV = ROOT / ".venv-robot"
PINS = ROOT / "docker" / "requirements-robot.txt"
ROBOT_PACKAGES = ("asap_core", "asap_logger", "asap_policy", "asap_bringup", "asap_testing")
"""What the robot image builds (everything but the MuJoCo twin)."""
OPTIONAL_SOURCES = ("asap_sim",)
"""Packages the image does not build whose modules robot-side code may import inside a function (where
their dependencies are installed); their sources are followed to check what those imports need."""
ROBOT_TESTS = (ROOT / "tests" / "robot", ROOT / "tests" / "faults", ROOT / "tests" / "interfaces")
"""Cross-package tests run there too (those of them that need nothing the robot venv lacks)."""
TEST_TOOLS = ("pytest", "pytest-timeout", "pyyaml")
"""Added to the pins in .venv-robot, at constraints.txt's versions (PyYAML: the image's apt python3-yaml)."""
ROS = {*FORBIDDEN, "launch", "launch_ros", "ament_index_python", "rcl_interfaces", "geometry_msgs",
       "visualization_msgs", "tf2_msgs"}
"""Top-level modules that ROS 2 provides on the robot (never in .venv-robot)."""
NOT_IN_ROBOT_IMAGE = {
    "mujoco": "MuJoCo 4 needs Python >= 3.11 (make_urdf, the twin and the monitor's FK run on a workstation)",
}
"""Other imports a robot-side module may have, with the reason the image does without them."""
GLIBC_MAX = 35
"""Ubuntu 22.04 (Humble's base, and JetPack 6's): manylinux_2_35 and older wheels install."""
ARCHES = ("aarch64", "x86_64")
_OFFLINE = re.compile(r"NewConnectionError|Failed to establish a new connection|Temporary failure in name "
                      r"resolution|Network is unreachable|ConnectTimeout|ProxyError|Name or service not "
                      r"known")


def say(text: str) -> None:
    print(f"\033[1m[robot-py310]\033[0m {text}", flush=True)


def digest(*parts: str | Path) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.read_bytes() if isinstance(part, Path) else part.encode())
    return h.hexdigest()[:16]


# --- the interpreter and its venv ---------------------------------------------------------------
def find_python310(explicit: str | None) -> tuple[str | None, list[str]]:
    """The first CPython 3.10 among the candidates, and every candidate tried."""
    pyenv_roots = {os.environ.get("PYENV_ROOT", ""), str(Path.home() / ".pyenv"), "/root/.pyenv"}
    pyenv = sorted((p for r in pyenv_roots if r for p in glob.glob(f"{r}/versions/3.10.*/bin/python3.10")),
                   key=lambda p: [int(x) for x in re.findall(r"\d+", Path(p).parents[1].name)], reverse=True)
    asked = explicit or os.environ.get("ASAP_PYTHON310")
    candidates = [asked] if asked else [*pyenv, *filter(None, [shutil.which("python3.10")])]
    check = "import sys; print(sys.implementation.name, *sys.version_info[:2])"
    for cand in candidates:
        try:
            out = subprocess.run([cand, "-c", check], capture_output=True, text=True, timeout=30).stdout
        except OSError:
            continue
        if out.split() == ["cpython", "3", "10"]:
            return cand, candidates
    if asked:
        sys.exit(f"[robot-py310] {asked} is not a CPython 3.10 (--python / $ASAP_PYTHON310)")
    return None, candidates


def tool_pins() -> list[str]:
    """``name==version`` of TEST_TOOLS, read from constraints.txt (the project's one pin file)."""
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", (ROOT / "constraints.txt").read_text(), re.M))
    pins = {k.lower(): v for k, v in pins.items()}
    return [f"{name}=={pins[name]}" for name in TEST_TOOLS]


def ensure_venv(python: str, force: bool) -> Path:
    """.venv-robot with the robot pins; rebuilt when the pins, the interpreter or this script change."""
    version = subprocess.run([python, "-c", "import sys; print(sys.version)"], capture_output=True,
                             text=True, check=True).stdout.strip()
    want = digest(PINS, Path(__file__), " ".join(tool_pins()), version)
    stamp = VENV / ".asap-deps"
    vpy = VENV / "bin" / "python"
    if not force and vpy.exists() and stamp.exists() and stamp.read_text() == want:
        return vpy
    say(f"building {VENV.name}/ with {PINS.relative_to(ROOT)} on Python {version.split()[0]} (~40 s)")
    shutil.rmtree(VENV, ignore_errors=True)
    subprocess.run([python, "-m", "venv", str(VENV)], check=True)
    pip = subprocess.run([str(vpy), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                          "-r", str(PINS), *tool_pins()], capture_output=True, text=True)
    if pip.returncode:
        sys.exit(f"[robot-py310] pip could not install the robot pins on Python 3.10:\n{pip.stderr}")
    stamp.write_text(want)
    return vpy


def venv_env(vpy: Path) -> dict[str, str]:
    """The environment of a .venv-robot process: nothing of the 3.11 venv on its paths."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "LD_LIBRARY_PATH")}
    env["PATH"] = f"{vpy.parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join([*(str(SRC / p) for p in ROBOT_PACKAGES), str(ROOT / "tests")])
    # message definitions (.msg + type hashes) for the logger: the workspace's, as /opt/ros/humble has them
    env.setdefault("AMENT_PREFIX_PATH", os.pathsep.join(
        [*map(str, sorted((ROOT / "ros2_ws" / "install").glob("*/"))), str(ROOT / ".venv")]))
    return env


# --- what runs there ----------------------------------------------------------------------------
def _imports(path: Path, deferred: bool = False) -> set[str]:
    """Dotted names a file imports when it is imported, and with ``deferred`` inside its functions too."""
    names: set[str] = set()
    todo = list(ast.parse(path.read_text()).body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
        elif deferred or not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            todo += list(ast.iter_child_nodes(node))
    return names


class Imports:
    """Which files can be imported in .venv-robot, by their imports, transitively: module-level ones, or
    with ``deferred`` those inside functions too (what calling the code may import)."""

    def __init__(self, available: set[str], search: list[Path], deferred: bool = False) -> None:
        self.available, self.search, self.deferred = available, search, deferred
        self._missing: dict[Path, set[str]] = {}

    def file_of(self, dotted: str, extra: Path | None = None) -> Path | None:
        rel = Path(*dotted.split("."))
        for base in ([extra] if extra else []) + self.search:
            for cand in (base / rel / "__init__.py", base.joinpath(rel).with_suffix(".py")):
                if cand.is_file():
                    return cand
        return None

    def missing(self, path: Path) -> set[str]:
        """Top-level modules that ``path`` (or a repository module it imports) needs and cannot have."""
        if path not in self._missing:
            self._missing[path] = set()  # import cycles end here
            out: set[str] = set()
            for dotted in _imports(path, self.deferred):
                local = self.file_of(dotted, path.parent)
                if local is not None and local != path:
                    out |= self.missing(local)
                elif local is None and "." in dotted and self.file_of(dotted.rpartition(".")[0], path.parent):
                    continue  # ``from pkg.module import name``: a name of a repository module
                elif local is None and dotted.split(".")[0] not in self.available:
                    out.add(dotted.split(".")[0])
            self._missing[path] = out
        return self._missing[path]


def robot_modules() -> list[tuple[str, Path]]:
    out = []
    for pkg in ROBOT_PACKAGES:
        for path in sorted((SRC / pkg / pkg).rglob("*.py")):
            parts = path.relative_to(SRC / pkg).with_suffix("").parts
            out.append((".".join(parts[:-1] if parts[-1] == "__init__" else parts), path))
    return out


def robot_test_files() -> list[Path]:
    return [p for pkg in ROBOT_PACKAGES for p in sorted((SRC / pkg / "test").glob("test_*.py"))] \
        + [p for folder in ROBOT_TESTS for p in sorted(folder.glob("test_*.py"))]


def available_modules(vpy: Path, env: dict[str, str]) -> set[str]:
    # packages_distributions also names namespace packages (rosbags), which iter_modules does not
    code = ("import json, pkgutil, sys, importlib.metadata as md; print(json.dumps(sorted("
            "{m.name for m in pkgutil.iter_modules()} | set(md.packages_distributions()) "
            "| set(sys.builtin_module_names))))")
    return set(json.loads(subprocess.run([str(vpy), "-c", code], env=env, capture_output=True, text=True,
                                         check=True).stdout))


def _search() -> list[Path]:
    return [SRC / p for p in (*ROBOT_PACKAGES, *OPTIONAL_SOURCES)] + [ROOT / "tests"]


def deferred_strays(available: set[str], allowed: set[str]) -> dict[str, set[str]]:
    """Robot-side modules whose imports, inside functions included, need what the image lacks beyond
    ``allowed`` (ROS, ``NOT_IN_ROBOT_IMAGE``), with what."""
    imports = Imports(available - ROS, _search(), deferred=True)
    out = {name: imports.missing(path) - allowed for name, path in robot_modules()}
    return {name: need for name, need in out.items() if need}


def classify(vpy: Path, env: dict[str, str]) -> tuple[list[str], dict[str, set[str]], list[Path], dict]:
    """(modules to import, modules left out with what they need, test files, tests left out)."""
    imports = Imports(available_modules(vpy, env) - ROS, _search())
    modules, left_out = [], {}
    for name, path in robot_modules():
        need = imports.missing(path)
        (left_out.__setitem__(name, need) if need else modules.append(name))
    tests, tests_out = [], {}
    for path in robot_test_files():
        need = imports.missing(path)
        (tests_out.__setitem__(path, need) if need else tests.append(path))
    return modules, left_out, tests, tests_out


def import_all(vpy: Path, env: dict[str, str], modules: list[str]) -> dict[str, str]:
    """Import ``modules`` in one .venv-robot process with ROS blocked; {module: error} of the failures."""
    code = (
        "import importlib, json, sys, traceback\n"
        f"for m in {sorted(ROS)!r}: sys.modules[m] = None\n"
        "failed = {}\n"
        f"for name in {modules!r}:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except BaseException as e:\n"
        "        failed[name] = ''.join(traceback.format_exception(type(e), e, e.__traceback__)[-3:])\n"
        "print(json.dumps(failed))\n"
    )
    run = subprocess.run([str(vpy), "-c", code], env=env, capture_output=True, text=True)
    if run.returncode:
        return {"<import check>": run.stderr}
    return json.loads(run.stdout.strip().splitlines()[-1])


# --- wheels for the robot's platforms -----------------------------------------------------------
def resolve_wheels(arch: str) -> tuple[str, str]:
    """("ok" | "offline" | "missing", detail) of resolving the pins for CPython 3.10 on ``arch``."""
    platforms = [f"manylinux2014_{arch}"] + [f"manylinux_2_{v}_{arch}" for v in range(17, GLIBC_MAX + 1)]
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
               "--disable-pip-version-check", "--target", str(Path(tmp) / "t"), "--only-binary=:all:",
               "--python-version", "3.10", "--implementation", "cp", "--timeout", "30", "--retries", "1",
               *(a for p in platforms for a in ("--platform", p)), "--report", str(report), "-r", str(PINS)]
        run = subprocess.run(cmd, capture_output=True, text=True)
        text = run.stdout + run.stderr
        if run.returncode:
            if _OFFLINE.search(text):
                return "offline", "PyPI is unreachable"
            lines = [ln for ln in text.splitlines() if ln.startswith("ERROR")]
            return "missing", "\n".join(lines) or text[-2000:]
        installs = json.loads(report.read_text())["install"]
        wheels = [item["download_info"]["url"].rsplit("/", 1)[-1] for item in installs]
    bad = [w for w in wheels if not w.endswith(".whl")]
    if bad:
        return "missing", f"not wheels: {bad}"
    native = [w.split("-")[0] + " " + w.split("-")[1] for w in wheels if arch in w]
    return "ok", f"{len(wheels)} wheels, built for {arch}: {', '.join(native)}"


def check_wheels(force: bool) -> bool:
    stamp = VENV / ".asap-wheels"
    want = digest(PINS, Path(__file__))
    if not force and stamp.exists() and stamp.read_text() == want:
        say(f"wheels: every pin has CPython 3.10 wheels for manylinux {' and '.join(ARCHES)} "
            "(checked before for these pins)")
        return True
    with ThreadPoolExecutor(len(ARCHES)) as pool:
        results = dict(zip(ARCHES, pool.map(resolve_wheels, ARCHES), strict=True))
    ok = True
    for arch, (status, detail) in results.items():
        if status == "ok":
            say(f"wheels: cp310 manylinux {arch} (glibc <= 2.{GLIBC_MAX}): {detail}")
        elif status == "offline":
            say(f"wheels: SKIPPED for {arch}: {detail}; the check needs the package index (CI has it)")
        else:
            ok = False
            say(f"wheels: FAILED for {arch}: a pin (or a dependency) has no CPython 3.10 wheel:\n{detail}\n"
                f"  fix: pick a version with a cp310 manylinux {arch} wheel in {PINS.relative_to(ROOT)}")
    if all(status == "ok" for status, _ in results.values()):
        VENV.mkdir(exist_ok=True)
        stamp.write_text(want)
    return ok


# --- main ---------------------------------------------------------------------------------------
def run_py310(vpy: Path, pytest_args: list[str]) -> bool:
    env = venv_env(vpy)
    code = ("import sys, numpy, onnx, onnxruntime; print(sys.version.split()[0], numpy.__version__, "
            "onnx.__version__, onnxruntime.__version__)")
    versions = subprocess.run([str(vpy), "-c", code], env=env, capture_output=True, text=True,
                              check=True).stdout.split()
    say(f"Python {versions[0]}, numpy {versions[1]}, onnx {versions[2]}, onnxruntime {versions[3]}")
    modules, left_out, tests, tests_out = classify(vpy, env)
    allowed = ROS | set(NOT_IN_ROBOT_IMAGE)
    strays = {m: need - allowed for m, need in left_out.items() if need - allowed}
    for module, need in strays.items():
        say(f"FAILED: {module} imports {sorted(need)}, which the robot image does not install: add it to "
            f"{PINS.relative_to(ROOT)} or keep it out of robot-side code")
    deferred = deferred_strays(available_modules(vpy, env), allowed)
    for module, need in deferred.items():
        say(f"FAILED: {module} imports {sorted(need)} inside a function, which the robot image does not "
            f"install: robot-side code may defer only {sorted(NOT_IN_ROBOT_IMAGE)} (via {OPTIONAL_SOURCES})")
    strays |= deferred
    failed = import_all(vpy, env, modules)
    for module, error in failed.items():
        say(f"FAILED: import {module} on Python 3.10:\n{error}")
    say(f"imported {len(modules) - len(failed)}/{len(modules)} ROS-free robot modules; not imported (they "
        "need " + "; ".join(f"{m}: {', '.join(sorted(n))}" for m, n in sorted(left_out.items())) + ")")
    say("tests needing what the robot venv lacks: "
        + "; ".join(f"{p.relative_to(ROOT)} ({', '.join(sorted(n))})" for p, n in tests_out.items()))
    rel = [str(p.relative_to(ROOT)) for p in tests]
    result = subprocess.run([str(vpy), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m",
                             "not graph and not node", *pytest_args, *rel], cwd=ROOT, env=env)
    return not strays and not failed and result.returncode == 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", help="a CPython 3.10 (default: $ASAP_PYTHON310, pyenv's, python3.10)")
    ap.add_argument("--force", action="store_true", help="rebuild .venv-robot and redo the wheel check")
    ap.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --), e.g. -- -k reader")
    args = ap.parse_args(argv)
    python, tried = find_python310(args.python)
    if python is None:
        tried_text = ", ".join(tried) or "pyenv, python3.10 on PATH"
        say(f"SKIPPED the Python 3.10 run: no CPython 3.10 found (tried {tried_text}); install one "
            "(pyenv install 3.10) or pass --python")
        ok = True
    else:
        ok = run_py310(ensure_venv(python, args.force), args.pytest_args)
    ok = check_wheels(args.force) and ok  # after the venv: a rebuild starts from an empty .venv-robot/
    say(("passed" + ("" if python else " (without the Python 3.10 run)")) if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
