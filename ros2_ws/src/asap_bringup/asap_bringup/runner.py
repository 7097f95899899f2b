"""asap-up: bring up a profile's nodes where ``ros2 launch`` is not available.

Each node runs in its own process (found like ``ros2 run`` does: ``<prefix>/lib/<package>/<exe>``
on AMENT_PREFIX_PATH) with the profile's parameter files and overrides, and with asap's Fast DDS
profile loaded unless the environment names another (:mod:`asap_bringup.dds`). Ctrl-C (or SIGTERM) stops
every node, escalating to SIGKILL after ``--stop-timeout`` seconds; when a node dies on its own the
runner stops the rest and exits non-zero, naming the node.

    asap-up sim2sim policy:=/path/policy.onnx dynamics_profile:=weak_ankles
    asap-up --list
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from asap_bringup.dds import dds_environment
from asap_bringup.profile import (
    CONFIG_DIR,
    Profile,
    ProfileError,
    available_profiles,
    launch_entries,
    load_profile,
)
from asap_core.config_options import ConfigParser


class RunnerError(RuntimeError):
    """The graph could not be started."""


@dataclass(frozen=True, kw_only=True)
class RunnerCfg:
    """How the runner stops the graph."""

    stop_timeout_s: float = 5.0
    """Seconds every node gets to exit after SIGINT before it is killed (SIGKILL)."""


def find_executable(package: str, executable: str) -> Path:
    """``<prefix>/lib/<package>/<executable>`` on AMENT_PREFIX_PATH, as ``ros2 run`` resolves it."""
    prefixes = [p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    for prefix in prefixes:
        candidate = Path(prefix) / "lib" / package / executable
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise RunnerError(f"executable {executable!r} of package {package!r} not found on AMENT_PREFIX_PATH; "
                      "build the workspace (make setup) and `source scripts/env.sh`")


def _executable(entry: dict[str, Any]) -> Path:
    """:func:`find_executable` of an entry; a missing optional node's error says how to skip it."""
    try:
        return find_executable(entry["package"], entry["executable"])
    except RunnerError as e:
        skip = entry["condition_argument"]
        if skip:
            raise RunnerError(f"{e}; or skip node {entry['name']!r} with {skip}:=false") from None
        raise


def parse_arguments(profile: Profile, assignments: list[str]) -> dict[str, Any]:
    """Profile arguments with ``name:=value`` command-line assignments applied (YAML-typed)."""
    values = dict(profile.arguments)
    for item in assignments:
        name, sep, raw = item.partition(":=")
        if not sep:
            raise RunnerError(f"expected name:=value, got {item!r}")
        if name not in values:
            raise RunnerError(f"profile {profile.name!r} has no argument {name!r}; "
                              f"arguments: {sorted(values)}")
        values[name] = yaml.safe_load(raw) if raw else ""
    return values


def node_command(entry: dict[str, Any], executable: Path | str) -> list[str]:
    """The command line that runs one :func:`launch_entries` entry, as ``ros2 launch`` would."""
    cmd = [str(executable), "--ros-args", "-r", f"__node:={entry['name']}", *entry["ros_arguments"]]
    for item in entry["parameters"]:
        if isinstance(item, str):
            cmd += ["--params-file", item]
        else:
            for key, value in item.items():
                text = yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()
                cmd += ["-p", f"{key}:={text}"]
    return cmd


def enabled_entries(profile: Profile, args: dict[str, Any]) -> list[dict[str, Any]]:
    """Launch entries whose ``if`` argument (when present) is true."""
    return [e for e in launch_entries(profile, args.__getitem__)
            if e["condition_argument"] is None or bool(args[e["condition_argument"]])]


@dataclass
class _Running:
    name: str
    proc: subprocess.Popen


def _pump(name: str, stream) -> None:
    for line in iter(stream.readline, ""):
        sys.stdout.write(f"[{name}] {line}")
        sys.stdout.flush()


