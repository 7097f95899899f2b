"""The ROS-free recorder core: episodes, ordering, failure without crashing, auto-mode rules."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest

from asap_logger.bag import BagCfg, BagWriter, TopicInfo
from asap_logger.errors import ConfigError, StorageError
from asap_logger.msgdefs import load_definition
from asap_logger.reader import open_episode
from asap_logger.recorder import EventKind, Recorder, RecorderCfg, auto_action, episode_id

UINT32 = load_definition("std_msgs/msg/UInt32")


def _msg(i: int) -> bytes:
    return b"\x00\x01\x00\x00" + i.to_bytes(4, "little")


@pytest.fixture
def recorder(tmp_path: Path):
    events = []
    rec = Recorder(
        RecorderCfg(output_dir=tmp_path, bag=BagCfg(fsync=False), writer_period_s=0.01), events.append
    )
    rec.events = events
    yield rec
    rec.shutdown()


def test_episode_holds_exactly_what_was_pushed_while_open(recorder: Recorder) -> None:
    key = recorder.add_topic(TopicInfo("/n", UINT32))
    recorder.push(key, 1, 1, _msg(0))  # before the episode: not recorded
    eid, path = recorder.start("my run!", {"user": {"note": "x"}, "start_reason": "test"})
    assert eid.endswith("_my-run")
    for i in range(1, 501):
        recorder.push(key, 1000 + i, i, _msg(i))
    late = recorder.add_topic(TopicInfo("/late", UINT32))  # appears mid-episode
    recorder.push(late, 2000, 0, _msg(7))
    event = recorder.stop("done")
    recorder.push(key, 3000, 0, _msg(999))  # after: not recorded
    assert (event.kind, event.message_count, event.reason) == (EventKind.STOPPED, 501, "done")
    ep = open_episode(path)
    assert ep.counts == {"/n": 500, "/late": 1}
    assert [bytes(b) for b in ep.raw("/n").blobs] == [_msg(i) for i in range(1, 501)]
    meta = json.loads((path / "episode.json").read_text())
    assert (meta["status"], meta["stop_reason"], meta["start_reason"]) == ("complete", "done", "test")
    assert meta["topics"] == {"/n": 500, "/late": 1} and meta["user"] == {"note": "x"}
    assert [e.kind for e in recorder.events] == [EventKind.STARTED, EventKind.STOPPED]


def test_one_episode_at_a_time(recorder: Recorder) -> None:
    recorder.start("a", {})
    with pytest.raises(StorageError, match="still recording"):
        recorder.start("b", {})
    recorder.stop("x")
    with pytest.raises(StorageError, match="no episode"):
        recorder.stop("again")
    _, second = recorder.start("a", {})  # same name, same second: a distinct directory
    recorder.stop("x")
    assert len(list(second.parent.iterdir())) == 2


def test_write_error_fails_the_episode_not_the_recorder(recorder: Recorder, monkeypatch) -> None:
    key = recorder.add_topic(TopicInfo("/n", UINT32))
    _, first = recorder.start("first", {})
    recorder.push(key, 1, 1, _msg(1))
    recorder.stop("ok")
    original = BagWriter.write
    calls = []

    def full_disk(self, *args) -> None:
        calls.append(1)
        if len(calls) > 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        original(self, *args)

    monkeypatch.setattr(BagWriter, "write", full_disk)
    _, second = recorder.start("second", {})
    for i in range(10):
        recorder.push(key, 10 + i, 0, _msg(i))
    event = recorder.stop("after failure")
    assert event.kind is EventKind.FAILED and "No space left on device" in event.reason
    assert "No space left on device" in recorder.status().last_error
    assert json.loads((second / "episode.json").read_text())["status"] == "failed"
    assert open_episode(first).counts == {"/n": 1}  # earlier episode untouched
    monkeypatch.setattr(BagWriter, "write", original)
    recorder.start("third", {})  # the recorder lives on
    assert recorder.stop("ok").kind is EventKind.STOPPED
    assert recorder.status().last_error == ""


def test_refuses_to_start_without_space_or_directory(tmp_path: Path) -> None:
    cfg = RecorderCfg(output_dir=tmp_path, min_free_bytes=1 << 62)
    rec = Recorder(cfg, lambda e: None)
    with pytest.raises(StorageError, match=r"MiB free in .*, need"):
        rec.start("x", {})
    assert "MiB free" in rec.status().last_error
    rec.shutdown()
    (tmp_path / "file").write_text("")
    rec = Recorder(RecorderCfg(output_dir=tmp_path / "file" / "sub"), lambda e: None)
    with pytest.raises(StorageError, match="cannot start episode"):
        rec.start("x", {})
    rec.shutdown()


def test_config_is_checked() -> None:
    with pytest.raises(ConfigError, match="compression"):
        RecorderCfg(output_dir=Path("."), bag=BagCfg(compression="gzip"))
    with pytest.raises(ConfigError, match="chunk_period_s"):
        RecorderCfg(output_dir=Path("."), bag=BagCfg(chunk_period_s=0))


@pytest.mark.parametrize(
    ("previous", "mode", "action"),
    [
        (None, 3, "start"),
        (2, 3, "start"),
        (3, 3, None),
        (3, 4, "stop"),
        (3, 2, "stop"),
        (None, 2, None),
        (4, 0, None),
    ],
)
def test_auto_mode_follows_policy_runs(previous: int | None, mode: int, action: str | None) -> None:
    assert auto_action(previous, mode) == action


def test_episode_ids_are_filesystem_safe() -> None:
    assert episode_id("kick / jump #3", 0.0) == "19700101-000000_kick-jump-3"
    assert episode_id("", 0.0) == "19700101-000000_episode"
