"""Data faults in episode bags: damaged MCAP files, a full disk. Issue 16, items 10, 11 and 13.

Each test damages a real bag (written by the recorder's own writer) the way a disk, a crash or a hostile
file would, then checks the safe behaviour: ``asap-bag reindex`` never destroys intact data and says what
was lost; every parse error is a ``BagError`` naming the file and the byte; counts match the bag.
Run alone: ``python -m pytest tests/faults``. The list of faults is in ``tests/faults/README.md``.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import random
import shutil
import struct
import tracemalloc
from pathlib import Path

import pytest
from rosbags.rosbag2 import Reader

from asap_logger import mcap_io
from asap_logger.bag import BagCfg, TopicInfo
from asap_logger.cli import main as asap_bag
from asap_logger.errors import BagError, ConfigError, LoggerError
from asap_logger.msgdefs import load_definition
from asap_logger.reader import open_episode
from asap_logger.recorder import EventKind, Recorder, RecorderCfg
from asap_logger.repair import reindex
from asap_logger.testing.bags import write_episode

SECONDS = 1.0  # 1550 messages in 31 chunks of 64 KiB


@pytest.fixture(scope="module")
def intact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    bag = tmp_path_factory.mktemp("intact") / "ep"
    write_episode(bag, seconds=SECONDS)
    (bag / "episode.json").write_text(json.dumps({"episode_id": "ep", "status": "complete"}))
    return bag


@pytest.fixture
def bag(intact: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "ep"
    shutil.copytree(intact, copy)
    return copy


def _blobs(path: Path) -> dict[str, list[bytes]]:
    ep = open_episode(path)
    return {topic: [bytes(b) for b in ep.raw(topic).blobs] for topic in ep.topics}


def _patch(path: Path, offset: int, data: bytes) -> None:
    raw = bytearray(path.read_bytes())
    raw[offset : offset + len(data)] = data
    path.write_bytes(bytes(raw))


def _cut_summary(path: Path) -> None:
    """What a SIGKILL leaves: the data section without DataEnd, summary and footer."""
    raw = path.read_bytes()
    summary_start = struct.unpack_from("<Q", raw, len(raw) - 8 - 29 + 9)[0]
    path.write_bytes(raw[: summary_start - 13])


# --- item 10: reindex never destroys intact data ------------------------------------------------
def test_a_lying_chunk_length_loses_nothing(bag: Path, intact: Path, capsys) -> None:
    """Issue 16 #10: one corrupt record length made reindex truncate a closed 2 MB bag to 103 of 1550."""
    file = bag / "ep_0.mcap"
    chunk = mcap_io.scan(file).chunks[15]
    _patch(file, chunk.offset + 1, struct.pack("<Q", 2**40))  # the chunk's record length field
    assert asap_bag(["reindex", str(bag)]) == 0
    out = capsys.readouterr().out
    assert "1550 messages" in out and "its length field says" in out
    assert _blobs(bag) == _blobs(intact)  # every message, byte for byte
    assert not list(bag.glob("*.orig"))  # nothing was dropped, so no backup is needed
    with Reader(bag) as reader:  # a proper rosbag2 bag
        assert reader.message_count == 1550 == len(list(reader.messages()))


def test_a_destroyed_chunk_costs_only_that_chunk_and_the_original_is_kept(bag: Path, intact: Path) -> None:
    file = bag / "ep_0.mcap"
    contents = mcap_io.scan(file)
    victim = contents.chunks[10]
    per_topic = ", ".join(f"{contents.channels[c].topic} {n}" for c, n in victim.counts.items() if n)
    _patch(file, victim.offset, b"\xee" * 64)  # opcode, length and header of the chunk: gone
    damaged = hashlib.sha256(file.read_bytes()).hexdigest()
    with pytest.raises(BagError, match=rf"ep_0\.mcap: record at byte {victim.offset} is corrupt"):
        open_episode(bag)  # the strict reader names file and byte
    report = reindex(bag)
    lost = sum(victim.counts.values())
    assert report.message_count == 1550 - lost
    assert any(f"bytes {victim.offset}.." in line for line in report.lost)
    counted = next(line for line in report.lost if "(the summary's counts)" in line)
    assert sorted(counted.split(": ")[-1].split(", ")) == sorted(per_topic.split(", "))
    assert report.backups == ["ep_0.mcap.orig"]
    assert hashlib.sha256((bag / "ep_0.mcap.orig").read_bytes()).hexdigest() == damaged  # untouched
    before, after = _blobs(intact), _blobs(bag)
    assert sum(map(len, after.values())) == 1550 - lost
    for topic, blobs in after.items():
        assert set(blobs) <= set(before[topic])  # only intact messages, none invented
    meta = json.loads((bag / "episode.json").read_text())
    assert meta["message_count"] == 1550 - lost and meta["reindex"]["originals_kept"] == ["ep_0.mcap.orig"]


