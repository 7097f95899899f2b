"""Message definitions as rosbag2 embeds them in MCAP schemas, read from installed ``.msg`` files.

rosbag2 stores, per message type, the type's ``.msg`` text followed by every dependency's text,
each introduced by a line of 80 ``=`` and ``MSG: pkg/Type`` (schema encoding ``ros2msg``), plus
the RIHS01 type hash. Both come from the ``share/<pkg>/msg/<Type>.{msg,json}`` files that rosidl
installs, found through ``AMENT_PREFIX_PATH``; no rclpy needed.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from asap_logger.errors import DefinitionNotFoundError

SEPARATOR = "=" * 80 + "\n"
_FIELD_TYPE = re.compile(r"(?:^|\n)\s*([a-zA-Z0-9_/]+)(?:\[[^\]]*\])?\s+")
_PRIMITIVES = frozenset(
    [
        "bool",
        "byte",
        "char",
        "float32",
        "float64",
        "int8",
        "uint8",
        "int16",
        "uint16",
        "int32",
        "uint32",
        "int64",
        "uint64",
        "string",
        "wstring",
    ]
)


@dataclass(frozen=True)
class MessageDefinition:
    """What a bag needs to know about one message type."""

    msgtype: str
    """Full type name, ``pkg/msg/Type``."""
    text: str
    """rosbag2 ``ros2msg`` schema: the type's text, then each dependency after a separator."""
    type_hash: str
    """RIHS01 type description hash (``RIHS01_<hex>``), empty when the install has none."""
    encoding: str = "ros2msg"


def ament_prefixes() -> list[Path]:
    """Install prefixes from ``AMENT_PREFIX_PATH``, in search order."""
    return [Path(p) for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]


def _split(msgtype: str) -> tuple[str, str]:
    parts = msgtype.split("/")
    if len(parts) == 3 and parts[1] == "msg":
        return parts[0], parts[2]
    if len(parts) == 2:
        return parts[0], parts[1]
    raise DefinitionNotFoundError(msgtype, [])


def _find(msgtype: str, prefixes: list[Path], suffix: str) -> Path | None:
    pkg, name = _split(msgtype)
    for prefix in prefixes:
        path = prefix / "share" / pkg / "msg" / f"{name}{suffix}"
        if path.is_file():
            return path
    return None


def dependencies(text: str, package: str) -> list[str]:
    """Message types a ``.msg`` text refers to, as ``pkg/Type``, sorted (rosbag2's order)."""
    deps = set()
    for match in _FIELD_TYPE.finditer(text):
        name = match.group(1)
        if name in _PRIMITIVES:
            continue
        deps.add(name if "/" in name else f"{package}/{name}")
    return sorted(deps)


def load_definition(msgtype: str, prefixes: list[Path] | None = None) -> MessageDefinition:
    """Build the rosbag2 schema text and type hash of ``msgtype`` from installed files."""
    prefixes = ament_prefixes() if prefixes is None else prefixes
    seen: set[str] = set()

    def text_of(name: str) -> str:
        path = _find(name, prefixes, ".msg")
        if path is None:
            raise DefinitionNotFoundError(name, [str(p) for p in prefixes])
        return path.read_text()

    def append(name: str) -> str:
        text = text_of(name)
        out = text
        for dep in dependencies(text, _split(name)[0]):
            if dep not in seen:
                seen.add(dep)
                out += "\n" + SEPARATOR + f"MSG: {dep}\n" + append(dep)
        return out

    pkg, name = _split(msgtype)
    full = f"{pkg}/msg/{name}"
    text = append(full)
    json_path = _find(full, prefixes, ".json")
    type_hash = ""
    if json_path is not None:
        hashes = json.loads(json_path.read_text()).get("type_hashes", [])
        type_hash = next((h["hash_string"] for h in hashes if h["type_name"] == full), "")
    return MessageDefinition(msgtype=full, text=text, type_hash=type_hash)
