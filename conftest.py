"""Session-wide test isolation for DDS.

Tests that use DDS get their own random ROS_DOMAIN_ID and stay on localhost, so parallel runs and
other processes on the machine never cross-talk. Set before any test imports rclpy; processes the
tests spawn inherit it.
"""

from __future__ import annotations

import os
import random

os.environ.setdefault("ROS_DOMAIN_ID", str(random.SystemRandom().randint(1, 101)))
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
