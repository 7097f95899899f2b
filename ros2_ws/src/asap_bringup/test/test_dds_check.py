"""asap-dds-check's verdict, ROS-free (its live run is in tests/graph/test_unitree_sdk_twin.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from asap_bringup.dds import FASTDDS_PROFILE
from asap_bringup.dds_check import Endpoints, Traffic, report, verdict
from asap_core.crc import LOWSTATE_DTYPE
from asap_core.wire import LOWCMD, LOWSTATE, encode_lowcmd

FAST = {"RMW_IMPLEMENTATION": "rmw_fastrtps_cpp", "FASTDDS_DEFAULT_PROFILES_FILE": str(FASTDDS_PROFILE)}


def lowstate(mode_machine: int, crc: str) -> bytes:
    """A LowState on the wire with the robot's CRC, or with crc = 0 as unitree_mujoco sends it."""
    image = np.zeros((), dtype=LOWSTATE_DTYPE)
    image["mode_machine"], image["tick"] = mode_machine, 7
    image["crc"] = LOWSTATE.crc(image) if crc == "robot" else 0
    return LOWSTATE.to_cdr(image)


def traffic(state: list[bytes], cmd: list[bytes] = ()) -> dict[str, Traffic]:
    out = {"/lowstate": Traffic(), "/lowcmd": Traffic()}
    for i, data in enumerate(state):
        out["/lowstate"].add(i * 0.002, data, LOWSTATE)
    for i, data in enumerate(cmd):
        out["/lowcmd"].add(i * 0.002, data, LOWCMD)
    return out


ROBOT = {"/lowstate": Endpoints(("unitree_hg/msg/LowState",), foreign_publishers=1),
         "/lowcmd": Endpoints(("unitree_hg/msg/LowCmd",), publishers=("/policy_node",),
                              foreign_subscribers=1)}


def test_a_robot_seen_with_valid_crcs_is_ok_and_reported_with_rates() -> None:
    q = np.zeros(29)
    seen = traffic([lowstate(5, "robot")] * 501, [encode_lowcmd(mode_machine=5, q=q, kp=q, kd=q)] * 11)
    ok, text = report(seen, ROBOT, ["/policy_node"], 1, 1.0, FAST)
    assert ok and "result: OK" in text
    assert "received 501 (500.0 Hz), CRC valid 501/501, mode_machine [5]" in text
    assert "publishers: 1 non-ROS" in text and "subscribers: 1 non-ROS" in text
    assert f"{FASTDDS_PROFILE} (type propagation disabled)" in text


def test_nothing_published_points_at_domain_interface_and_discovery_range() -> None:
    ok, hints = verdict(traffic([]), {}, FAST)
    assert not ok and "nothing publishes /lowstate" in hints[0]
    assert "ROS_AUTOMATIC_DISCOVERY_RANGE=SUBNET" in hints[0]


def test_discovered_but_silent_without_the_profile_names_the_type_propagation_fix(tmp_path: Path) -> None:
    plain = tmp_path / "other.xml"
    plain.write_text("<dds><profiles/></dds>")
    for environ in ({"RMW_IMPLEMENTATION": "rmw_fastrtps_cpp"},
                    {"FASTDDS_DEFAULT_PROFILES_FILE": str(plain)}):
        ok, hints = verdict(traffic([]), ROBOT, environ)
        assert not ok and "CycloneDDS rejects the type information" in hints[0]
        assert f"FASTDDS_DEFAULT_PROFILES_FILE={FASTDDS_PROFILE}" in hints[0]
    _, hints = verdict(traffic([]), ROBOT, FAST)  # profile loaded: another cause
    assert "same unitree_hg message definition" in hints[0]


def test_unitree_mujoco_state_names_the_simulator_parameters() -> None:
    ok, hints = verdict(traffic([lowstate(0, "zero")] * 3), ROBOT, FAST)
    assert not ok
    assert any("3 of 3 samples fail the robot's CRC" in h and "check_lowstate_crc:=false" in h for h in hints)
    assert any("mode_machine [0] is no G1 variant" in h and "sim_mode_machine:=0" in h for h in hints)


@pytest.mark.parametrize("data", [b"\x00\x01\x00\x00" + bytes(12)])
def test_a_sample_of_another_type_is_counted_not_decoded(data: bytes) -> None:
    seen = traffic([data])
    assert seen["/lowstate"].undecodable == 1 and seen["/lowstate"].crc_ok == 0
    _, hints = verdict(seen, ROBOT, FAST)
    assert any("1 samples of the wrong size" in h for h in hints)
