"""Observation terms against hand-computed values, the ASAP layout, history semantics, batching."""

from __future__ import annotations

import math

import numpy as np
import pytest

from asap_core import g1, quat
from asap_core.joint_map import JointMap
from asap_core.observation import (
    ObservationBuilder,
    ObservationSpec,
    ObsInputs,
    ObsTerm,
    asap_actor_spec,
    assemble,
    motion_phase,
    projected_gravity,
)

S = math.sqrt(0.5)


@pytest.mark.parametrize(
    ("quat_wxyz", "expected"),
    [
        ((1.0, 0.0, 0.0, 0.0), (0.0, 0.0, -1.0)),  # upright
        ((S, S, 0.0, 0.0), (0.0, -1.0, 0.0)),  # rolled +90° about x: R^T g = Rx(-90)(0,0,-1)
        ((S, 0.0, S, 0.0), (1.0, 0.0, 0.0)),  # pitched +90° about y (nose down): g along +x
        ((S, 0.0, 0.0, S), (0.0, 0.0, -1.0)),  # yaw does not change gravity
        ((0.0, 1.0, 0.0, 0.0), (0.0, 0.0, 1.0)),  # upside down
    ],
)
def test_projected_gravity_hand_computed(quat_wxyz: tuple, expected: tuple) -> None:
    zeros = np.zeros(3)
    inputs = ObsInputs(q=zeros, dq=zeros, quat_wxyz=np.array(quat_wxyz), gyro_b=zeros, last_action=zeros,
                       phase=0.0, default_q=zeros)
    np.testing.assert_allclose(projected_gravity(inputs), expected, atol=1e-12)
    gravity = np.array([0.0, 0.0, -1.0])  # the same as the inverse rotation of gravity
    np.testing.assert_allclose(quat.rotate_inv(np.array(quat_wxyz), gravity), expected, atol=1e-12)


def test_quat_rotate_inverse_batched_equals_rotation_matrix() -> None:
    rng = np.random.default_rng(1)
    q = rng.normal(size=(5, 7, 4))
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    v = rng.normal(size=(5, 7, 3))
    w, x, y, z = np.moveaxis(q, -1, 0)
    rot = np.stack([  # body -> world rotation matrix of a wxyz quaternion
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
    ], -2)
    expected = np.einsum("...ji,...j->...i", rot, v)  # R^T v
    np.testing.assert_allclose(quat.rotate_inv(q, v), expected, atol=1e-12)


def test_asap_actor_spec_layout() -> None:
    spec = asap_actor_spec(23)
    assert spec.dim == 380
    labels = [label for label, _ in spec.slices()]
    assert labels == [
        "actions", "base_ang_vel", "dof_pos", "dof_vel",
        "actions@h4", "base_ang_vel@h4", "dof_pos@h4", "dof_vel@h4", "projected_gravity@h4",
        "ref_motion_phase@h4",
        "projected_gravity", "ref_motion_phase",
    ]
    sizes = [s.stop - s.start for _, s in spec.slices()]
    assert sizes == [23, 3, 23, 23, 92, 12, 92, 92, 12, 4, 3, 1]  # history block = 4 x 76 = 304
    scales = {t.name: t.scale for t in spec.terms}
    assert scales == {"actions": 1.0, "base_ang_vel": 0.25, "dof_pos": 1.0, "dof_vel": 0.05,
                      "projected_gravity": 1.0, "ref_motion_phase": 1.0}
    assert ObservationSpec.from_dict(spec.to_dict()) == spec


def _inputs(n: int, k: float) -> ObsInputs:
    """Inputs whose every entry is recognisable: q = k, dq = 10k, gyro = 100k, action = -k."""
    return ObsInputs(q=np.full(n, k), dq=np.full(n, 10 * k), quat_wxyz=np.array([1.0, 0, 0, 0]),
                     gyro_b=np.full(3, 100 * k), last_action=np.full(n, -k), phase=k / 10,
                     default_q=np.zeros(n))


