"""Command-line options derived from config dataclasses: one source of defaults and help text.

A config dataclass documents each field with an attribute docstring (a string literal right below the
field). :meth:`ConfigParser.field` turns a field into an option under the flag users type: its type and
choices come from the field's annotation, its help from the first paragraph of the field's docstring,
ending with the field's default, so ``--help`` shows what the dataclass holds. An option left off the
command line leaves the config alone: :meth:`ConfigParser.config` applies only the options given, to the
dataclass defaults or to another base (a run's saved configs, a preset).

    p = ConfigParser("asap-sysid", __doc__)
    p.field(SysidCfg, "max_evaluations", "--max-evals")
    cfg = p.config(p.parse_args(argv), SysidCfg)

Stdlib only (robot-side command lines use it too, on Python 3.10).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import inspect
import itertools
import re
import textwrap
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar

SCALARS = (int, float, str, Path)
"""Field types an option parses directly (plus ``bool`` switches, tuples of these, Literals, Optionals)."""


class _Unset:
    """The value of an option that was not given (distinct from a given ``None``)."""

    def __repr__(self) -> str:
        return "<unset>"


UNSET: Any = _Unset()


class Dataclass(Protocol):
    """Any dataclass (what :func:`dataclasses.replace` takes)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]


Cfg = TypeVar("Cfg", bound=Dataclass)


class _Repeat(argparse.Action):
    """One value per occurrence of the flag, collected into a tuple."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: str | Sequence[Any] | None, option_string: str | None = None) -> None:
        before = getattr(namespace, self.dest)
        setattr(namespace, self.dest, (*(() if before is UNSET else before), values))


@dataclasses.dataclass(frozen=True)
class BoundField:
    """An option's config field."""

    cfg: type
    name: str

    @property
    def default(self) -> Any:
        """The field's default value (a fresh one for a ``default_factory``)."""
        return field_default(self.cfg, self.name)


@functools.cache
def field_docs(cfg: type) -> dict[str, str]:
    """Attribute docstrings of a dataclass and its bases, by field name (none where the source is absent)."""
    docs: dict[str, str] = {}
    for klass in reversed(cfg.__mro__[:-1]):  # bases first, object skipped
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError):  # no source (e.g. only .pyc installed): help without text
            continue
        node = tree.body[0]
        body = node.body if isinstance(node, ast.ClassDef) else []
        for stmt, after in itertools.pairwise(body):
            if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                    and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                    and isinstance(after.value.value, str)):
                docs[stmt.target.id] = inspect.cleandoc(after.value.value)
    return docs


def help_text(doc: str) -> str:
    """A docstring's first paragraph on one line, reST markup dropped (``x`` → x, :func:`~a.b` → b)."""
    text = " ".join(doc.split("\n\n", 1)[0].split())
    text = re.sub(r":\w+:`~[\w.]*\.(\w+)`", r"\1", text)
    text = re.sub(r":\w+:`([^`]+)`", r"\1", text)
    return text.replace("``", "")


def field_default(cfg: type, name: str) -> Any:
    """The default of field ``name`` of dataclass ``cfg``; TypeError when it has none."""
    found = {f.name: f for f in dataclasses.fields(cfg)}.get(name)
    if found is None:
        raise TypeError(f"{cfg.__name__} has no field {name!r}")
    if found.default is not dataclasses.MISSING:
        return found.default
    if found.default_factory is not dataclasses.MISSING:
        return found.default_factory()
    raise TypeError(f"{cfg.__name__}.{name} has no default to show")


def shown_default(value: Any, negated: bool = False) -> str:
    """How ``--help`` writes a default: ``on``/``off`` for switches, tuples space-separated."""
    if negated:
        return "on; this flag turns it off"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, tuple | list):
        return " ".join(map(str, value)) if value else "empty"
    return '""' if value == "" else str(value)


def _optional_inner(hint: Any) -> tuple[Any, bool]:
    """(``X``, True) for ``X | None``; (hint, False) otherwise."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(hint)) == 2:
            return args[0], True
    return hint, False


class ConfigParser(argparse.ArgumentParser):
    """An argument parser whose config options are derived from dataclass fields (module docstring)."""

    def __init__(self, prog: str, description: str | None) -> None:
        super().__init__(prog=prog, description=description,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
        self.bound: dict[str, BoundField] = {}
        """Destination of every derived option → its field."""

    def field(self, cfg: type, name: str, flag: str | None = None, *, nargs: str | int | None = None,
              choices: Sequence[Any] | None = None, metavar: str | tuple[str, ...] | None = None,
              repeatable: bool = False) -> argparse.Action:
        """Add the option of ``cfg.name`` as ``flag`` (default ``--name-with-dashes``).

        ``bool`` fields are switches: ``--flag`` sets True; a flag named ``--no-…`` sets False (or None,
        for an ``X | None`` field with a default). Tuples take several values (``nargs`` "+", or as
        given); ``repeatable``: one value per occurrence (``--motion a --motion b``). ``Literal``
        fields choose among their values; ``choices`` restricts others."""
        dest = f"{cfg.__name__}.{name}"
        if dest in self.bound:
            raise ValueError(f"{dest} already has an option")
        default = field_default(cfg, name)
        hint, optional = _optional_inner(typing.get_type_hints(cfg)[name])
        flag = flag or "--" + name.replace("_", "-")
        negated = flag.startswith("--no-")
        doc = help_text(field_docs(cfg).get(name, ""))
        kwargs: dict[str, Any] = {"dest": dest, "default": UNSET}
        if negated:
            if not default:
                raise ValueError(f"{flag}: {dest} is already off by default")
            kwargs |= {"action": "store_const", "const": None if optional else False}
        elif hint is bool:
            if default:
                raise ValueError(f"{flag}: {dest} is on by default; name the flag that turns it off --no-…")
            kwargs |= {"action": "store_true"}
        else:
            if typing.get_origin(hint) is tuple:
                hint = typing.get_args(hint)[0]
                if repeatable:
                    kwargs["action"] = _Repeat
                else:
                    kwargs["nargs"] = nargs or "+"
            if typing.get_origin(hint) is typing.Literal:
                choices = choices or typing.get_args(hint)
                hint = type(typing.get_args(hint)[0])
            if hint not in SCALARS:
                raise TypeError(f"{dest}: {hint!r} has no command-line form")
            shown = flag.removeprefix("--").replace("-", "_").upper()  # not the dotted destination
            kwargs |= {"type": hint, "choices": choices, "metavar": metavar or (None if choices else shown)}
        suffix = " (repeatable)" if repeatable else ""
        text = f"{doc}{suffix} (default: {shown_default(default, negated)})".strip()
        action = self.add_argument(flag, help=text.replace("%", "%%"), **kwargs)
        self.bound[dest] = BoundField(cfg, name)
        return action

    def fields(self, cfg: type, *names: str) -> None:
        """:meth:`field` for each name, under its default flag."""
        for name in names:
            self.field(cfg, name)

    def given(self, ns: argparse.Namespace, cfg: type[Cfg]) -> dict[str, Any]:
        """The fields of ``cfg`` set on the command line (lists of values as tuples)."""
        out = {}
        for dest, bound in self.bound.items():
            value = getattr(ns, dest)
            if bound.cfg is cfg and value is not UNSET:
                out[bound.name] = tuple(value) if isinstance(value, list) else value
        return out

    def config(self, ns: argparse.Namespace, cfg: type[Cfg], base: Cfg | None = None) -> Cfg:
        """``base`` (default: ``cfg()``) with the options given on the command line applied."""
        return dataclasses.replace(cfg() if base is None else base, **self.given(ns, cfg))
