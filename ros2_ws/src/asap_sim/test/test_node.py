"""The g1_sim node in-process: parameter table, configuration errors, band service, remote."""

from __future__ import annotations

import pytest

rclpy = pytest.importorskip("rclpy")
from rclpy.parameter import Parameter  # noqa: E402

from asap_sim.g1_sim_node import PARAMETERS, G1SimNode, SimConfig  # noqa: E402
from asap_sim.profiles import ProfileError  # noqa: E402

pytestmark = pytest.mark.node


@pytest.fixture
def ros():
    rclpy.init()
    yield
    rclpy.try_shutdown()


def _node(**overrides) -> G1SimNode:
    return G1SimNode(parameter_overrides=[Parameter(k, value=v) for k, v in overrides.items()])


def test_every_parameter_is_described_and_read_only(ros) -> None:
    node = _node(clock_mode="lockstep", wait_for_cmd=True)
    try:
        assert {p.name for p in PARAMETERS} == set(SimConfig.__dataclass_fields__)
        for p in PARAMETERS:
            descriptor = node.describe_parameter(p.name)
            assert descriptor.read_only and descriptor.description
        assert node.cfg.steps_per_state == 1
    finally:
        node.stop()
        node.destroy_node()


@pytest.mark.parametrize(
    ("overrides", "error", "message"),
    [
        ({"profile": "nope"}, ProfileError, "no shipped dynamics profile 'nope'"),
        ({"clock_mode": "fast"}, ValueError, r"clock_mode 'fast': use one of \('realtime', 'lockstep'\)"),
        ({"physics_dt": 0.0015}, ValueError, "whole number"),
        ({"initial_pose": "squat"}, ValueError, "initial_pose 'squat'"),
    ],
)
def test_bad_configuration_fails_at_start(ros, overrides: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        _node(**overrides)


def test_out_of_range_parameter_is_refused(ros) -> None:
    with pytest.raises(Exception, match="sync_every"):
        _node(sync_every=0)
