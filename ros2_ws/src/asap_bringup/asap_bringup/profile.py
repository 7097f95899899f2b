"""Bringup profiles: which nodes run, with which parameter files and overrides (ROS-free).

One YAML file per profile (``config/profiles/<name>.yaml``) is read by BOTH the ROS launch files
(``launch/<name>.launch.py``) and the project's runner (``asap-up``), so the two cannot drift.
Values of the form ``$(arg)`` refer to the profile's ``arguments``; the launch file maps them to
``LaunchConfiguration`` substitutions, the runner to the values given on its command line. Values of the
form ``$(file path)`` are replaced, when the profile loads, by the text of ``path`` relative to the
package's share folder (e.g. ``robot_description: $(file urdf/g1.urdf)`` for robot_state_publisher).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


def default_config_dir() -> Path:
    """``share/asap_bringup/config`` of the installed package, else the source tree's ``config``."""
    for prefix in filter(None, os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep)):
        candidate = Path(prefix) / "share" / "asap_bringup" / "config"
        if (candidate / "profiles").is_dir():
            return candidate
    return Path(__file__).resolve().parent.parent / "config"


CONFIG_DIR = default_config_dir()
_ARG = re.compile(r"^\$\((\w+)\)$")
_FILE = re.compile(r"^\$\(file ([^)]+)\)$")


class ProfileError(ValueError):
    """A profile file that does not describe a runnable graph."""


@dataclass(frozen=True)
class NodeSpec:
    """One node of a profile."""

    name: str
    package: str
    executable: str
    parameter_files: tuple[Path, ...] = ()
    overrides: Mapping[str, Any] = field(default_factory=dict)
    """Parameter values set after the files; ``$(arg)`` strings refer to profile arguments."""
    condition: str | None = None
    """Name of a boolean profile argument that must be true for the node to start."""
    enclave: str | None = None
    """SROS2 security enclave (``--enclave``); used when ROS_SECURITY_ENABLE=true (see
    ``config/security/README.md``), ignored otherwise."""

    def resolved_overrides(self, resolve: Callable[[str], Any]) -> dict[str, Any]:
        """Overrides with every ``$(arg)`` replaced by ``resolve(arg)``."""
        out = {}
        for key, value in self.overrides.items():
            m = _ARG.match(value) if isinstance(value, str) else None
            out[key] = resolve(m.group(1)) if m else value
        return out


@dataclass(frozen=True)
class Profile:
    """A named set of nodes and the arguments that parameterize them."""

    name: str
    description: str
    arguments: Mapping[str, Any]
    nodes: tuple[NodeSpec, ...]


def profile_path(name: str, config_dir: Path = CONFIG_DIR) -> Path:
    """The YAML file of a named profile."""
    return config_dir / "profiles" / f"{name}.yaml"


def available_profiles(config_dir: Path = CONFIG_DIR) -> list[str]:
    """Names of the shipped profiles."""
    return sorted(p.stem for p in (config_dir / "profiles").glob("*.yaml"))


def load_profile(name: str, config_dir: Path = CONFIG_DIR) -> Profile:
    """Load and validate a profile; errors name the file and the offending entry."""
    path = profile_path(name, config_dir)
    if not path.is_file():
        raise ProfileError(f"no profile {name!r} ({path}); available: {available_profiles(config_dir)}")
    raw = yaml.safe_load(path.read_text()) or {}
    unknown = set(raw) - {"description", "arguments", "nodes"}
    if unknown:
        raise ProfileError(f"{path}: unknown keys {sorted(unknown)}; allowed: description, arguments, nodes")
    arguments = dict(raw.get("arguments") or {})
    entries = raw.get("nodes") or []
    nodes = tuple(_node(entry, i, path, arguments, config_dir) for i, entry in enumerate(entries))
    if not nodes:
        raise ProfileError(f"{path}: a profile needs at least one node")
    names = [n.name for n in nodes]
    if len(set(names)) != len(names):
        raise ProfileError(f"{path}: node names must be unique, got {names}")
    return Profile(name, str(raw.get("description", "")), arguments, nodes)


def _node(entry: dict, i: int, path: Path, arguments: Mapping[str, Any], config_dir: Path) -> NodeSpec:
    where = f"{path}: nodes[{i}]"
    missing = {"name", "package", "executable"} - set(entry)
    if missing:
        raise ProfileError(f"{where} lacks {sorted(missing)}")
    unknown = set(entry) - {"name", "package", "executable", "parameters", "overrides", "if", "enclave"}
    if unknown:
        raise ProfileError(f"{where} has unknown keys {sorted(unknown)}")
    files = tuple(config_dir / p for p in entry.get("parameters") or [])
    for f in files:
        if not f.is_file():
            raise ProfileError(f"{where}: parameter file {f} does not exist")
    overrides = dict(entry.get("overrides") or {})
    for key, value in overrides.items():
        f = _FILE.match(value) if isinstance(value, str) else None
        if f:
            source = config_dir.parent / f.group(1)
            if not source.is_file():
                raise ProfileError(f"{where}: override {key} reads {source}, which does not exist")
            overrides[key] = source.read_text()
            continue
        m = _ARG.match(value) if isinstance(value, str) else None
        if m and m.group(1) not in arguments:
            raise ProfileError(f"{where}: override {key} uses undeclared argument $({m.group(1)})")
    condition = entry.get("if")
    if condition is not None and condition not in arguments:
        raise ProfileError(f"{where}: 'if: {condition}' is not a declared argument")
    enclave = entry.get("enclave")
    if enclave is not None and not (isinstance(enclave, str) and enclave.startswith("/")):
        raise ProfileError(f"{where}: enclave must be an absolute enclave path like /asap/policy_node, "
                           f"got {enclave!r}")
    return NodeSpec(entry["name"], entry["package"], entry["executable"], files, overrides, condition,
                    enclave)


def launch_entries(profile: Profile, resolve: Callable[[str], Any]) -> list[dict[str, Any]]:
    """Keyword arguments of ``launch_ros.actions.Node`` for each node of the profile.

    Launch files pass ``resolve = LaunchConfiguration`` (typed through ``ParameterValue``); the
    runner passes the argument values. Both start exactly these nodes with these parameters.
    """
    return [
        {
            "package": n.package,
            "executable": n.executable,
            "name": n.name,
            "parameters": [str(f) for f in n.parameter_files] + [n.resolved_overrides(resolve)],
            "condition_argument": n.condition,
            "ros_arguments": ["--enclave", n.enclave] if n.enclave else [],
        }
        for n in profile.nodes
    ]
