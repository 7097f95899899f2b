"""Options derived from config dataclasses: types, help from the attribute docstrings, defaults shown,
and a command line that overrides only what it names."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest

from asap_core.config_options import UNSET, ConfigParser, field_docs, help_text, shown_default


@dataclass(frozen=True, kw_only=True)
class Budget:
    """A config shaped like the tools' ones."""

    iterations: int = 200
    """PPO iterations.

    A second paragraph: the reasoning, not the help."""
    rate: float = 0.002
    """Physics step (s); 5 % slower is fine."""
    profile: str | None = None
    """Dynamics profile; None: the parent's."""
    joints: tuple[str, ...] = (".*",)
    """Regexes of the joints (``.*_ankle_.*``: the ankles; see :func:`~asap_core.g1.names`)."""
    motions: tuple[str, ...] = ("arm_swing",)
    """Clip names."""
    backend: Literal["env", "twin"] = "env"
    """Where the rollout runs."""
    extended: bool = False
    """Also identify torque ratios."""
    warm: dict[str, float] | None = field(default_factory=lambda: {"epochs": 3.0})
    """The warm start; None: from zero."""
    out: Path = Path("runs/x")
    undocumented: int = 1


@dataclass(frozen=True)
class MoreBudget(Budget):
    seeds: int = 3
    """Seeds per run."""


def parser() -> ConfigParser:
    p = ConfigParser("tool", "a tool")
    p.field(Budget, "iterations")
    p.field(Budget, "rate", "--physics-dt")
    p.fields(Budget, "profile", "joints")
    p.field(Budget, "motions", "--motion", repeatable=True)
    p.fields(Budget, "backend", "extended")
    p.field(Budget, "warm", "--no-warm")
    p.field(Budget, "out")
    return p


def test_attribute_docstrings_are_read_with_the_bases_and_cut_to_their_first_paragraph() -> None:
    docs = field_docs(MoreBudget)
    assert docs["iterations"].startswith("PPO iterations.\n\nA second paragraph")
    assert docs["seeds"] == "Seeds per run." and "undocumented" not in docs and "out" not in docs
    assert help_text(docs["iterations"]) == "PPO iterations."
    assert help_text(docs["joints"]) == "Regexes of the joints (.*_ankle_.*: the ankles; see names)."


def test_help_shows_each_fields_default_and_first_paragraph() -> None:
    text = " ".join(parser().format_help().split())
    for expected in (
        "--iterations ITERATIONS PPO iterations. (default: 200)",
        "--physics-dt PHYSICS_DT Physics step (s); 5 % slower is fine. (default: 0.002)",
        "--profile PROFILE Dynamics profile; None: the parent's. (default: None)",
        "--joints JOINTS [JOINTS ...] Regexes of the joints",
        "(default: .*)",
        "--motion MOTION Clip names. (repeatable) (default: arm_swing)",
        "--backend {env,twin} Where the rollout runs. (default: env)",
        "--extended Also identify torque ratios. (default: off)",
        "--no-warm The warm start; None: from zero. (default: on; this flag turns it off)",
        "--out OUT (default: runs/x)",
    ):
        assert expected in text
    assert "second paragraph" not in text


def test_options_left_off_keep_the_base_and_given_ones_replace_it() -> None:
    p = parser()
    assert p.config(p.parse_args([]), Budget) == Budget()
    base = Budget(iterations=7, profile="weak_ankles")
    assert p.config(p.parse_args(["--physics-dt", "0.005"]), Budget, base) == dataclasses.replace(
        base, rate=0.005
    )
    cfg = p.config(p.parse_args([
        "--iterations", "3", "--profile", "latency", "--joints", "a", "b", "--motion", "m1", "--motion", "m2",
        "--backend", "twin", "--extended", "--no-warm", "--out", "/tmp/o",
    ]), Budget)  # fmt: skip
    assert cfg == Budget(iterations=3, rate=0.002, profile="latency", joints=("a", "b"), motions=("m1", "m2"),
                         backend="twin", extended=True, warm=None, out=Path("/tmp/o"))
    assert all(getattr(p.parse_args([]), dest) is UNSET for dest in p.bound)


def test_bad_values_are_refused_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--iterations", "2.5"], ["--backend", "gpu"]):
        with pytest.raises(SystemExit):
            parser().parse_args(argv)
    assert "invalid choice: 'gpu'" in capsys.readouterr().err


def test_fields_without_a_command_line_form_are_refused_when_the_parser_is_built() -> None:
    p = ConfigParser("tool", None)
    with pytest.raises(TypeError, match="Budget has no field 'nope'"):
        p.field(Budget, "nope")
    with pytest.raises(ValueError, match="already off by default"):
        p.field(Budget, "extended", "--no-extended")

    @dataclass
    class Switches:
        fast: bool = True

    with pytest.raises(ValueError, match="on by default; name the flag that turns it off --no-"):
        p.field(Switches, "fast")
    p.field(Switches, "fast", "--no-fast")
    assert p.config(p.parse_args(["--no-fast"]), Switches).fast is False

    @dataclass
    class Nested:
        inner: Budget = field(default_factory=Budget)

    with pytest.raises(TypeError, match="no command-line form"):
        p.field(Nested, "inner")
    p.field(Budget, "iterations")
    with pytest.raises(ValueError, match="already has an option"):
        p.field(Budget, "iterations", "--iters")


def test_a_class_without_source_still_gets_options_with_defaults() -> None:
    made = dataclasses.make_dataclass("Made", [("steps", int, dataclasses.field(default=4))])
    assert field_docs(made) == {}
    p = ConfigParser("tool", None)
    action = p.field(made, "steps")
    assert action.help == "(default: 4)" and p.config(p.parse_args(["--steps", "5"]), made).steps == 5


def test_shown_defaults() -> None:
    assert [shown_default(v) for v in (True, False, (), (256, 256), "", None, 1e-3)] == [
        "on", "off", "empty", "256 256", '""', "None", "0.001"
    ]
    assert isinstance(parser(), argparse.ArgumentParser)
