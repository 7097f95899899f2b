"""Launch files start what the runner starts: both come from profile.launch_entries (checked by parsing,
since the launch library is not installed here)."""

from __future__ import annotations

import ast
from pathlib import Path

from asap_bringup.profile import available_profiles, launch_entries, load_profile

PKG = Path(__file__).resolve().parents[1]
CONFIG = PKG / "config"


def test_one_launch_file_per_profile_that_loads_it() -> None:
    profiles = available_profiles(CONFIG)
    assert {"robot", "sim2sim"} <= set(profiles)
    for name in profiles:
        tree = ast.parse((PKG / "launch" / f"{name}.launch.py").read_text())
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
                 and getattr(n.func, "id", "") == "profile_launch_description"]
        assert [c.args[0].value for c in calls] == [name]


def test_launch_common_passes_every_entry_unchanged_to_node() -> None:
    tree = ast.parse((PKG / "asap_bringup" / "launch_common.py").read_text())
    loop = next(n for n in ast.walk(tree) if isinstance(n, ast.For)
                and getattr(n.iter, "func", None) is not None and n.iter.func.id == "launch_entries")
    node_calls = [n for n in ast.walk(loop)
                  if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "Node"]
    assert len(node_calls) == 1
    (kwargs,) = [k for k in node_calls[0].keywords if k.arg is None]  # Node(**entry, ...)
    assert kwargs.value.id == loop.target.id


def test_every_profile_resolves_with_its_defaults() -> None:
    for name in available_profiles(CONFIG):
        profile = load_profile(name, CONFIG)
        entries = launch_entries(profile, profile.arguments.__getitem__)
        assert [e["name"] for e in entries] == [n.name for n in profile.nodes]
        for e in entries:
            assert all(Path(p).is_file() for p in e["parameters"] if isinstance(p, str))


def test_robot_state_publisher_gets_the_urdf_text_through_launch_and_runner() -> None:
    import yaml

    from asap_bringup import runner

    urdf = (PKG / "urdf" / "g1.urdf").read_text()
    for name, enabled_by_default in (("robot", True), ("sim2sim", False)):
        profile = load_profile(name, CONFIG)
        (entry,) = [e for e in launch_entries(profile, profile.arguments.__getitem__)
                    if e["package"] == "robot_state_publisher"]
        assert entry["parameters"][-1] == {"robot_description": urdf}
        assert profile.arguments[entry["condition_argument"]] is enabled_by_default
        cmd = runner.node_command(entry, "/bin/robot_state_publisher")
        key, _, text = cmd[cmd.index("-p") + 1].partition(":=")
        assert key == "robot_description" and yaml.safe_load(text) == urdf  # what rcl parses back


def test_a_missing_file_substitution_is_explained(tmp_path: Path) -> None:
    import pytest

    from asap_bringup.profile import ProfileError

    (tmp_path / "config" / "profiles").mkdir(parents=True)
    (tmp_path / "config" / "profiles" / "p.yaml").write_text(
        "nodes:\n  - {name: a, package: p, executable: e,\n"
        "     overrides: {robot_description: $(file urdf/x.urdf)}}\n")
    with pytest.raises(ProfileError, match=r"reads .*urdf/x.urdf, which does not exist"):
        load_profile("p", tmp_path / "config")
