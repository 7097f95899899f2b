"""Fault injection without ROS (issue 16, items 1-6): asap_core and the node's loader, in-process.

The same faults as ``test_policy_faults.py`` at the layer that decides: the artifact reader
(hostile metadata, special files, source rules), the LowCmd encoder, the control tick (the DAMPING
latch, swap guards, the torque clamp, the output shape) and the loader (one at a time, timeout).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pytest

from asap_core import g1, remote
from asap_core.artifact import (
    ArtifactError,
    ContractMismatchError,
    SourceRefusedError,
    SourceRules,
    load_artifact,
    sha256_of,
)
from asap_core.control import ControlCfg, Controller, LoadedPolicy, MotorCommand, RobotState
from asap_core.modes import COMBOS, Event, Mode
from asap_core.testing import policies
from asap_core.wire import NonFiniteCommandError, encode_lowcmd
from asap_policy import params
from asap_policy.loader import LoaderCfg, LoadRefusedError, PolicyLoader

N = 23
MOTORS = g1.MOTOR_ORDER
DEFAULT = g1.default_pose(MOTORS, "asap")
KNEE = MOTORS.index("left_knee_joint")
TILTED = (np.cos(0.6), np.sin(0.6), 0.0, 0.0)  # 1.2 rad roll: over max_tilt_rad


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("core_faults")
    base = policies.write(d / "zero.onnx", policies.constant(N, 0.0), motion_s=5.0)

    def knees(key: str, value) -> Path:
        def edit(data: dict) -> None:
            for name in ("left_knee_joint", "right_knee_joint"):
                i = g1.names("asap23").index(name)
                data[key][i] = value(data[key][i])
        return policies.with_metadata(base, d / f"{key}.onnx", edit)

    return {"zero": base, "far": knees("default_joint_pos", lambda q: q + 1.7),
            "stiff": knees("kp", lambda kp: 2 * kp),
            "grows": policies.write(d / "grows.onnx", policies.output_grows_after(N, 0.5), motion_s=0.4),
            "slow": policies.write(d / "slow.onnx", policies.slow(N), name="slow")}


def state(q: np.ndarray | None = None, dq: np.ndarray | None = None, buttons: tuple[str, ...] = (),
          quat: tuple = (1.0, 0.0, 0.0, 0.0)) -> RobotState:
    return RobotState(q=DEFAULT.copy() if q is None else q, dq=np.zeros(29) if dq is None else dq,
                      quat_wxyz=np.array(quat), gyro_b=np.zeros(3),
                      remote=remote.decode(remote.encode(keys=remote.keys_mask(*buttons))), mode_machine=5)


def controller_in(mode: Mode, files: dict[str, Path]) -> Controller:
    ramp_s = 60.0 if mode is Mode.RAMP else 0.02  # a one-tick ramp ends in HOLD at once
    c = Controller(ControlCfg(ramp_s=ramp_s), LoadedPolicy(load_artifact(files["zero"])))
    steps = {Mode.ZERO_TORQUE: [], Mode.RAMP: [Event.REQUEST_RAMP], Mode.HOLD: [Event.REQUEST_RAMP, None],
             Mode.POLICY: [Event.REQUEST_RAMP, None, Event.REQUEST_POLICY]}[mode]
    for event in steps:
        c.tick(state(), 0.001, [event] if event else [])
    assert c.mode is mode
    return c


# -- item 1: hostile metadata and files ---------------------------------------------------------

@pytest.mark.parametrize(("edit", "words"), [
    (lambda d: d["motion"].update(length_s="2.0"), ["motion.length_s", "expected a number, got str"]),
    (lambda d: d.update(name=123), ["name", "expected a string, got int"]),
    (lambda d: d.update(name="bad\u0000name"), ["name", "control characters"]),
    (lambda d: d.update(name="x" * 300), ["name", "0..256 characters"]),
    (lambda d: d.update(control_dt=True), ["control_dt", "expected a number, got bool"]),
    (lambda d: d.update(control_dt=5.0), ["control_dt", "(0, 1.0]"]),
    (lambda d: d.update(action_clip="100"), ["action_clip", "expected a number"]),
    (lambda d: d["joint_names"].__setitem__(0, 7), ["joint_names[0]", "expected a string"]),
    (lambda d: d.update(kp=d["kp"] * 3), ["kp", "at most 29"]),
    (lambda d: d["observation"]["terms"][0].update(dim="23"), ["terms[0].dim", "expected an integer"]),
    (lambda d: d["observation"]["terms"][0].update(dim=23.0), ["terms[0].dim", "expected an integer"]),
    (lambda d: d["observation"]["terms"][-1].update(history=20_000_000), ["history", "[0, 64]"]),
    (lambda d: d["observation"].update(terms=d["observation"]["terms"] * 6), ["terms", "at most 64"]),
    (lambda d: d["observation"]["terms"].extend(
        [{"name": "dof_pos", "dim": 23, "history": 64}] * 3), ["observation", "MAX_OBS_DIM 4096"]),
    (lambda d: d.update(provenance={"training_run": ["x"]}), ["provenance.training_run", "string"]),
    (lambda d: d.update(motion=[1, 2]), ["motion", "expected an object"]),
    (lambda d: d["kp"].__setitem__(3, 1e6), ["kp", "left_knee_joint=1e+06", "gain ceiling"]),
    (lambda d: d["kd"].__setitem__(3, 500.0), ["kd", "left_knee_joint", "gain ceiling"]),
    (lambda d: d.update(action_scale=[100.0] * 23), ["action_scale", "MAX_ACTION_SCALE"]),
])
def test_hostile_metadata_is_refused_naming_the_field(files: dict, tmp_path: Path, edit, words) -> None:
    bad = policies.with_metadata(files["zero"], tmp_path / "bad.onnx", edit)
    with pytest.raises(ContractMismatchError) as info:
        load_artifact(bad)
    for w in words:
        assert w in str(info.value), str(info.value)


def test_duplicate_metadata_keys_are_refused(files: dict, tmp_path: Path) -> None:
    bad = policies.with_metadata_text(files["zero"], tmp_path / "dup.onnx",
                                      lambda t: t.replace('"kp": ', '"kp": [], "kp": ', 1))
    with pytest.raises(ArtifactError, match="kp: duplicate key"):
        load_artifact(bad)


def test_special_files_are_refused_without_reading_them(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo.onnx")
    for path in (tmp_path / "fifo.onnx", tmp_path, Path("/dev/zero")):
        with pytest.raises(SourceRefusedError, match="not a regular file"):
            load_artifact(path)
    (tmp_path / "big.onnx").write_bytes(b"\0" * 2000)
    with pytest.raises(SourceRefusedError, match="larger than 1000 bytes"):
        load_artifact(tmp_path / "big.onnx", SourceRules(max_bytes=1000))


def test_policy_dir_confines_by_real_path(files: dict, tmp_path: Path) -> None:
    inside, outside = tmp_path / "policies", tmp_path / "elsewhere"
    inside.mkdir()
    outside.mkdir()
    (inside / "ok.onnx").write_bytes(files["zero"].read_bytes())
    (outside / "evil.onnx").write_bytes(files["zero"].read_bytes())
    (inside / "link.onnx").symlink_to(outside / "evil.onnx")
    rules = SourceRules(policy_dir=str(inside))
    assert load_artifact(inside / "ok.onnx", rules).metadata.num_joints == N
    for escape in (inside / "link.onnx", inside / ".." / "elsewhere" / "evil.onnx"):
        with pytest.raises(SourceRefusedError, match="outside policy_dir"):
            load_artifact(escape, rules)


def test_sha256_allowlist(files: dict) -> None:
    sha = sha256_of(files["zero"].read_bytes())
    assert load_artifact(files["zero"], SourceRules(allowed_sha256=frozenset({sha}))).sha256 == sha
    with pytest.raises(SourceRefusedError, match="not in the allow-list"):
        load_artifact(files["zero"], SourceRules(allowed_sha256=frozenset({"0" * 64})))


def test_node_parameters_set_the_source_rules(files: dict, tmp_path: Path) -> None:
    sha = sha256_of(files["zero"].read_bytes())
    v = params.validate({"policy_dir": str(files["zero"].parent), "policy_max_mb": 2.0,
                         "policy_sha256_allowlist": f" {sha.upper()},"})
    rules = params.loader_cfg(v, 0.02).rules
    assert rules == SourceRules(max_bytes=2 * 2**20, policy_dir=str(files["zero"].parent),
                                allowed_sha256=frozenset({sha}))
    with pytest.raises(ValueError, match="policy_sha256_allowlist"):
        params.validate({"policy_sha256_allowlist": "deadbeef"})


# -- item 2: loads one at a time, with a timeout -------------------------------------------------

def test_loads_run_one_at_a_time_and_time_out(files: dict) -> None:
    loader = PolicyLoader(LoaderCfg(control_dt=0.02, timeout_s=0.3), lambda: state())
    try:
        with pytest.raises(LoadRefusedError, match=r"longer than 0\.3 s"):
            loader.load(str(files["slow"]))  # seconds of warm-up
        with pytest.raises(LoadRefusedError, match="busy: still loading"):
            loader.load(str(files["zero"]))
    finally:
        loader.close()
    patient = PolicyLoader(LoaderCfg(control_dt=0.02, timeout_s=60.0), lambda: state())
    results: list[str] = []

    def load(name: str) -> None:
        try:
            results.append(patient.load(str(files[name])).artifact.metadata.name)
        except LoadRefusedError as e:
            results.append(str(e))

    first = threading.Thread(target=load, args=("slow",))
    first.start()
    while not patient._slot.locked():
        pass
    load("zero")
    first.join()
    assert "busy" in results[0] and "too slow" in results[1], results
    assert patient.load(str(files["zero"])).artifact.metadata.name == "test"  # free again
    patient.close()


# -- item 3: nothing non-finite on the wire ------------------------------------------------------

@pytest.mark.parametrize("field", ["q", "dq", "tau", "kp", "kd"])
@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf, 1e39])  # 1e39 overflows float32
def test_the_encoder_refuses_non_finite_fields(field: str, value: float) -> None:
    arrays = {f: np.zeros(29) for f in ("q", "dq", "tau", "kp", "kd")}
    arrays[field][KNEE] = value
    with pytest.raises(NonFiniteCommandError, match=field):
        encode_lowcmd(mode_machine=5, **arrays)


def test_damping_carries_a_finite_q_on_a_broken_state() -> None:
    q = DEFAULT.copy()
    q[KNEE], q[0] = np.nan, np.inf
    cmd = MotorCommand.damping(8.0, q)
    assert np.isfinite(cmd.q).all() and cmd.q[KNEE] == 0.0 and cmd.q[1] == DEFAULT[1]
    encode_lowcmd(mode_machine=5, q=cmd.q, kp=cmd.kp, kd=cmd.kd)  # goes through


def test_a_nan_state_damps_with_a_command_the_encoder_accepts(files: dict) -> None:
    c = controller_in(Mode.HOLD, files)
    q = DEFAULT.copy()
    q[KNEE] = np.nan
    out = c.tick(state(q), 0.001)
    assert out.mode is Mode.DAMPING and "non-finite" in out.fault
    encode_lowcmd(mode_machine=5, q=out.command.q, kp=out.command.kp, kd=out.command.kd)


# -- item 4: the DAMPING latch -------------------------------------------------------------------

@pytest.mark.parametrize("mode", [Mode.RAMP, Mode.HOLD, Mode.POLICY])
@pytest.mark.parametrize("request_", [e for e in Event if e.value <= Event.RESET.value])
def test_a_request_in_the_tick_that_latches_a_fault_is_dropped(files: dict, mode: Mode,
                                                                request_: Event) -> None:
    c = controller_in(mode, files)
    out = c.tick(state(quat=TILTED), 0.001, [request_])
    assert out.mode is Mode.DAMPING and c.mode is Mode.DAMPING and "tilt" in out.fault
    assert out.command.kd.min() > 0 and not out.command.kp.any()
    if request_ is not Event.REQUEST_DAMPING:
        assert not out.results[0].accepted and "dropped: DAMPING latched" in out.results[0].reason
    assert c.tick(state(), 0.001).mode is Mode.DAMPING  # latched: the next tick damps too


@pytest.mark.parametrize("buttons", [b for b, _ in COMBOS[1:]])
def test_a_remote_combo_in_the_tick_that_latches_a_fault_is_dropped(files: dict, buttons) -> None:
    c = controller_in(Mode.POLICY, files)
    out = c.tick(state(buttons=buttons, quat=TILTED), 0.001)
    assert out.mode is Mode.DAMPING and out.command.kd.min() > 0, buttons


def test_a_reset_queued_with_the_estop_is_dropped_even_when_already_damped(files: dict) -> None:
    c = controller_in(Mode.HOLD, files)
    c.tick(state(buttons=("L2", "B")), 0.001)
    out = c.tick(state(buttons=("L2", "B")), 0.001, [Event.RESET])  # e-stop still held
    assert out.mode is Mode.DAMPING and "dropped" in out.results[0].reason


# -- item 5: hot-swap guards and the torque clamp ------------------------------------------------

def test_a_swap_in_policy_far_from_its_default_pose_is_refused(files: dict) -> None:
    c = controller_in(Mode.POLICY, files)
    running = c.policy
    c.stage(LoadedPolicy(load_artifact(files["far"])))
    out = c.tick(state(), 0.001)
    assert "refused in POLICY" in out.swap and "knee" in out.swap
    assert c.policy is running and out.mode is Mode.POLICY


def test_a_swap_in_hold_blends_gains_over_the_swap_ticks(files: dict) -> None:
    c = controller_in(Mode.HOLD, files)
    c.stage(LoadedPolicy(load_artifact(files["stiff"])), blend_ticks=4)
    kp = [c.tick(state(), 0.001).command.kp[KNEE] for _ in range(5)]
    np.testing.assert_allclose(kp, [250.0, 300.0, 350.0, 400.0, 400.0])


def test_the_clamp_leaves_the_stiffness_only_what_damping_leaves(files: dict) -> None:
    c = controller_in(Mode.HOLD, files)
    pushed, dq = DEFAULT.copy(), np.zeros(29)
    pushed[KNEE] += 0.5  # knee (139 N m, kp 200, kd 5) pushed 0.5 rad, moving at 10 rad/s
    dq[KNEE] = 10.0
    out = c.tick(state(pushed, dq), 0.001)
    assert out.command.q[KNEE] == pytest.approx(pushed[KNEE] - (139.0 - 5.0 * 10.0) / 200.0)


# -- item 6: the output shape on every tick, the dry run ----------------------------------------

def test_an_output_shape_change_mid_motion_damps_in_that_tick(files: dict) -> None:
    c = Controller(ControlCfg(ramp_s=0.02), LoadedPolicy(load_artifact(files["grows"])))
    c.tick(state(), 0.001, [Event.REQUEST_RAMP])
    c.tick(state(), 0.001)
    out = c.tick(state(), 0.001, [Event.REQUEST_POLICY])
    while out.mode is Mode.POLICY:
        out = c.tick(state(), 0.001)
    assert out.mode is Mode.DAMPING and out.fault.startswith("policy output shape [1, 46]")
    assert 0.5 < out.phase < 0.6


def test_the_dry_run_checks_the_real_shape_and_the_time_budget(files: dict, tmp_path: Path) -> None:
    wide = policies.write(tmp_path / "wide.onnx", policies.output_grows_after(N, -1.0))
    with pytest.raises(Exception, match=r"output shape \[1, 46\]"):
        LoadedPolicy(load_artifact(wide))  # the warm-up runs it
    assert LoadedPolicy(load_artifact(files["grows"])).dry_run(state(), 0.01) == ""
    assert "too slow" in LoadedPolicy(load_artifact(files["slow"]), ).dry_run(state(), 0.01)
