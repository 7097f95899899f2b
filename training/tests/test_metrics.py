"""ASAP's metrics on hand-made trajectories."""

from __future__ import annotations

import numpy as np
import pytest

from asap_training.eval.metrics import tracking_metrics


def test_constant_offset_is_global_error_only():
    ref = np.zeros((10, 27, 3))
    ref[:, :, 0] = np.arange(10)[:, None] * 0.01  # everything moves 1 cm per frame
    robot = ref.copy()
    robot[..., 2] += 0.05  # the whole robot 5 cm high
    m = tracking_metrics(robot, ref)
    assert m.e_g_mpjpe_mm == pytest.approx(50.0)
    assert m.e_mpjpe_mm == pytest.approx(0.0, abs=1e-9)  # root-relative: identical
    assert m.e_vel_mm == pytest.approx(0.0, abs=1e-9) and m.e_acc_mm == pytest.approx(0.0, abs=1e-9)
    assert m.success and not m.fell


def test_velocity_acceleration_and_failure():
    ref = np.zeros((6, 27, 3))
    robot = np.zeros((6, 27, 3))
    robot[:, 1:, 0] = (np.arange(6) ** 2)[:, None] * 0.001  # non-root points accelerate: x = t² mm
    m = tracking_metrics(robot, ref, fell=True)
    # Δp = 1, 3, 5, 7, 9 mm (26 of 27 points); first frame excluded → frames 1..4 → mean (3+5+7+9)/4·26/27
    assert m.e_vel_mm == pytest.approx(6.0 * 26 / 27)
    assert m.e_acc_mm == pytest.approx(2.0 * 26 / 27)  # Δ²p = 2 mm everywhere
    assert not m.success and m.fell
    far = np.zeros((6, 27, 3))
    far[3:, :, 1] = 0.6
    assert not tracking_metrics(far, ref).success  # mean distance 0.6 m > 0.5 m


def test_breaks_leave_the_motion_across_a_cut_out():
    ref = np.zeros((8, 27, 3))
    robot = np.zeros((8, 27, 3))
    robot[4:, 1:, 0] = 0.01  # 1 cm jump of the non-root points between frames 3 and 4 (a cut there)
    joined = tracking_metrics(robot, ref)
    assert joined.e_vel_mm > 0 and joined.e_acc_mm > 0
    cut = tracking_metrics(robot, ref, breaks=[4])
    assert cut.e_vel_mm == pytest.approx(0.0, abs=1e-12)
    assert cut.e_acc_mm == pytest.approx(0.0, abs=1e-12)
    assert cut.e_g_mpjpe_mm == pytest.approx(joined.e_g_mpjpe_mm)  # positions still count
