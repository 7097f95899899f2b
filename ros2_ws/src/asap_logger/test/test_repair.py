"""A bag cut off by a crash reads up to its last chunk, and ``asap-bag reindex`` makes it whole."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
from rosbags.rosbag2 import Reader

from asap_logger.cli import main as asap_bag
from asap_logger.reader import open_episode
from asap_logger.testing.bags import Truth


def _crash_copy(src: Path, dst: Path, cut: int) -> None:
    """What a SIGKILL leaves: the first file without its summary (plus a partial record), no metadata.yaml."""
    dst.mkdir()
    data = (src / "ep_0.mcap").read_bytes()
    footer = len(data) - 8 - 29  # Footer record: opcode, length, summary_start, summary_offset_start, crc
    summary_start = int.from_bytes(data[footer + 9 : footer + 17], "little")
    (dst / "ep_0.mcap").write_bytes(data[: summary_start - 13 - cut])  # also drop the DataEnd record
    (dst / "episode.json").write_text(json.dumps({"episode_id": "ep", "status": "recording"}))


def test_crashed_bag_reads_and_reindexes(episode: tuple[Path, Truth], tmp_path: Path, capsys) -> None:
    src, truth = episode
    crashed = tmp_path / "ep"
    _crash_copy(src, crashed, cut=20_000)  # past the rosbag2 metadata record, into the last chunk
    ep = open_episode(crashed)
    assert any("not closed" in issue for issue in ep.issues)
    n = ep.counts["/lowstate"]
    assert 0 < n < len(truth.lowstate_tick)
    np.testing.assert_array_equal(ep.lowstate().tick, truth.lowstate_tick[:n])  # a prefix, intact

    assert asap_bag(["reindex", str(crashed)]) == 0
    assert "closed: ep_0.mcap" in capsys.readouterr().out
    with Reader(crashed) as reader:  # a proper rosbag2 bag again
        assert reader.message_count == sum(open_episode(crashed).counts.values())
        assert len(list(reader.messages())) == reader.message_count
    assert json.loads((crashed / "episode.json").read_text())["status"] == "recovered"
    assert open_episode(crashed).issues == []
    assert asap_bag(["reindex", str(crashed)]) == 0  # idempotent
    assert asap_bag(["info", str(crashed)]) == 0


def test_reindex_reports_a_missing_bag(tmp_path: Path, capsys) -> None:
    assert asap_bag(["reindex", str(tmp_path / "nope")]) == 1
    assert "not a directory" in capsys.readouterr().err


def test_reindex_restores_a_deleted_metadata_yaml(episode: tuple[Path, Truth], tmp_path: Path) -> None:
    copy = tmp_path / "ep"
    shutil.copytree(episode[0], copy)
    (copy / "metadata.yaml").unlink()
    assert asap_bag(["reindex", str(copy)]) == 0
    assert (copy / "metadata.yaml").read_text() == (episode[0] / "metadata.yaml").read_text()
