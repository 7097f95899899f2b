"""Import layers: the layer check can fail; no cycles; training imports no ROS; deferred imports say why.

`make test` runs the layer checker itself (`lint-imports`, contracts in pyproject.toml [tool.importlinter]).
These tests prove that it fails on a wrong import, top-level or inside a function, and check what its
contracts cannot say: cycles between modules (imports inside functions included), that every asap_training
module imports without ROS, and that each import inside a function says why it is there.
"""

from __future__ import annotations

import ast
import io
import shutil
import subprocess
import sys
import tokenize
import tomllib
from collections.abc import Iterator
from pathlib import Path

import grimp
import pytest

from asap_testing.ros_free import run_with_ros_blocked

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"
LAYERS = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]
PACKAGES: list[str] = LAYERS["root_packages"]

KNOWN_CYCLES: dict[tuple[str, ...], str] = {}
"""Cycles being removed elsewhere in issue 20, with why each exists. Delete each once it is gone."""

KNOWN_UNEXPLAINED: dict[str, str] = {}
"""Files whose imports inside functions are being removed elsewhere in issue 20. Delete each once clean."""


def package_dir(package: str) -> Path:
    """The source folder of one of our root packages (ros2_ws/src/<pkg>/<pkg> or training/src/<pkg>)."""
    for candidate in (ROOT / "ros2_ws" / "src" / package / package, ROOT / "training" / "src" / package):
        if (candidate / "__init__.py").is_file():
            return candidate
    raise FileNotFoundError(f"no source folder for {package}")


def our_modules() -> Iterator[Path]:
    """Every module of our packages and the launch files (not tests or benchmarks)."""
    for package in PACKAGES:
        yield from sorted(package_dir(package).rglob("*.py"))
    yield from sorted(ROOT.glob("ros2_ws/src/*/launch/*.py"))


# --- the layer checker can fail --------------------------------------------------------------------------
def lint_imports(src: Path, contract: str) -> subprocess.CompletedProcess[str]:
    """`lint-imports` (as `make test` runs it) on the packages under ``src``, for one contract."""
    return subprocess.run(
        [str(Path(sys.executable).with_name("lint-imports")), str(PYPROJECT), "--contract", contract,
         "--no-cache", "--no-logo"],
        capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(src)}, check=False,
    )


