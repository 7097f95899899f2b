"""Session-wide test isolation for DDS (asap_testing.dds.isolate), set before any test imports rclpy.

Each ROS package's test/conftest.py does the same, so a package's tests run alone isolated too.
"""

from __future__ import annotations

from asap_testing.dds import isolate

isolate()
