"""Every command in the README's shell blocks is exercised: by running it, by a test, or by a named reason.

The README is read at test time, so a command added to it later is checked too. For each command in a
fenced ``bash``/``sh``/``shell``/``console`` block:

- a project console script or ``python -m`` module: ``--help`` must succeed (ROS nodes, which have no
  ``--help``, must instead be spawned by the test named in :data:`ROS_NODES`);
- ``python -c ...``: runs as written;
- ``make <target>``: the target exists in the Makefile;
- ``source <file>``: the file exists;
- anything else (ROS 2 CLI, Docker, network setup on the robot's PC): its first word must be in
  :data:`ALLOWED` with the reason it cannot run here.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
FENCE = re.compile(r"^```(?:bash|sh|shell|console)[ \t]*\n(.*?)^```", re.M | re.S)
OPERATORS = {"&&", "||", ";", "|"}

ALLOWED = {
    "ros2": "ROS 2 CLI (launch/run/topic/service/pkg) is not in the PyPI wheels; the robot and its image "
    "have it; test_launch_files.py checks the launch files against the runner",
    "rviz2": "RViz is not on PyPI; the config's topics are checked by test_sim2sim_graph.py",
    "docker": "no Docker engine here or in CI; test_docker.py checks the Dockerfiles and the compose file",
    "sudo": "system setup of the robot's PC (apt packages, network addresses)",
    "ip": "network setup of the robot's PC",
    "ping": "needs the robot on the network",
    "colcon": "the full-ROS build on the robot's PC; here `make setup` runs colcon (every CI run)",
    "export": "environment for the robot's PC (CycloneDDS); checked by test_docker.py for the image",
    "cd": "changes directory only",
}
"""First words of commands that cannot run here, and why."""

ROS_NODES = {
    "asap_policy.policy_node": ("policy_node", "ros2_ws/src/asap_policy/test/test_policy_node_faults.py"),
    "asap_sim.g1_sim_node": ("g1_sim", "ros2_ws/src/asap_sim/test/test_node.py"),
    "asap_logger.recorder_node": ("recorder", "ros2_ws/src/asap_logger/test/graph/test_twin_graph.py"),
    "asap_bringup.monitor_node": ("monitor", "ros2_ws/src/asap_bringup/test/test_sim2sim_graph.py"),
}
"""ROS node modules (no ``--help``: they would start spinning) -> (console script, the test spawning them)."""


def readme_commands(text: str) -> list[tuple[str, list[str]]]:
    """(working folder relative to the repository, tokens) of every simple command of the README's shell
    blocks; comments, prompts and leading ``VAR=value`` dropped; ``cd`` moves the folder for its block."""
    commands = []
    for block in FENCE.findall(text):
        cwd = "."
        for line in block.replace("\\\n", " ").splitlines():
            lexer = shlex.shlex(line.strip().removeprefix("$ "), posix=True, punctuation_chars=True)
            lexer.whitespace_split, lexer.commenters = True, "#"
            current: list[str] = []
            for token in [*lexer, ";"]:
                if token not in OPERATORS:
                    current.append(token)
                    continue
                while current and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", current[0]):
                    current.pop(0)  # FOO=bar cmd
                if current:
                    commands.append((cwd, current))
                    if current[0] == "cd" and len(current) == 2:
                        cwd = os.path.normpath(os.path.join(cwd, current[1]))
                current = []
    return commands


def _console_script(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for candidate in sorted((REPO / "ros2_ws" / "install").glob(f"*/lib/*/{name}")):
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def _makefile_targets() -> set[str]:
    return set(re.findall(r"^([A-Za-z0-9_.-]+):", (REPO / "Makefile").read_text(), re.M))


def _check(command: list[str], cwd: str = ".") -> tuple[list[str] | None, str]:
    """(argv to run or None, why): raises AssertionError when the command is not covered."""
    word = command[0]
    if word in ("python", "python3"):
        if command[1:2] == ["-c"]:
            return [sys.executable, *command[1:]], "runs as written"
        assert command[1:2] == ["-m"], f"python without -m/-c: {shlex.join(command)}"
        module = command[2]
        if module in ROS_NODES:
            return None, _ros_node(module)
        return [sys.executable, "-m", module, "--help"], "--help"
    if word == "make":
        targets = [t for t in command[1:] if not t.startswith("-") and "=" not in t]
        missing = set(targets or ["help"]) - _makefile_targets()
        assert not missing, f"make targets not in the Makefile: {sorted(missing)}"
        return None, "make target exists"
    if word in ("source", "."):
        if command[1].startswith("/opt/ros/"):
            return None, "the ROS 2 installation of the robot's PC"
        assert (REPO / cwd / command[1]).is_file(), f"{cwd}/{command[1]} does not exist"
        return None, "file exists"
    if word in ALLOWED:
        return None, ALLOWED[word]
    node = next((m for m, (script, _) in ROS_NODES.items() if script == word), None)
    if node:
        return None, _ros_node(node)
    script = _console_script(word)
    assert script, (
        f"README command {shlex.join(command)!r}: {word!r} is no console script of the project, "
        "make target or allow-listed tool; add a test or an ALLOWED entry with the reason"
    )
    return [script, "--help"], "--help"


def _ros_node(module: str) -> str:
    script, test = ROS_NODES[module]
    text = (REPO / test).read_text()
    assert module in text or script in text, f"{test} does not spawn {module}"
    return f"ROS node, spawned by {test}"


COMMANDS = readme_commands(README.read_text())


def test_the_readme_has_shell_blocks_with_project_commands() -> None:
    words = {c[0] for _, c in COMMANDS}
    assert {"make", "python"} <= words and len(COMMANDS) > 10


@pytest.mark.parametrize(("cwd", "command"), COMMANDS, ids=[shlex.join(c)[:60] for _, c in COMMANDS])
def test_readme_command_is_exercised(cwd: str, command: list[str]) -> None:
    argv, _ = _check(command, cwd)
    if argv is None:
        return
    code, out = _run(tuple(argv))
    assert code == 0, f"{shlex.join(argv)} failed:\n{out}"
    if argv[-1] == "--help":
        assert "usage" in out.lower(), f"{shlex.join(argv)} printed no usage"


@functools.cache
def _run(argv: tuple[str, ...]) -> tuple[int, str]:
    """Run once per distinct command line (the README repeats modules with other arguments)."""
    done = subprocess.run(argv, capture_output=True, text=True, timeout=180, cwd=REPO)
    out = done.stdout + done.stderr
    # keep the head (argparse prints the usage first) and the tail (where errors end up)
    return done.returncode, out if len(out) <= 8000 else out[:4000] + "\n...\n" + out[-4000:]


def project_console_scripts() -> set[str]:
    """Console scripts of the ROS packages (setup.py) and of asap_training (pyproject.toml)."""
    names = set()
    for setup in (REPO / "ros2_ws" / "src").glob("*/setup.py"):
        names |= set(re.findall(r"[\"']([A-Za-z0-9_-]+) = [a-z_.]+:main", setup.read_text()))
        names |= set(re.findall(r"f?[\"']([A-Za-z0-9_-]+) = \{PACKAGE\}", setup.read_text()))
    pyproject = (REPO / "training" / "pyproject.toml").read_text()
    scripts = pyproject.split("[project.scripts]", 1)[1].split("\n[", 1)[0]
    return names | set(re.findall(r"^([A-Za-z0-9_-]+) =", scripts, re.M))


def test_the_cli_reference_lists_every_console_script() -> None:
    text = README.read_text()
    reference = text.split("## CLI reference", 1)[1].split("\n## ", 1)[0]
    scripts = project_console_scripts()
    assert {"asap-up", "asap-bag", "asap-train", "policy_node", "g1_sim"} <= scripts
    missing = sorted(s for s in scripts if f"`{s}`" not in reference)
    assert not missing, f"console scripts missing from README 'CLI reference': {missing}"


def test_the_parser_splits_chains_and_drops_comments_and_assignments() -> None:
    text = (
        "```bash\n$ FOO=1 make help && cd x; asap-train \\\n  --help  # comment\n```\n    python -m ignored\n"
    )
    assert readme_commands(text) == [
        (".", ["make", "help"]),
        (".", ["cd", "x"]),
        ("x", ["asap-train", "--help"]),
    ]


def test_an_unknown_command_is_refused_with_advice() -> None:
    with pytest.raises(AssertionError, match="add a test or an ALLOWED entry"):
        _check(["frobnicate", "--now"])
    with pytest.raises(AssertionError, match="not in the Makefile"):
        _check(["make", "no-such-target"])
