"""DDS isolation, and this folder's test helpers (the G1 test double, the policy-node graph) on the path."""

from __future__ import annotations

import sys
from pathlib import Path

from asap_testing.dds import isolate

isolate()
sys.path.insert(0, str(Path(__file__).parent))  # fake_g1.py, policy_graph.py
