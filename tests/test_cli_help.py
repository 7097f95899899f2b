"""``--help`` of every console script shows the defaults of the config dataclasses its options come from.

The scripts are read from this checkout's declarations (``training/pyproject.toml`` and every ROS
package's ``setup.py``), so a new command is checked without editing this file. For each one, ``main
--help`` runs in-process and must print its module's ``parser()``; every option derived from a config
field must leave the config alone unless given and show that field's current default and docstring; any
other option with a default of its own is a hand-copied default unless it is listed in
:data:`NOT_CONFIG` with the reason it belongs to no config.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import re
import tomllib
from pathlib import Path

import pytest

from asap_core.config_options import UNSET, ConfigParser, shown_default

REPO = Path(__file__).resolve().parents[1]

ROS_NODES = {"policy_node", "g1_sim", "recorder", "monitor"}
"""Nodes: configured by ROS parameters (``--ros-args -p``) declared from their own tables, no argparse."""

NOT_YET_DERIVED: dict[str, str] = {}
"""Commands whose options are still written by hand, with the reason."""

NOT_CONFIG = {
    "--threads": "process-level: this process's share of the cores (asap_training.parallel)",
    "--device": "process-level: where this process's networks run, not a setting of the run",
    "--config-dir": "a path: where asap-up finds its profiles",
    "--blend-ticks": "a value of asap-push's LoadPolicy request, not a setting of the client",
}
"""Options with a default of their own that belong to no config dataclass."""


def console_scripts() -> dict[str, str]:
    """``name -> module:function`` of every console script this checkout declares."""
    scripts = tomllib.loads((REPO / "training" / "pyproject.toml").read_text())["project"]["scripts"]
    for setup in sorted((REPO / "ros2_ws" / "src").glob("*/setup.py")):
        text = setup.read_text().replace("{PACKAGE}", setup.parent.name)
        scripts |= dict(re.findall(r"[\"']([A-Za-z0-9_-]+) = ([A-Za-z0-9_.]+:[A-Za-z0-9_]+)[\"']", text))
    return scripts


SCRIPTS = console_scripts()
COMMANDS = sorted(name for name in SCRIPTS if name not in ROS_NODES)


def test_every_kind_of_console_script_is_found() -> None:
    assert set(SCRIPTS) >= ROS_NODES
    assert {"asap-train", "asap-delta", "asap-demo", "asap-up", "asap-dds-check", "asap-bag"} <= set(COMMANDS)


def _help(name: str) -> str:
    module, function = SCRIPTS[name].split(":")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as done:
        getattr(importlib.import_module(module), function)(["--help"])
    assert done.value.code in (0, None), f"{name} --help exited {done.value.code}"
    return out.getvalue()


def _flat(text: str) -> str:
    return "".join(text.split())  # argparse wraps lines, also after hyphens


@pytest.mark.parametrize("name", COMMANDS)
def test_help_shows_the_config_defaults(name: str) -> None:
    text = _help(name)
    assert text.startswith(f"usage: {name}")
    if name in NOT_YET_DERIVED:
        return
    parser = importlib.import_module(SCRIPTS[name].split(":")[0]).parser()
    assert text == parser.format_help(), f"{name}: main() does not use its module's parser()"
    bound = parser.bound if isinstance(parser, ConfigParser) else {}
    for action in parser._actions:  # argparse keeps its options nowhere public
        flag = action.option_strings[0] if action.option_strings else action.dest
        field = bound.get(action.dest)
        if field is None:
            own = action.default not in (None, False, argparse.SUPPRESS) and not action.required
            assert not own or flag in NOT_CONFIG, (
                f"{name} {flag}: default {action.default!r} written by hand; derive the option from its "
                "config dataclass (ConfigParser.field) or list it in NOT_CONFIG with the reason"
            )
            continue
        where = f"{name} {flag} ({field.cfg.__name__}.{field.name})"
        assert action.default is UNSET, f"{where}: left off, the option must leave the config alone"
        default = shown_default(field.default, negated=flag.startswith("--no-"))
        assert _flat(action.help or "").endswith(_flat(f"(default: {default})")), f"{where}: {action.help!r}"
        assert not (action.help or "").startswith("(default"), f"{where}: the field has no docstring"
        assert _flat(action.help or "").replace("%%", "%") in _flat(text)
