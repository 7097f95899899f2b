"""The topics the shipped RViz config and Foxglove layout display (ROS-free), to check against a graph.

Both files are edited by hand or exported from the tools; a renamed topic would leave a panel silently
empty. :func:`displayed_topics` lists every topic a display reads, including the implicit ones (``/tf``,
``/tf_static`` for anything drawn in frames), so a test can assert that the running graph publishes each.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from asap_core import interfaces

PACKAGE = Path(__file__).resolve().parent.parent
RVIZ_CONFIG = PACKAGE / "rviz" / "asap.rviz"
FOXGLOVE_LAYOUT = PACKAGE / "foxglove" / "asap_layout.json"
TF_TOPICS = (interfaces.TF, interfaces.TF_STATIC)
_TOPIC = re.compile(r"^(/[A-Za-z0-9_/]+?)(?:[.{\[]|$)")
_FOXGLOVE_TOPIC_KEYS = {"topic", "topicPath", "topicToRender", "value", "jointStatesTopic"}
_RVIZ_FRAME_DISPLAYS = ("RobotModel", "TF", "MarkerArray", "Marker", "Odometry")
RVIZ_TYPES = {
    "MarkerArray": "visualization_msgs/msg/MarkerArray",
    "Marker": "visualization_msgs/msg/Marker",
    "Odometry": "nav_msgs/msg/Odometry",
    "RobotModel": "std_msgs/msg/String",
}
"""Message type each RViz display class reads from its topic."""


def rviz_displays(path: Path = RVIZ_CONFIG) -> list[tuple[str, str, str]]:
    """(display name, display class, topic) of every topic an RViz display reads, implicit TF included."""
    config = yaml.safe_load(path.read_text())
    out = []
    for display in config["Visualization Manager"]["Displays"]:
        name, kind = display["Name"], display["Class"].rsplit("/", 1)[-1]
        for key in ("Topic", "Description Topic"):
            value = display.get(key)
            if isinstance(value, dict) and value.get("Value"):
                out.append((name, kind, value["Value"]))
        if kind in _RVIZ_FRAME_DISPLAYS:
            out += [(f"{name} (frames)", "TF", tf) for tf in TF_TOPICS]
    return out


def rviz_topics(path: Path = RVIZ_CONFIG) -> dict[str, str]:
    """topic -> name of the (first) RViz display reading it."""
    out: dict[str, str] = {}
    for name, _, topic in rviz_displays(path):
        out.setdefault(topic, name)
    return out


def foxglove_topics(path: Path = FOXGLOVE_LAYOUT) -> dict[str, str]:
    """topic -> id of the (first) Foxglove panel reading it (message paths reduced to their topic)."""
    layout = json.loads(path.read_text())
    out: dict[str, str] = {}
    for panel_id, config in layout["configById"].items():
        for topic in _walk(config):
            out.setdefault(topic, panel_id)
        if panel_id.startswith("3D!"):
            for tf in TF_TOPICS:
                out.setdefault(tf, f"{panel_id} (frames)")
    return out


def _walk(node) -> list[str]:
    found: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "topics" and isinstance(value, dict):
                found += [t for t in value if t.startswith("/")]
            elif key in _FOXGLOVE_TOPIC_KEYS and isinstance(value, str) and (m := _TOPIC.match(value)):
                found.append(m.group(1))
            else:
                found += _walk(value)
    elif isinstance(node, list):
        for item in node:
            found += _walk(item)
    return found


def displayed_topics() -> dict[str, str]:
    """Every topic of the shipped RViz config and Foxglove layout -> where it is displayed."""
    out = {t: f"rviz: {d}" for t, d in rviz_topics().items()}
    for t, panel in foxglove_topics().items():
        out[t] = f"{out[t]}; " if t in out else ""
        out[t] += f"foxglove: {panel}"
    return out