def test_a_crashed_file_with_damage_mid_file_resynchronizes_by_crc(bag: Path, intact: Path) -> None:
    file = bag / "ep_0.mcap"
    chunks = mcap_io.scan(file).chunks
    _cut_summary(file)  # no footer: nothing indexes the chunks
    _patch(file, chunks[5].offset, b"\xee" * 64)
    (bag / "metadata.yaml").unlink()
    (bag / "episode.json").write_text(json.dumps({"episode_id": "ep", "status": "recording"}))
    report = reindex(bag)
    tail = sum(sum(c.counts.values()) for c in chunks[6:])
    assert report.message_count == sum(sum(c.counts.values()) for c in chunks[:5]) + tail
    meta = json.loads((bag / "episode.json").read_text())
    assert meta["status"] == "recovered" and meta["message_count"] == report.message_count
    assert sum(open_episode(bag).counts.values()) == report.message_count
    assert open_episode(bag).issues == []
    assert reindex(bag).closed_files == []  # idempotent: the repaired file needs nothing


def test_a_crash_cut_is_closed_and_its_partial_record_kept_aside(bag: Path) -> None:
    file = bag / "ep_0.mcap"
    chunks = mcap_io.scan(file).chunks
    _cut_summary(file)
    raw = file.read_bytes()
    file.write_bytes(raw[: chunks[-1].offset + 100])  # killed while writing the last chunk
    report = reindex(bag)
    assert report.closed_files == ["ep_0.mcap"] and report.backups == ["ep_0.mcap.orig"]
    assert report.message_count == 1550 - sum(chunks[-1].counts.values())
    assert (bag / "ep_0.mcap.orig").read_bytes() == raw[: chunks[-1].offset + 100]


def test_a_hostile_metadata_yaml_is_not_followed_out_of_the_bag(bag: Path, intact: Path) -> None:
    outside = bag.parent / "outside_0.mcap"
    shutil.copy(bag / "ep_0.mcap", outside)  # a readable bag file the listing points at, outside the bag
    info = {"rosbag2_bagfile_information": {"relative_file_paths": ["../outside_0.mcap", 5, "/etc/passwd"]}}
    (bag / "metadata.yaml").write_text(json.dumps(info))
    ep = open_episode(bag)
    assert sum(ep.counts.values()) == 1550  # ep_0.mcap once, nothing from outside
    (bag / "metadata.yaml").write_text("rosbag2_bagfile_information: [1, 2]\n")
    assert _blobs(bag) == _blobs(intact)


# --- item 11: every parse error is a BagError naming file and offset; decompression capped -------
def _record_at(path: Path, opcode: int, needle: bytes) -> int:
    """Offset of the first top-level record of ``opcode`` whose bytes contain ``needle``."""
    raw, pos = path.read_bytes(), 8
    while True:
        op, length = struct.unpack_from("<BQ", raw, pos)
        if op == opcode and needle in raw[pos : pos + 9 + length]:
            return pos
        pos += 9 + length


def _schema_not_utf8(file: Path) -> int:
    at = _record_at(file, mcap_io.OP_SCHEMA, b"unitree_hg/msg/LowState")
    _patch(file, at + 9 + 2 + 4, b"\xff\xfe")  # the schema name's first bytes
    return at


def _channel_map_overruns(file: Path) -> int:
    at = _record_at(file, mcap_io.OP_CHANNEL, b"/lowstate")
    raw = file.read_bytes()
    length = struct.unpack_from("<Q", raw, at + 1)[0]
    map_len_at = at + 9 + 4 + 4 + len(b"/lowstate") + 4 + len(b"cdr")
    assert map_len_at < at + 9 + length
    _patch(file, map_len_at, struct.pack("<I", 2**31))
    return at


@pytest.mark.parametrize("damage", [_schema_not_utf8, _channel_map_overruns])
def test_malformed_records_are_bag_errors_naming_file_and_byte(bag: Path, intact: Path, damage) -> None:
    at = damage(bag / "ep_0.mcap")
    with pytest.raises(BagError, match=rf"ep_0\.mcap: record at byte {at} is corrupt"):
        open_episode(bag)
    assert asap_bag(["info", str(bag)]) == 1  # a message on stderr, not a traceback
    assert reindex(bag).backups == ["ep_0.mcap.orig"]
    assert _blobs(bag) == _blobs(intact)  # the summary's copy of the schema / channel stood in


def _one_chunk_file(path: Path, compression: str, body: bytes, claimed: int) -> int:
    """Write an .mcap file: magic, header, one chunk of ``body`` claiming ``claimed`` bytes uncompressed;
    returns the chunk's offset."""
    head = struct.pack("<QQQI", 1, 2, claimed, 0) + mcap_io._s(compression) + struct.pack("<Q", len(body))
    start = mcap_io.MAGIC + mcap_io.record(mcap_io.OP_HEADER, mcap_io._s("ros2") + mcap_io._s("t"))
    path.write_bytes(start + mcap_io.record(mcap_io.OP_CHUNK, head + body))
    return len(start)


