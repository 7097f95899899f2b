"""The reader returns the synthetic episodes' known content and names what is wrong with bad ones."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from asap_core.g1 import MOTOR_ORDER
from asap_core.wire import LOWSTATE
from asap_logger.bag import BagCfg, BagWriter, TopicInfo
from asap_logger.errors import (
    BagNotFoundError,
    ClockJumpError,
    CorruptChunkError,
    DecodeError,
    GapError,
    MissingTopicError,
    SequenceGapError,
)
from asap_logger.msgdefs import load_definition
from asap_logger.reader import match_ticks, open_episode
from asap_logger.testing.bags import T0, Truth, lowstate, record, typestore, write_episode, write_messages


def test_streams_equal_truth(episode: tuple[Path, Truth]) -> None:
    path, truth = episode
    ep = open_episode(path)
    ls = ep.lowstate()
    assert ls.joint_names == MOTOR_ORDER and ls.q.shape == (300, 29)
    np.testing.assert_array_equal(ls.q, truth.lowstate_q)
    np.testing.assert_array_equal(ls.tick, truth.lowstate_tick)
    np.testing.assert_array_equal(ls.t_ns, truth.lowstate_t)
    np.testing.assert_allclose(ls.dq[0], 0.1 * np.arange(29), rtol=1e-6)
    np.testing.assert_allclose(ls.tau_est[0], -0.5 * np.arange(29))
    np.testing.assert_array_equal(ls.imu_quat[5], [1, 0, 0, 0])
    np.testing.assert_allclose(ls.imu_acc[5], [0, 0, 9.81], rtol=1e-6)
    np.testing.assert_array_equal(ls.mode_machine, np.full(300, 5))
    pol = ep.policy()
    np.testing.assert_array_equal(pol.observation, truth.record_obs)
    np.testing.assert_array_equal(pol.tick, truth.record_tick)
    np.testing.assert_array_equal(pol.lowstate_tick, truth.lowstate_tick[::10])
    assert pol.q_target.shape == (30, 29) and pol.mode[0] == 3
    assert pol.policy_sha256.tolist() == ["ab" * 32] * 30
    np.testing.assert_array_equal(pol.stamp_ns, truth.lowstate_t[::10])
    np.testing.assert_array_equal(ep.lowcmd().kp, np.repeat(truth.lowcmd_kp[:, None], 29, axis=1))
    odom = ep.odometry()
    np.testing.assert_allclose(odom.pos, truth.odom_pos)
    np.testing.assert_array_equal(odom.quat[0], [1, 0, 0, 0])  # (w, x, y, z)
    np.testing.assert_array_equal(odom.ang_vel[0], [0, 0, 0.5])
    assert ep.metadata == {"episode_id": "ep"} and ep.issues == []


def test_aligned_on_policy_ticks(episode: tuple[Path, Truth]) -> None:
    ep = open_episode(episode[0])
    data = ep.aligned()
    np.testing.assert_array_equal(data.lowstate.tick, data.policy.lowstate_tick)  # the state the policy saw
    # LowCmd arrives 100 us after each record: the first record has none yet and is dropped
    assert len(data.t) == 29 and data.lowcmd.kp.shape == (29, 29)
    assert np.all(data.lowcmd.t_ns <= data.policy.t_ns) and np.all(data.odometry.t_ns <= data.policy.t_ns)
    grid = ep.aligned(rate_hz=100)
    assert np.allclose(np.diff(grid.t), 0.01)


def test_policy_vectors_are_nan_outside_policy_mode(tmp_path: Path) -> None:
    """The node sends empty vectors on ticks that ran no policy (HOLD, ...): NaN rows, not an error."""
    store = typestore()
    msgs: list = [
        ("/lowstate", T0 + i * 2_000_000, lowstate(store, 1000 + 2 * i, np.zeros(29), mode_machine=6))
        for i in range(4)
    ]
    for k, mode in enumerate([2, 3, 3, 2]):
        vec = np.arange(3, dtype=np.float32) + k if mode == 3 else np.zeros(0, np.float32)
        sha = "ef" * 32 if mode == 3 else ""
        rec = record(
            store, T0, k, 1000 + 2 * k, vec, mode=mode, policy_sha256=sha, action=vec, action_raw=vec
        )
        msgs.append(("/policy/record", T0 + k * 2_000_000 + 1000, rec))
    ep = open_episode(write_messages(tmp_path / "hold", sorted(msgs, key=lambda m: m[1])))
    pol = ep.policy()
    assert pol.action.shape == (4, 3) and pol.observation.shape == (4, 3)
    assert np.isnan(pol.action[[0, 3]]).all() and np.isnan(pol.observation[[0, 3]]).all()
    np.testing.assert_array_equal(pol.action[1:3], [[1, 2, 3], [2, 3, 4]])
    assert pol.policy_sha256.tolist() == ["", "ef" * 32, "ef" * 32, ""]
    np.testing.assert_array_equal(ep.lowstate().mode_machine, [6, 6, 6, 6])
    assert ep.metadata == {"episode_id": "hold"}
    with pytest.raises(DecodeError, match=r"field 'action' changes length between messages: \[0, 3\]"):
        ep.decode("/policy/record", ["action"])  # without a fill value a length change stays an error


def test_match_ticks() -> None:
    np.testing.assert_array_equal(match_ticks(np.array([5, 9, 7]), np.array([7, 8, 5])), [2, -1, 0])
    np.testing.assert_array_equal(match_ticks(np.array([5]), np.array([6]), np.array([3])), [3])


def test_missing_topic_is_named(tmp_path: Path) -> None:
    write_episode(tmp_path / "m", seconds=0.1, skip_topics=("/odometry", "/policy/record"))
    ep = open_episode(tmp_path / "m")
    with pytest.raises(MissingTopicError, match="'/odometry'"):
        ep.odometry()
    with pytest.raises(MissingTopicError, match="'/policy/record'"):
        ep.validate(["/lowstate", "/policy/record"])
    assert ep.aligned().odometry is None


def test_dropped_records_are_counted(tmp_path: Path) -> None:
    write_episode(tmp_path / "d", seconds=0.2, drop_records=(3, 4), skip_topics=("/lowcmd", "/odometry"))
    with pytest.raises(
        SequenceGapError, match=r"/policy/record: 2 message\(s\) missing by tick \(first after tick=2\)"
    ):
        open_episode(tmp_path / "d").aligned()


def _write(
    path: Path,
    times: list[int],
    payload: bytes | None = None,
    ticks: list[int] | None = None,
    sent: list[int] | None = None,
) -> None:
    """LowStates with ``ticks`` (default 0, 1, ...) received at ``times`` and sent at ``sent``
    (default: the receive times, as recorders without send stamps write), or ``payload`` for every
    message."""
    writer = BagWriter(path, BagCfg(fsync=False))
    cid = writer.add_topic(TopicInfo("/lowstate", load_definition("unitree_hg/msg/LowState")))
    image = np.zeros((), dtype=LOWSTATE.dtype)
    for tick, t, t_sent in zip(ticks or range(len(times)), times, sent or times, strict=True):
        image["tick"] = tick
        writer.write(cid, t, t_sent, payload if payload is not None else LOWSTATE.to_cdr(image))
    writer.close()


def test_gaps_and_clock_jumps(tmp_path: Path) -> None:
    _write(tmp_path / "gap", [T0, T0 + 2_000_000, T0 + 302_000_000])
    with pytest.raises(GapError, match=r"/lowstate: no message for 300.0 ms at t=0.002 s"):
        open_episode(tmp_path / "gap").validate(["/lowstate"])
    _write(tmp_path / "jump", [T0, T0 + 2_000_000, T0 - 500_000_000])
    with pytest.raises(ClockJumpError, match=r"/lowstate: receive time goes back by 502.0 ms at message #2"):
        open_episode(tmp_path / "jump").validate(["/lowstate"])
    # a few ms of middleware reordering (seen on loaded hosts) is not a clock jump
    _write(tmp_path / "reorder", [T0, T0 + 20_000_000, T0 + 4_000_000, T0 + 22_000_000])
    open_episode(tmp_path / "reorder").validate(["/lowstate"])


def test_a_sample_stamped_late_by_a_reliable_repair_is_no_jump_but_a_clock_step_is(tmp_path: Path) -> None:
    """500 Hz states sent every 2 ms; tick 100 is lost and repaired 140 ms later, handed over
    first (in tick order) with its late receive stamp, as FastDDS did on a loaded host."""
    sent = [T0 + 2_000_000 * k for k in range(400)]
    received = [t + 100_000 for t in sent]
    received[100] += 140_000_000
    _write(tmp_path / "repair", received, sent=sent)
    ep = open_episode(tmp_path / "repair")
    ep.validate(["/lowstate"])  # neither a gap (others kept arriving) nor a clock jump
    grid = np.array([sent[120] + 1_000_000])  # between ticks 120 and 121, before the late stamp
    data = ep.aligned(rate_hz=500.0, validate=False)
    row = int(np.searchsorted(data.t, (grid[0] - ep.start_ns) * 1e-9))
    assert data.lowstate.tick[row] in (120, 121)  # not the stale tick 99 a running maximum would hold
    # the recorder's clock steps back 300 ms at message 250 (an NTP step); the sender's does not
    stepped = [t - (300_000_000 if k >= 250 else 0) for k, t in enumerate(received)]
    _write(tmp_path / "step", stepped, sent=sent)
    with pytest.raises(ClockJumpError, match=r"receive time goes back by 30\d.\d ms at message #250"):
        open_episode(tmp_path / "step").validate(["/lowstate"])


def test_a_resent_state_is_read_once_and_a_restart_is_a_jump(tmp_path: Path) -> None:
    # the lock-step twin re-sends its sync state (tick 1) while it waits for a late command
    _write(tmp_path / "resend", [T0, T0 + 2_000_000, T0 + 502_000_000, T0 + 504_000_000], ticks=[0, 1, 1, 2])
    ep = open_episode(tmp_path / "resend")
    ep.validate(["/lowstate"], max_gap_s=None)
    assert ep.lowstate().tick.tolist() == [0, 1, 2]
    assert ep.lowstate().t_ns.tolist() == [T0, T0 + 2_000_000, T0 + 504_000_000]  # the first receipt kept
    _write(tmp_path / "restart", [T0, T0 + 2_000_000, T0 + 4_000_000], ticks=[7, 8, 3])
    with pytest.raises(ClockJumpError, match="tick goes from 8 to 3"):
        open_episode(tmp_path / "restart").validate(["/lowstate"], max_gap_s=None)


def test_corrupt_chunk_is_named(episode: tuple[Path, Truth], tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    shutil.copytree(episode[0], bad)
    file = bad / "ep_0.mcap"
    data = bytearray(file.read_bytes())
    data[len(data) // 3] ^= 0xFF
    file.write_bytes(bytes(data))
    with pytest.raises(
        CorruptChunkError, match=r"ep_0.mcap: chunk #\d+ at byte \d+ is corrupt: CRC mismatch"
    ):
        open_episode(bad)


def test_not_a_bag(tmp_path: Path) -> None:
    with pytest.raises(BagNotFoundError):
        open_episode(tmp_path)
    (tmp_path / "x_0.mcap").write_bytes(b"not an mcap file at all")
    with pytest.raises(CorruptChunkError, match="no MCAP magic"):
        open_episode(tmp_path)


def test_truncated_message_is_a_decode_error(tmp_path: Path) -> None:
    _write(tmp_path / "short", [T0, T0 + 1], payload=b"\x00\x01\x00\x00")
    with pytest.raises(DecodeError, match=r"/lowstate: message #0 cannot be decoded"):
        open_episode(tmp_path / "short").lowstate()
