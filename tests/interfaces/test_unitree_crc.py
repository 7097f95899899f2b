"""Our LowCmd/LowState CRC equals the one Unitree's own SDK computes, on random messages (no ROS needed:
also run on the robot's Python 3.10 by make test-robot)."""

from __future__ import annotations

import numpy as np
from unitree_oracle import sdk

from asap_core import crc
from asap_core.testing.messages import as_obj, random_lowcmd, random_lowstate


def test_lowcmd_crc_matches_unitree_sdk_on_1000_random_messages() -> None:
    rng = np.random.default_rng(3)
    msgs = [random_lowcmd(rng) for _ in range(1000)]
    expected = sdk({"op": "crc", "type": "LowCmd", "messages": msgs})
    ours = [crc.lowcmd_crc(as_obj(m)) for m in msgs]
    assert ours == expected


def test_lowstate_crc_matches_unitree_sdk_on_random_messages() -> None:
    rng = np.random.default_rng(4)
    msgs = [random_lowstate(rng) for _ in range(200)]
    expected = sdk({"op": "crc", "type": "LowState", "messages": msgs})
    assert [crc.lowstate_crc(as_obj(m)) for m in msgs] == expected