class Supervisor:
    """Starts the nodes, watches them, and stops them all together."""

    def __init__(self, stop_timeout_s: float, env: dict[str, str] | None = None) -> None:
        self.stop_timeout_s = stop_timeout_s
        self.env = env
        self.running: list[_Running] = []
        self._stop = threading.Event()

    def start(self, name: str, cmd: list[str]) -> None:
        """Start one node in its own process group (so signals are ours to send), bound to our life."""
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=self.env, start_new_session=True, preexec_fn=_terminate_with_parent)
        threading.Thread(target=_pump, args=(name, proc.stdout), daemon=True).start()
        self.running.append(_Running(name, proc))

    def request_stop(self, *_: Any) -> None:
        """Signal handler: stop the graph."""
        self._stop.set()

    def wait(self) -> int:
        """Block until Ctrl-C/SIGTERM (exit 0) or a node dies (exit 1, naming it)."""
        while not self._stop.is_set():
            for r in self.running:
                code = r.proc.poll()
                if code is not None:
                    print(f"[asap-up] node {r.name!r} exited with code {code}; stopping the graph",
                          file=sys.stderr)
                    self.stop_all()
                    return 1
            self._stop.wait(0.1)
        self.stop_all()
        return 0

    def stop_all(self) -> None:
        """SIGINT every node, then SIGKILL whatever is left after the timeout."""
        alive = [r for r in self.running if r.proc.poll() is None]
        for r in alive:
            _signal_group(r.proc, signal.SIGINT)
        deadline = time.monotonic() + self.stop_timeout_s
        for r in alive:
            try:
                r.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                print(f"[asap-up] node {r.name!r} ignored SIGINT; killing it", file=sys.stderr)
                _signal_group(r.proc, signal.SIGKILL)
                r.proc.wait()


def _terminate_with_parent() -> None:
    """In the child, before exec: SIGTERM when the runner dies, even by SIGKILL (Linux
    ``PR_SET_PDEATHSIG``), so no node outlives its runner holding the robot or the CPU."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


PR_SET_PDEATHSIG = 1


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


def parser() -> ConfigParser:
    """The options of ``asap-up``."""
    ap = ConfigParser("asap-up", __doc__)
    ap.add_argument("profile", nargs="?", help="profile name (see --list)")
    ap.add_argument("assignments", nargs="*", metavar="name:=value", help="profile arguments")
    ap.add_argument("--list", action="store_true", help="list profiles and their arguments")
    ap.add_argument("--dry-run", action="store_true", help="print the node commands, start nothing")
    ap.field(RunnerCfg, "stop_timeout_s", "--stop-timeout")
    ap.add_argument("--config-dir", type=Path, default=CONFIG_DIR,
                    help="folder holding profiles/ and params/ (default: the installed asap_bringup config)")
    return ap


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``asap-up``."""
    ap = parser()
    ns = ap.parse_args(argv)
    try:
        if ns.list or not ns.profile:
            for name in available_profiles(ns.config_dir):
                p = load_profile(name, ns.config_dir)
                print(f"{name}: {p.description}\n  arguments: {dict(p.arguments)}\n"
                      f"  nodes: {[n.name for n in p.nodes]}")
            return 0
        profile = load_profile(ns.profile, ns.config_dir)
        args = parse_arguments(profile, ns.assignments)
        commands = [(e["name"], node_command(e, _executable(e))) for e in enabled_entries(profile, args)]
    except (ProfileError, RunnerError) as e:
        print(f"asap-up: {e}", file=sys.stderr)
        return 2
    dds = dds_environment(os.environ)
    if ns.dry_run:
        for _, cmd in commands:
            print(" ".join([*(f"{k}={v}" for k, v in dds.items()), *cmd]))
        return 0
    sup = Supervisor(ap.config(ns, RunnerCfg).stop_timeout_s, {**os.environ, **dds})
    signal.signal(signal.SIGINT, sup.request_stop)
    signal.signal(signal.SIGTERM, sup.request_stop)
    for name, cmd in commands:
        sup.start(name, cmd)
    print(f"[asap-up] {profile.name}: started {[n for n, _ in commands]}; Ctrl-C stops all", flush=True)
    return sup.wait()


if __name__ == "__main__":
    raise SystemExit(main())