def test_history_holds_previous_ticks_newest_first() -> None:
    spec = ObservationSpec(terms=(ObsTerm(name="dof_pos", dim=2),
                                  ObsTerm(name="dof_pos", dim=2, scale=2.0, history=3)), clip=None)
    builder = ObservationBuilder(spec=spec)
    obs = [builder.build(_inputs(2, k)) for k in (1.0, 2.0, 3.0, 4.0, 5.0)]
    # tick k: current dof_pos = k; history = 2 * (k-1, k-2, k-3), zeros before the start
    np.testing.assert_array_equal(obs[0], [1, 1, 0, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(obs[1], [2, 2, 2, 2, 0, 0, 0, 0])
    np.testing.assert_array_equal(obs[4], [5, 5, 8, 8, 6, 6, 4, 4])
    builder.reset()
    np.testing.assert_array_equal(builder.build(_inputs(2, 7.0)), [7, 7, 0, 0, 0, 0, 0, 0])


def test_scales_and_clip() -> None:
    spec = ObservationSpec(terms=(ObsTerm(name="dof_vel", dim=1, scale=0.05),
                                  ObsTerm(name="base_ang_vel", dim=3, scale=0.25)), clip=1.0)
    obs = ObservationBuilder(spec=spec).build(_inputs(1, 2.0))
    # dof_vel = 20 * 0.05 = 1.0; gyro = 200 * 0.25 = 50 -> clipped to 1
    np.testing.assert_array_equal(obs, [1.0, 1.0, 1.0, 1.0])


def test_batched_builder_equals_single_builders() -> None:
    spec = asap_actor_spec(23)
    rng = np.random.default_rng(2)
    batch = ObservationBuilder(spec=spec, batch_shape=(3,))
    singles = [ObservationBuilder(spec=spec) for _ in range(3)]
    for step in range(6):
        quat = rng.normal(size=(3, 4))
        quat /= np.linalg.norm(quat, axis=-1, keepdims=True)
        inputs = ObsInputs(q=rng.normal(size=(3, 23)), dq=rng.normal(size=(3, 23)),
                           quat_wxyz=quat, gyro_b=rng.normal(size=(3, 3)),
                           last_action=rng.normal(size=(3, 23)), phase=rng.uniform(size=3),
                           default_q=np.zeros(23))
        if step == 4:
            batch.reset(mask=np.array([False, True, False]))
            singles[1].reset()
        got = batch.build(inputs)
        for i, b in enumerate(singles):
            one = ObsInputs(q=inputs.q[i], dq=inputs.dq[i], quat_wxyz=quat[i], gyro_b=inputs.gyro_b[i],
                            last_action=inputs.last_action[i], phase=inputs.phase[i],
                            default_q=inputs.default_q)
            np.testing.assert_array_equal(got[i], b.build(one))


def test_assemble_is_pure() -> None:
    spec = ObservationSpec(terms=(ObsTerm(name="ref_motion_phase", dim=1, history=2),), clip=None)
    hist = {"ref_motion_phase": np.array([[0.3], [0.2]])}
    np.testing.assert_array_equal(assemble(spec, {}, hist), [0.3, 0.2])


def test_from_motor_order_gathers_by_name() -> None:
    jm = JointMap.from_names(g1.names("asap23"), g1.MOTOR_ORDER)
    q_motor = np.arange(29.0)
    inputs = ObsInputs.from_motor_order(jm, q=q_motor, dq=-q_motor, quat_wxyz=np.array([1.0, 0, 0, 0]),
                                        gyro_b=np.zeros(3), last_action=np.zeros(23), phase=0.0,
                                        default_q=np.zeros(23))
    # asap23 = motor order without wrists (motors 19-21, 26-28): right shoulder pitch is motor 22
    assert inputs.q[19] == 22.0 and inputs.q[18] == 18.0 and inputs.dq[22] == -25.0


def test_motion_phase() -> None:
    assert motion_phase(0, 0.02, 2.0) == 0.0
    assert motion_phase(50, 0.02, 2.0) == pytest.approx(0.5)
    assert motion_phase(150, 0.02, 2.0) == 1.0


def test_the_same_builder_runs_on_torch_tensors() -> None:
    """Training feeds torch tensors through the deploy terms: equal to the numpy observation."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    quat = rng.normal(size=(5, 4))
    quat /= np.linalg.norm(quat, axis=1, keepdims=True)
    arrays = {"q": rng.normal(size=(5, 23)), "dq": rng.normal(size=(5, 23)), "quat_wxyz": quat,
              "gyro_b": rng.normal(size=(5, 3)), "last_action": rng.normal(size=(5, 23)),
              "phase": rng.random(5), "default_q": rng.normal(size=23)}
    spec = asap_actor_spec(23)
    numpy_builder = ObservationBuilder(spec=spec, batch_shape=(5,))
    torch_builder = ObservationBuilder(spec=spec, batch_shape=(5,),
                                       zeros=lambda shape: torch.zeros(shape, dtype=torch.float64))
    for _ in range(3):  # the history shifts too
        expected = numpy_builder.build(ObsInputs(**arrays))
        got = torch_builder.build(ObsInputs(**{k: torch.as_tensor(v) for k, v in arrays.items()}))
        assert isinstance(got, torch.Tensor)
        np.testing.assert_allclose(got.numpy(), expected, atol=1e-12)
