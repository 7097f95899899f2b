"""Ingest turns real MCAP episode bags of known content into exactly the rows they hold, and refuses bad ones.

The bags are written by the shared synthetic-bag helper (``asap_logger.testing.bags``): LowState at 500 Hz
with joint values a known function of the state index, odometry at 333 Hz (so "nearest" is not
trivially "same index") with a tilted, turning orientation and a body-frame twist, policy records
at 50 Hz that observed a state older than the newest one.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from asap_core import g1
from asap_core.artifact import PolicyArtifact, load_artifact
from asap_core.testing.policies import constant, write
from asap_logger.testing.bags import T0, lowstate, odometry, record, typestore, write_messages
from asap_testing.ros_free import run_with_ros_blocked
from asap_training.cli.ingest import main
from asap_training.data.dataset import RealDataset
from asap_training.data.ingest import MISSING_MOCAP_FIX, IngestCfg, IngestError, ingest

LS_NS = 2_000_000  # 500 Hz
OD_NS, OD_SHIFT = 3_000_000, 700_000  # 333 Hz, received 0.7 ms after a state
OTHER_SHA = "cd" * 32
TWIN = {"profile": "weak_ankles", "clock_mode": "lockstep", "seed": 3}


def joint_q(i: int) -> np.ndarray:
    return (0.001 * i + 0.01 * np.arange(29)).astype(np.float32)


def joint_dq(i: int) -> np.ndarray:
    return (-0.002 * i + 0.03 * np.arange(29)).astype(np.float32)


def joint_tau(i: int) -> np.ndarray:
    return (0.05 * i - 0.5 * np.arange(29)).astype(np.float32)


def base_quat(m: int) -> np.ndarray:
    """(w, x, y, z) of odometry message ``m``: turning about a tilted axis."""
    x, y, z, w = Rotation.from_rotvec(0.02 * m * np.array([0.2, 0.1, 1.0]) / np.sqrt(1.05)).as_quat()
    return np.array([w, x, y, z])


def base_lin_vel_b(m: int) -> np.ndarray:
    return np.array([1.0 + 0.01 * m, -0.5, 0.1])


def base_ang_vel_b(m: int) -> np.ndarray:
    return np.array([0.1, 0.2, 0.3 + 0.001 * m])


def applied(k: int) -> np.ndarray:
    return (0.01 * k + np.linspace(-1, 1, 23)).astype(np.float32)


def write_bag(
    path: Path,
    sha: str,
    *,
    records: int = 12,
    every: int = 10,
    mode: Callable[[int], int] = lambda k: 3,
    record_sha: Callable[[int], str] | None = None,
    variant: Callable[[int], int] = lambda i: 5,
    drop_records: tuple[int, ...] = (),
    drop_states: tuple[int, ...] = (),
    record_tick: Callable[[int], int] = lambda k: 7 + k,
    skip: tuple[str, ...] = (),
) -> Path:
    """An episode: record ``k`` observed state ``every * k + 1``, was stamped with its receive time and
    received two states later; HOLD records carry empty vectors, as the node sends them."""
    store = typestore()
    n_states = records * every + 4
    msgs = []
    for i in range(n_states):
        if i not in drop_states:
            t = T0 + i * LS_NS
            state = lowstate(
                store, 1000 + 2 * i, joint_q(i), dq=joint_dq(i), tau=joint_tau(i), mode_machine=variant(i)
            )
            msgs.append(("/lowstate", t, state))
    for m in range(n_states * LS_NS // OD_NS):
        t = T0 + m * OD_NS + OD_SHIFT
        pos = np.array([0.01 * m, 0.002 * m, 0.8])
        twist = {"lin_vel": base_lin_vel_b(m), "ang_vel": base_ang_vel_b(m)}
        msgs.append(("/odometry", t, odometry(store, t, pos, quat=base_quat(m), **twist)))
    for k in range(records):
        if k in drop_records:
            continue
        seen = every * k + 1
        policy = mode(k) == 3
        empty = np.zeros(0, np.float32)
        msg = record(
            store,
            T0 + seen * LS_NS,
            record_tick(k),
            1000 + 2 * seen,
            np.zeros(4 if policy else 0, np.float32),
            mode=mode(k),
            policy_sha256=(record_sha or (lambda _: sha))(k),
            action=applied(k) if policy else empty,
            action_raw=applied(k) + 5 if policy else empty,
        )
        msgs.append(("/policy/record", T0 + (seen + 2) * LS_NS + 200_000, msg))
    msgs = [m for m in msgs if m[0] not in skip]
    msgs.sort(key=lambda m: m[1])
    meta = {"policy": {"name": "kick_test", "sha256": sha, "mode": "POLICY"}, "twin": TWIN}
    return write_messages(path, msgs, metadata=meta)


@pytest.fixture(scope="module")
def artifact(tmp_path_factory: pytest.TempPathFactory) -> PolicyArtifact:
    path = write(tmp_path_factory.mktemp("art") / "policy.onnx", constant(23, 0.0), name="kick_test")
    return load_artifact(path)


@pytest.fixture(scope="module")
def main_bag(tmp_path_factory: pytest.TempPathFactory, artifact: PolicyArtifact) -> Path:
    """70 records: 20-24 in HOLD, record 40 lost, the state record 50 observed lost."""
    return write_bag(
        tmp_path_factory.mktemp("bags") / "ep_main",
        artifact.sha256,
        records=70,
        mode=lambda k: 2 if 20 <= k < 25 else 3,
        drop_records=(40,),
        drop_states=(10 * 50 + 1,),
    )


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory, artifact: PolicyArtifact) -> Callable[..., Path]:
    """Small episodes for the refusals: ``small(name, **write_bag kwargs)``."""
    root = tmp_path_factory.mktemp("small")

    def make(name: str, sha: str | None = None, **kw) -> Path:
        return write_bag(root / name, sha or artifact.sha256, **kw)

    return make


def test_rows_equal_the_recorded_state_action_and_mocap(main_bag: Path, artifact: PolicyArtifact) -> None:
    ds = ingest([main_bag], artifact, IngestCfg(mode_machine=5, min_steps=5))
    # cut at the mode change, the lost record and the lost state; names keep the episode id
    runs = {
        "ep_main#0": range(0, 20),
        "ep_main#1": range(25, 40),
        "ep_main#2": range(41, 50),
        "ep_main#3": range(51, 70),
    }
    assert [tr.name for tr in ds.trajectories] == list(runs)
    assert ds.action_joints == artifact.metadata.joint_names and ds.control_dt == 0.02
    assert ds.policy_sha256 == artifact.sha256 and ds.mode_machine == 5
    t_od = T0 + np.arange((70 * 10 + 4) * LS_NS // OD_NS) * OD_NS + OD_SHIFT
    for tr, ks in zip(ds.trajectories, runs.values(), strict=True):
        ks = np.array(ks)
        assert tr.joint_pos.shape == (len(ks), g1.NUM_MOTORS) and tr.action.shape == (len(ks), 23)
        seen = 10 * ks + 1  # the state each tick observed (lowstate_tick), not the newest one
        np.testing.assert_array_equal(tr.joint_pos, [joint_q(i) for i in seen])
        np.testing.assert_array_equal(tr.joint_vel, [joint_dq(i) for i in seen])
        np.testing.assert_array_equal(tr.joint_torque, [joint_tau(i) for i in seen])
        np.testing.assert_array_equal(tr.action, [applied(k) for k in ks])  # applied, not action_raw
        np.testing.assert_allclose(tr.phase, (7 + ks) / 100.0, rtol=1e-6)
        nearest = np.abs(t_od[None, :] - (T0 + seen * LS_NS)[:, None]).argmin(axis=1)
        assert len(set(np.diff(nearest))) > 1  # odometry is not simply every k-th message
        np.testing.assert_allclose(tr.base_pos_w, [[0.01 * m, 0.002 * m, 0.8] for m in nearest])
        np.testing.assert_allclose(tr.base_quat_w, [base_quat(m) for m in nearest], atol=1e-12)
        rot = Rotation.from_quat([np.roll(base_quat(m), -1) for m in nearest])  # scipy wants xyzw
        np.testing.assert_allclose(tr.base_lin_vel_w, rot.apply([base_lin_vel_b(m) for m in nearest]))
        np.testing.assert_allclose(tr.base_ang_vel_w, rot.apply([base_ang_vel_b(m) for m in nearest]))
    assert ds.info["episode_ids"] == ["ep_main"] and ds.info["bags"] == [str(main_bag.resolve())]
    assert ds.info["dynamics_profiles"] == {"ep_main": "weak_ankles"} and ds.info["twin"]["ep_main"] == TWIN
    assert ds.info["policy_name"] == "kick_test"
    assert ds.info["dropped"]["ep_main"] == {"rows": 1, "short_segments": 0}


def test_short_segments_dropped_names_stable(main_bag: Path) -> None:
    ds = ingest([main_bag], cfg=IngestCfg(min_steps=10))
    assert [tr.name for tr in ds.trajectories] == ["ep_main#0", "ep_main#1", "ep_main#3"]
    assert ds.info["dropped"]["ep_main"]["short_segments"] == 1
    # without an artifact: the recorded rate, the stack's 23 policy joints, the recorded policy name
    assert ds.control_dt == 0.02 and ds.action_joints == g1.names("asap23")
    assert ds.info["policy_name"] == "kick_test" and ds.info["artifact"] is None


def test_save_load_keeps_content_and_hash(main_bag: Path, artifact: PolicyArtifact, tmp_path: Path) -> None:
    ds = ingest([main_bag], artifact)
    back = RealDataset.load(ds.save(tmp_path / "d.npz"))
    assert back.sha256 == ds.sha256 and back.info == ds.info
    for a, b in zip(ds.trajectories, back.trajectories, strict=True):
        assert a.name == b.name
        np.testing.assert_array_equal(a.base_lin_vel_w, b.base_lin_vel_w)
        np.testing.assert_array_equal(a.joint_pos, b.joint_pos)
        np.testing.assert_array_equal(a.joint_torque, b.joint_torque)
    # a file written before torques were kept reads without them, and its hash is the one it had then
    old = RealDataset(
        tuple(replace(tr, joint_torque=None) for tr in ds.trajectories), ds.control_dt, ds.action_joints,
        ds.policy_sha256, ds.mode_machine, ds.info,
    )
    back = RealDataset.load(old.save(tmp_path / "old.npz"))
    assert not back.has_torque and ds.has_torque and back.sha256 == old.sha256 != ds.sha256
    with pytest.raises(ValueError, match="joint_torque is"):
        replace(ds.trajectories[0], joint_torque=np.zeros((3, 29)))


def test_several_episodes(main_bag: Path, small: Callable[..., Path], artifact: PolicyArtifact) -> None:
    b = small("ep_b")
    ds = ingest([main_bag, b], artifact)
    assert ds.info["episode_ids"] == ["ep_main", "ep_b"]
    assert ds.trajectories[-1].name == "ep_b#0" and ds.trajectories[-1].num_steps == 12
    with pytest.raises(IngestError, match=r"ep_b: episode ep_b is also .*ep_b"):
        ingest([b, b])


def test_refuses_other_robot_variant(small: Callable[..., Path], artifact: PolicyArtifact) -> None:
    a = small("mm_a")
    with pytest.raises(
        IngestError,
        match=r"mm_in: robot variant \(LowState.mode_machine\) changes within "
        r"the episode: \[5, 6\]",
    ):
        ingest([small("mm_in", variant=lambda i: 6 if i > 50 else 5)])
    with pytest.raises(IngestError, match=r"mm_b: robot variant LowState.mode_machine is 6, .*mm_a has 5"):
        ingest([a, small("mm_b", variant=lambda i: 6)])
    with pytest.raises(IngestError, match=r"mm_a: robot variant LowState.mode_machine is 5, expected 7"):
        ingest([a], artifact, IngestCfg(mode_machine=7))


def test_refuses_other_policy(small: Callable[..., Path], artifact: PolicyArtifact) -> None:
    with pytest.raises(
        IngestError,
        match=r"sha_in: policy artifact .* changes within the episode: "
        rf"\['{artifact.sha256[:12]}', 'cdcdcdcdcdcd'\]",
    ):
        ingest([small("sha_in", record_sha=lambda k: OTHER_SHA if k >= 6 else artifact.sha256)])
    other = small("sha_other", sha=OTHER_SHA)
    with pytest.raises(
        IngestError,
        match=rf"sha_other: recorded policy sha256 cdcdcdcdcdcd differs from "
        rf"{artifact.sha256[:12]}",
    ):
        ingest([small("sha_a"), other])
    with pytest.raises(
        IngestError,
        match=r"sha_other: recorded policy sha256 cdcdcdcdcdcd is not the given "
        r"artifact's .*pass the artifact that ran",
    ):
        ingest([other], artifact)


def test_refuses_missing_streams(small: Callable[..., Path]) -> None:
    with pytest.raises(IngestError, match=r"no_odom: missing mocap: no /odometry messages") as err:
        ingest([small("no_odom", skip=("/odometry",))])
    assert MISSING_MOCAP_FIX in str(err.value)
    with pytest.raises(IngestError, match=r"no_rec: no /policy/record messages .*record the policy node"):
        ingest([small("no_rec", skip=("/policy/record",))])
    with pytest.raises(IngestError, match=r"all_hold: no /policy/record tick in POLICY mode .*'HOLD'"):
        ingest([small("all_hold", mode=lambda k: 2)])


def test_refuses_wrong_rate_and_clock_jumps(small: Callable[..., Path], artifact: PolicyArtifact) -> None:
    with pytest.raises(
        IngestError,
        match=r"slow: policy ticks every 24.00 ms, expected the artifact's "
        r"control_dt 20 ms \(±5%\)",
    ):
        ingest([small("slow", every=12)], artifact)
    with pytest.raises(IngestError, match=r"restart: clock jump: /policy/record: tick goes from 12 to 0"):
        ingest([small("restart", record_tick=lambda k: 7 + k if k < 6 else k - 6)])


def test_cli(
    main_bag: Path,
    small: Callable[..., Path],
    artifact: PolicyArtifact,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "kick.npz"
    main([str(main_bag), "--artifact", str(artifact.path), "--mode-machine", "5", "--out", str(out)])
    text = capsys.readouterr().out
    ds = RealDataset.load(out)
    assert f"1 episode(s), 3 segment(s), {ds.num_steps} steps ({ds.num_steps * 0.02:.1f} s at 50 Hz)" in text
    assert artifact.sha256[:12] in text and ds.sha256[:12] in text and "weak_ankles" in text
    with pytest.raises(SystemExit) as code:
        main([str(small("cli_no_odom", skip=("/odometry",))), "--out", str(tmp_path / "x.npz")])
    assert code.value.code == 2 and "missing mocap" in capsys.readouterr().err
    assert not (tmp_path / "x.npz").exists()
    helped = subprocess.run(
        [sys.executable, "-m", "asap_training.cli.ingest", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "asap-ingest" in helped and "--artifact" in helped and "--mode-machine" in helped


def test_ros_free() -> None:
    run_with_ros_blocked(["asap_training.data.ingest", "asap_training.cli.ingest"])
