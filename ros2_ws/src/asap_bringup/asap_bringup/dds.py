"""The DDS settings asap ships (``config/dds/``) and the environment that makes every node load them.

Fast DDS 3 (ROS 2 Kilted and newer, the PyPI wheels of ``make setup``) announces XTypes type objects that
CycloneDDS (the G1, unitree_sdk2, unitree_mujoco, rmw_cyclonedds) rejects: both sides discover each
other and no sample ever flows. ``config/dds/fastdds.xml`` turns type propagation off; ``scripts/env.sh``,
the ``asap-up`` runner, the launch files and the robot image load it. ROS-free.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path

from asap_bringup.profile import CONFIG_DIR

DDS_DIR = CONFIG_DIR / "dds"
FASTDDS_PROFILE = DDS_DIR / "fastdds.xml"
"""Default participant profile: ``fastdds.type_propagation`` = ``disabled``."""
CYCLONEDDS_LOOPBACK = DDS_DIR / "cyclonedds_loopback.xml"
"""CycloneDDS for Unitree's SDK tools and simulators next to asap on one machine (loopback, unicast)."""
CYCLONEDDS_ROBOT = DDS_DIR / "cyclonedds_robot.xml"
"""CycloneDDS on the G1's network: the interface named by ``ASAP_NETWORK_INTERFACE``."""
PROFILE_VARIABLES = ("FASTDDS_DEFAULT_PROFILES_FILE", "FASTRTPS_DEFAULT_PROFILES_FILE")
"""Where Fast DDS 3 (and, deprecated there, Fast DDS 2) looks for its XML profiles."""


def dds_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """Variables to add to ``environ`` so the nodes load asap's Fast DDS profile; none where the user
    already named a profile file (theirs wins)."""
    if any(environ.get(name) for name in PROFILE_VARIABLES):
        return {}
    return {PROFILE_VARIABLES[0]: str(FASTDDS_PROFILE)}


def loaded_fastdds_profile(environ: Mapping[str, str]) -> Path | None:
    """The Fast DDS profile file a process started with ``environ`` loads, if any."""
    for name in PROFILE_VARIABLES:
        if environ.get(name):
            return Path(environ[name])
    return None


def disables_type_propagation(path: Path) -> bool:
    """Whether a Fast DDS XML profile sets ``fastdds.type_propagation`` to ``disabled``."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return False
    for prop in root.iter():
        if prop.tag.rpartition("}")[2] != "property":
            continue
        fields = {child.tag.rpartition("}")[2]: (child.text or "").strip() for child in prop}
        if fields.get("name") == "fastdds.type_propagation" and fields.get("value") == "disabled":
            return True
    return False
