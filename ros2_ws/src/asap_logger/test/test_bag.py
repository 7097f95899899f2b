"""The writer produces rosbag2 MCAP bags that rosbags and the mcap library read back exactly."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from mcap.reader import make_reader
from rosbags.rosbag2 import Reader

from asap_logger import mcap_io
from asap_logger.bag import BagCfg, BagWriter, TopicInfo, qos_profile
from asap_logger.msgdefs import SEPARATOR, load_definition


def _blob(i: int) -> bytes:
    return b"\x00\x01\x00\x00" + i.to_bytes(4, "little") + bytes(range(200))


def _bag(path: Path, n: int, cfg: BagCfg) -> list[bytes]:
    writer = BagWriter(path, cfg, custom_data={"episode_id": "t"})
    # std_msgs/UInt32 layout plus trailing bytes: any bytes are stored untouched
    cid = writer.add_topic(TopicInfo("/x", load_definition("std_msgs/msg/UInt32"), (qos_profile(depth=7),)))
    blobs = [_blob(i) for i in range(n)]
    for i, blob in enumerate(blobs):
        writer.write(cid, 10**18 + i * 2_000_000, 10**18 + i, blob)
    writer.close()
    return blobs


def test_definitions_follow_rosbag2() -> None:
    d = load_definition("asap_msgs/msg/PolicyRecord")
    assert d.text.startswith(Path(_share("asap_msgs", "PolicyRecord.msg")).read_text())
    assert f"\n{SEPARATOR}MSG: std_msgs/Header\n" in d.text
    assert f"\n{SEPARATOR}MSG: builtin_interfaces/Time\n" in d.text
    assert d.type_hash.startswith("RIHS01_") and len(d.type_hash) == 7 + 64
    lowstate = load_definition("unitree_hg/msg/LowState").text
    assert "MSG: unitree_hg/IMUState" in lowstate and "MSG: unitree_hg/MotorState" in lowstate


def _share(pkg: str, name: str) -> str:
    from asap_logger.msgdefs import ament_prefixes

    return next(
        str(p / "share" / pkg / "msg" / name)
        for p in ament_prefixes()
        if (p / "share" / pkg / "msg" / name).exists()
    )


def test_round_trip_rosbags_and_mcap(tmp_path: Path) -> None:
    bag = tmp_path / "b"
    blobs = _bag(bag, 300, BagCfg(fsync=False))
    with Reader(bag) as reader:
        assert [raw for _, _, raw in reader.messages()] == blobs
        (conn,) = reader.connections
        assert conn.msgtype == "std_msgs/msg/UInt32" and conn.ext.offered_qos_profiles[0].depth == 7
    with (bag / "b_0.mcap").open("rb") as fh:
        reader = make_reader(fh, validate_crcs=True)
        assert reader.get_header().profile == "ros2"
        summary = reader.get_summary()
        (schema,) = summary.schemas.values()
        (channel,) = summary.channels.values()
        assert (schema.encoding, channel.message_encoding) == ("ros2msg", "cdr")
        assert set(channel.metadata) == {"offered_qos_profiles", "topic_type_hash"}
        assert [m.name for m in reader.iter_metadata()] == ["asap_episode", "rosbag2"]
        assert [m.data for _, _, m in reader.iter_messages()] == blobs
    meta = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert (meta["version"], meta["storage_identifier"], meta["message_count"]) == (9, "mcap", 300)
    assert meta["topics_with_message_count"][0]["topic_metadata"]["type_description_hash"].startswith(
        "RIHS01_"
    )


def test_split_by_size_and_duration(tmp_path: Path) -> None:
    blobs = _bag(tmp_path / "s", 2000, BagCfg(fsync=False, chunk_bytes=50_000, max_file_bytes=120_000))
    files = sorted(p.name for p in (tmp_path / "s").glob("*.mcap"))
    assert len(files) >= 3
    with Reader(tmp_path / "s") as reader:
        assert [raw for _, _, raw in reader.messages()] == blobs
    _bag(tmp_path / "d", 1000, BagCfg(fsync=False, chunk_bytes=10_000, max_file_duration_s=0.5))
    meta = yaml.safe_load((tmp_path / "d" / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert len(meta["files"]) >= 3 and sum(f["message_count"] for f in meta["files"]) == 1000
    assert all(f["duration"]["nanoseconds"] <= 0.5e9 for f in meta["files"])


def test_chunks_close_by_age(tmp_path: Path) -> None:
    writer = BagWriter(tmp_path / "a", BagCfg(fsync=False, chunk_period_s=0.5))
    cid = writer.add_topic(TopicInfo("/x", load_definition("std_msgs/msg/UInt32")))
    writer.write(cid, 1, 1, _blob(0))
    writer.tick(now=writer._chunk_opened + 0.4)
    assert mcap_io.scan(tmp_path / "a" / "a_0.mcap").message_count == 0
    writer.tick(now=writer._chunk_opened + 0.5)
    assert mcap_io.scan(tmp_path / "a" / "a_0.mcap").message_count == 1  # on disk before close
    writer.close()


def test_writer_refuses_to_overwrite(tmp_path: Path) -> None:
    _bag(tmp_path / "o", 1, BagCfg(fsync=False))
    with pytest.raises(FileExistsError):
        BagWriter(tmp_path / "o", BagCfg())
