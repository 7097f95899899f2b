"""The policy node's graph helpers (the G1 test double and its observers) are asap_policy's test helpers."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "ros2_ws" / "src" / "asap_policy" / "test"))