def test_a_chunk_claiming_2_to_the_44_bytes_is_refused_before_allocating(tmp_path: Path) -> None:
    import zstandard

    file = tmp_path / "x.mcap"
    at = _one_chunk_file(file, "zstd", zstandard.ZstdCompressor().compress(b"x" * 100), 2**44)
    with pytest.raises(BagError, match=rf"x\.mcap: record at byte {at} is corrupt: claims 17592186044416 "
                                       r"bytes uncompressed, over the reader's limit"):
        mcap_io.scan(file)


def test_the_recorder_never_writes_chunks_its_reader_would_refuse(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"chunk_bytes must be in \(0, 268435456\]"):
        RecorderCfg(output_dir=tmp_path, bag=BagCfg(chunk_bytes=mcap_io.MAX_CHUNK_BYTES + 1))


@pytest.mark.parametrize("compression", ["zstd", "lz4"])
def test_a_decompression_bomb_stops_at_the_size_the_chunk_claims(tmp_path: Path, compression: str) -> None:
    import lz4.frame
    import zstandard

    bomb = (zstandard.ZstdCompressor().compress if compression == "zstd" else lz4.frame.compress)(
        b"\0" * (64 << 20))
    file = tmp_path / "bomb.mcap"
    at = _one_chunk_file(file, compression, bomb, 1000)
    tracemalloc.start()
    try:
        with pytest.raises(BagError, match=rf"bomb\.mcap: chunk #0 at byte {at} is corrupt: more than 1001"):
            mcap_io.scan(file)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, f"decompressing used {peak >> 20} MiB for a chunk that claims 1000 bytes"


def test_random_damage_only_ever_raises_logger_errors(tmp_path: Path) -> None:
    """Seeded fuzzing: bit flips, lying lengths, zeroed runs and cuts in none/zstd/lz4 bags."""
    rng = random.Random(16)
    sources = {}
    for compression in mcap_io.COMPRESSIONS:
        src = tmp_path / f"src_{compression or 'none'}"
        write_episode(src, seconds=0.1, cfg=BagCfg(fsync=False, chunk_bytes=8 << 10, compression=compression))
        sources[compression] = src
    for i in range(45):
        src = sources[rng.choice(mcap_io.COMPRESSIONS)]
        bag = tmp_path / f"b{i}"
        shutil.copytree(src, bag)
        file = bag / f"{src.name}_0.mcap"
        raw = bytearray(file.read_bytes())
        at = rng.randrange(8, len(raw) - 8)
        kind = i % 4
        if kind == 0:
            for _ in range(4):
                raw[rng.randrange(8, len(raw))] ^= 1 << rng.randrange(8)
        elif kind == 1:
            raw[at : at + 8] = struct.pack("<Q", rng.choice([2**44, 2**63, rng.randrange(2**32)]))
        elif kind == 2:
            raw[at : at + 2000] = bytes(len(raw[at : at + 2000]))
        else:
            del raw[at:]
        file.write_bytes(bytes(raw))
        for step in (open_episode, reindex, open_episode):
            try:
                result = step(bag)
                if step is open_episode:
                    for decode in (result.lowstate, result.lowcmd, result.odometry, result.policy):
                        with contextlib.suppress(LoggerError):
                            decode()
            except LoggerError:
                pass


# --- item 13: a failed episode's counts are the bag's ------------------------------------------
def test_a_failed_episode_counts_what_reached_the_disk_also_after_reindex(tmp_path: Path,
                                                                         monkeypatch) -> None:
    """Issue 16 #13: episode.json claimed 1295 messages of which 1110 were in the bag."""
    events = []
    rec = Recorder(RecorderCfg(output_dir=tmp_path, bag=BagCfg(fsync=False, chunk_bytes=4096),
                               writer_period_s=0.01), events.append)
    key = rec.add_topic(TopicInfo("/n", load_definition("std_msgs/msg/UInt32")))
    write, chunks = mcap_io.McapFileWriter._write, []

    def disk_full_at_the_fourth_chunk(self, data: bytes) -> None:
        if data[:1] == bytes([mcap_io.OP_CHUNK]):
            chunks.append(1)
            if len(chunks) > 3:
                raise OSError(errno.ENOSPC, "No space left on device")
        write(self, data)

    monkeypatch.setattr(mcap_io.McapFileWriter, "_write", disk_full_at_the_fourth_chunk)
    _, path = rec.start("full", {})
    for i in range(2000):
        rec.push(key, 10 + i, 0, b"\x00\x01\x00\x00" + i.to_bytes(4, "little"))
    event = rec.stop("done")
    rec.shutdown()
    monkeypatch.undo()
    in_bag = open_episode(path).counts["/n"]
    assert 0 < in_bag < 2000
    meta = json.loads((path / "episode.json").read_text())
    assert event.kind is EventKind.FAILED and event.message_count == in_bag
    assert (meta["status"], meta["message_count"], meta["topics"]) == ("failed", in_bag, {"/n": in_bag})
    reindex(path)
    meta = json.loads((path / "episode.json").read_text())
    assert (meta["status"], meta["message_count"]) == ("failed", open_episode(path).counts["/n"])
