"""The robot's path from artifact to wire, without ROS and without torch: each shipped policy loads, runs a
whole operator sequence through the control tick, and every command encodes to a LowCmd with a valid CRC.

``make test-robot`` runs this on Python 3.10 with ``docker/requirements-robot.txt`` (NumPy 1.26, onnx
1.17, onnxruntime 1.20), where the torch-built test policies of asap_core's own tests cannot be made;
``make test`` runs it on the development pins too.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from asap_core import g1, variants
from asap_core.artifact import load_artifact
from asap_core.control import ControlCfg, Controller, LoadedPolicy, RobotState
from asap_core.modes import Event, Mode
from asap_core.wire import LOWCMD, LOWSTATE, decode_lowstate, encode_lowcmd

POLICIES = sorted((Path(__file__).resolve().parents[2] / "training" / "policies").glob("*/policy.onnx"))


def _lowstate_bytes(q: np.ndarray, tick: int) -> bytes:
    """A LowState on the wire (CRC set), standing in for what the robot publishes."""
    image = np.zeros((), dtype=LOWSTATE.dtype)
    image["motor_state"]["q"][: g1.NUM_MOTORS] = q
    image["imu_state"]["quaternion"] = (1.0, 0.0, 0.0, 0.0)
    image["mode_machine"], image["tick"] = variants.SIM_MODE_MACHINE, tick
    image["crc"] = LOWSTATE.crc(image)
    return LOWSTATE.to_cdr(image)


def test_there_are_shipped_policies() -> None:
    assert len(POLICIES) >= 2  # arm_swing and its variant for Unitree's simulator


@pytest.mark.parametrize("path", POLICIES, ids=lambda p: p.parent.name)
def test_shipped_policy_runs_the_operator_sequence_and_encodes_valid_lowcmds(path: Path) -> None:
    artifact = load_artifact(path)
    policy = LoadedPolicy(artifact)
    session = ort.InferenceSession(artifact.model_bytes, providers=["CPUExecutionProvider"])  # raw baseline
    cfg = ControlCfg(ramp_s=0.1)
    controller = Controller(cfg, policy)
    q = g1.default_pose(g1.MOTOR_ORDER, "asap") + 0.05  # off the default pose: RAMP has work to do
    modes, tick = [], 0

    def step(requests: tuple[Event, ...] = ()):
        nonlocal tick
        tick += 1
        state = decode_lowstate(_lowstate_bytes(q, tick))
        assert state.crc_ok and state.tick == tick
        out = controller.tick(RobotState.from_lowstate(state), 0.001, requests)
        modes.append(out.mode)
        cmd = out.command
        wire = encode_lowcmd(mode_machine=state.mode_machine, q=cmd.q, kp=cmd.kp, kd=cmd.kd)
        image = LOWCMD.from_cdr(wire)
        assert int(image["crc"]) == LOWCMD.crc(image)
        np.testing.assert_array_equal(image["motor_cmd"]["q"][: g1.NUM_MOTORS], cmd.q.astype(np.float32))
        assert np.isfinite(cmd.q).all() and np.isfinite(cmd.kp).all() and np.isfinite(cmd.kd).all()
        return out

    step((Event.REQUEST_RAMP,))
    while controller.mode is Mode.RAMP:
        step()
    q = g1.default_pose(g1.MOTOR_ORDER, "asap")  # the robot followed the ramp
    assert step().mode is Mode.HOLD
    out = step((Event.REQUEST_POLICY,))
    assert out.mode is Mode.POLICY, out.results
    for _ in range(20):
        (raw,) = session.run([artifact.metadata.onnx_output],
                             {artifact.metadata.onnx_input: out.observation[None].astype(np.float32)})
        np.testing.assert_allclose(out.action_raw, raw[0], rtol=1e-6, atol=1e-6)
        assert out.observation.shape == (artifact.metadata.observation.dim,)
        out = step()
    assert modes[0] is Mode.RAMP and Mode.HOLD in modes and modes[-1] is Mode.POLICY
    assert 0.0 < out.phase < 1.0
