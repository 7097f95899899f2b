"""Name-based joint maps."""

from __future__ import annotations

import numpy as np
import pytest

from asap_core import g1
from asap_core.joint_map import JointMap, JointMapError


@pytest.mark.parametrize(("src", "dst"), [("motor", "isaaclab"), ("isaaclab", "motor"),
                                           ("asap23", "motor"), ("asap23", "isaaclab")])
def test_round_trip_between_named_orders(src: str, dst: str) -> None:
    fwd = JointMap.from_names(g1.names(src), g1.names(dst))
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, len(g1.names(src))))
    y = fwd.apply(x, fill=np.nan)
    np.testing.assert_array_equal(fwd.gather(y), x)
    for i, name in enumerate(g1.names(src)):  # every value lands on the joint of the same name
        np.testing.assert_array_equal(y[:, g1.names(dst).index(name)], x[:, i])
    assert fwd.is_bijection == (len(g1.names(src)) == len(g1.names(dst)))


def test_isaaclab_to_motor_by_known_index() -> None:
    m = JointMap.from_names(g1.ISAACLAB_ORDER, g1.MOTOR_ORDER)
    # Isaac Lab joint 2 is waist yaw = motor 12; Isaac Lab 12 is right shoulder pitch = motor 22
    assert m.index[2] == 12 and m.index[12] == 22


def test_random_permutation_round_trip() -> None:
    rng = np.random.default_rng(1)
    shuffled = list(rng.permutation(g1.MOTOR_ORDER))
    m = JointMap.from_names(shuffled, g1.MOTOR_ORDER)
    back = JointMap.from_names(g1.MOTOR_ORDER, shuffled)
    x = rng.normal(size=29)
    np.testing.assert_array_equal(back.apply(m.apply(x)), x)


def test_fill_for_missing_target_joints() -> None:
    m = JointMap.from_names(g1.ASAP23_ORDER, g1.MOTOR_ORDER)
    default = g1.default_pose(g1.MOTOR_ORDER)
    out = m.apply(np.ones(23), fill=default)
    wrists = [g1.MOTOR_ORDER.index(n) for n in g1.WRIST_JOINTS]
    np.testing.assert_array_equal(out[wrists], default[wrists])
    assert np.count_nonzero(out == 1) == 23


def test_errors_name_the_joints() -> None:
    with pytest.raises(JointMapError, match="left_tail_joint"):
        JointMap.from_names(["left_tail_joint"], g1.MOTOR_ORDER)
    with pytest.raises(JointMapError, match="duplicate"):
        JointMap.from_names(["waist_yaw_joint", "waist_yaw_joint"], g1.MOTOR_ORDER)
    m = JointMap.from_names(g1.ASAP23_ORDER, g1.MOTOR_ORDER)
    with pytest.raises(JointMapError, match="expected 23"):
        m.apply(np.zeros(29))