@pytest.mark.parametrize(
    ("contract", "package", "source", "arrow"),
    [
        ("robot-layers", "asap_core", "import asap_policy\n", "asap_policy"),
        ("robot-layers", "asap_sim", "def f():\n    from asap_bringup import dds\n", "asap_bringup.dds"),
        ("ros-free", "asap_training", "def f():\n    import rclpy\n", "rclpy"),
        ("robot-without-training", "asap_policy", "import asap_training.eval.metrics\n",
         "asap_training.eval.metrics"),
    ],
    ids=["core-up-a-layer", "deferred-sim-to-bringup", "deferred-rclpy-in-training", "robot-to-training"],
)
def test_the_layer_check_fails_on_a_wrong_import(
    tmp_path: Path, contract: str, package: str, source: str, arrow: str
) -> None:
    for name in PACKAGES:
        shutil.copytree(package_dir(name), tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    scratch = f"{package}._scratch_layers"
    before = lint_imports(tmp_path, contract)
    assert before.returncode in (0, 1), before.stdout + before.stderr  # 1: broken, >1: could not run
    (tmp_path / package / "_scratch_layers.py").write_text(source)
    after = lint_imports(tmp_path, contract)
    assert after.returncode == 1, after.stdout + after.stderr
    assert f"{scratch} -> {arrow}" in after.stdout and "BROKEN" in after.stdout, after.stdout
    assert scratch not in before.stdout


# --- no import cycles, deferred imports included ---------------------------------------------------------
def import_cycles(graph: grimp.ImportGraph) -> set[tuple[str, ...]]:
    """The modules of each import cycle (a strongly connected component of two or more), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: set[tuple[str, ...]] = set()

    def visit(module: str) -> None:  # Tarjan's algorithm
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = stack[stack.index(module):]
            del stack[stack.index(module):]
            if len(component) > 1:
                cycles.add(tuple(sorted(component)))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return cycles


def build_graph(*packages: str) -> grimp.ImportGraph:
    """The import graph as the layer checker builds it (imports inside functions included)."""
    return grimp.build_graph(*packages, cache_dir=None,
                             exclude_type_checking_imports=LAYERS["exclude_type_checking_imports"])


def test_no_import_cycles() -> None:
    cycles = import_cycles(build_graph(*PACKAGES))
    assert cycles - set(KNOWN_CYCLES) == set(), "import cycles (including imports inside functions)"
    assert set(KNOWN_CYCLES) - cycles == set(), "these cycles are gone: delete them from KNOWN_CYCLES"


def test_the_cycle_check_sees_imports_inside_functions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pkg = tmp_path / "scratch_cycle"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from scratch_cycle import b\n")
    (pkg / "b.py").write_text("def later():\n    from scratch_cycle import a\n")
    (pkg / "c.py").write_text("from scratch_cycle import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert import_cycles(build_graph("scratch_cycle")) == {("scratch_cycle.a", "scratch_cycle.b")}


# --- training imports no ROS ---------------------------------------------------------------------------
def test_every_training_module_imports_without_ros() -> None:
    src = package_dir("asap_training").parent
    modules = [".".join(p.relative_to(src).with_suffix("").parts).removesuffix(".__init__")
               for p in sorted(package_dir("asap_training").rglob("*.py"))]
    assert len(modules) > 40 and "asap_training.rl.train" in modules
    try:
        run_with_ros_blocked(modules)
    except subprocess.CalledProcessError as err:
        pytest.fail(f"an asap_training module imports ROS at import time:\n{err.stderr}")


# --- imports inside functions say why ------------------------------------------------------------------
def unexplained_function_imports(source: str) -> list[int]:
    """First lines of the runs of consecutive import statements inside functions that have no comment on
    their lines or on the line above (a comment line, or the header of the block they open)."""
    tree = ast.parse(source)
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    commented = {t.start[0] for t in tokens if t.type == tokenize.COMMENT}
    layout = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
    code_lines = {t.start[0] for t in tokens if t.type not in layout}
    unexplained: set[int] = set()
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(function):
            for field in ("body", "orelse", "finalbody"):
                block = getattr(node, field, None)
                if isinstance(block, list):
                    unexplained |= _unexplained_in_block(block, commented, code_lines)
    return sorted(unexplained)


def _unexplained_in_block(block: list[ast.stmt], commented: set[int], code_lines: set[int]) -> set[int]:
    out: set[int] = set()
    for i, stmt in enumerate(block):
        if not isinstance(stmt, ast.Import | ast.ImportFrom):
            continue
        if i > 0 and isinstance(block[i - 1], ast.Import | ast.ImportFrom):
            continue  # a run of imports shares the comment of its first
        above = stmt.lineno - 1
        own = set(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
        comment_line_above = above in commented and above not in code_lines
        block_header_above = i == 0 and above in commented
        if not (own & commented or comment_line_above or block_header_above):
            out.add(stmt.lineno)
    return out


def test_the_function_import_check_wants_a_comment() -> None:
    source = (
        "def a():\n    import x\n"                                   # 2: no reason
        "def b():\n    # optional: y is heavy\n    import y\n    import z\n"  # a run under one comment
        "def c():\n    try:  # t is optional\n        import t\n    except ImportError:\n        pass\n"
        "def d():\n    v = 1  # unrelated\n    import w\n"             # 14: a code line's comment is not one
        "def e():\n    import u  # only to plot\n"
    )
    assert unexplained_function_imports(source) == [2, 14]


def test_imports_inside_functions_say_why() -> None:
    found = {str(p.relative_to(ROOT)): lines for p in our_modules()
             if (lines := unexplained_function_imports(p.read_text()))}
    unknown = {f: lines for f, lines in found.items() if f not in KNOWN_UNEXPLAINED}
    assert unknown == {}, "imports inside functions without a comment saying why (heavy or optional?)"
    stale = sorted(set(KNOWN_UNEXPLAINED) - set(found))
    assert stale == [], "these files are clean now: delete them from KNOWN_UNEXPLAINED"
