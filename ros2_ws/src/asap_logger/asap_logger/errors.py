"""Typed errors of asap_logger. Each names the bag, file, chunk or topic at fault."""

from __future__ import annotations


class LoggerError(Exception):
    """Base class of every error asap_logger raises on purpose."""


class ConfigError(LoggerError):
    """A recorder setting is invalid; raised at configure time, before anything records."""


class DefinitionNotFoundError(LoggerError):
    """No ``.msg`` definition for a message type in the ament prefixes searched."""

    def __init__(self, msgtype: str, searched: list[str]) -> None:
        super().__init__(f"no .msg definition for {msgtype!r} under share/ of {searched}")
        self.msgtype = msgtype


class StorageError(LoggerError):
    """Writing the bag failed (disk full, unwritable directory, ...). Earlier data stays valid."""


class BagError(LoggerError):
    """A bag cannot be read as asked."""


class BagNotFoundError(BagError):
    """The path is not a bag directory or holds no .mcap file."""


class CorruptRecordError(BagError):
    """A record of an .mcap file does not parse: bad length, bad field, not UTF-8, too large."""

    def __init__(self, file: str, offset: int, detail: str, what: str = "record") -> None:
        super().__init__(f"{file}: {what} at byte {offset} is corrupt: {detail}")
        self.file, self.offset, self.detail = file, offset, detail


class CorruptChunkError(CorruptRecordError):
    """A chunk of an .mcap file is damaged: bad CRC, bad length, unknown compression, too large."""

    def __init__(self, file: str, chunk_index: int, offset: int, detail: str) -> None:
        super().__init__(file, offset, detail, what=f"chunk #{chunk_index}")
        self.chunk_index = chunk_index


class TruncatedFileError(BagError):
    """An .mcap file ends in the middle of a record and has no summary (run ``asap-bag reindex``)."""


class MissingTopicError(BagError):
    """A topic the caller needs is not in the episode (or has no messages)."""

    def __init__(self, topic: str, available: list[str]) -> None:
        super().__init__(f"topic {topic!r} is not in the episode; it has {sorted(available)}")
        self.topic = topic


class DecodeError(BagError):
    """A message does not match the layout its schema describes."""

    def __init__(self, topic: str, index: int, detail: str) -> None:
        super().__init__(f"{topic}: message #{index} cannot be decoded: {detail}")
        self.topic, self.index = topic, index


class ValidationError(BagError):
    """Recorded data breaks an expectation (gap, clock jump, dropped sequence numbers)."""


class GapError(ValidationError):
    """Messages of a topic stop for longer than allowed."""

    def __init__(self, topic: str, at_s: float, gap_s: float, limit_s: float) -> None:
        super().__init__(
            f"{topic}: no message for {gap_s * 1e3:.1f} ms at t={at_s:.3f} s (limit {limit_s * 1e3:.1f} ms)"
        )
        self.topic, self.at_s, self.gap_s = topic, at_s, gap_s


class ClockJumpError(ValidationError):
    """Receive times, stamps or ticks of a topic go backwards (a restart, a clock reset)."""

    def __init__(self, topic: str, index: int, detail: str) -> None:
        super().__init__(f"{topic}: {detail} at message #{index}")
        self.topic, self.index = topic, index


class SequenceGapError(ValidationError):
    """A sequence counter (LowState.tick, PolicyRecord.tick) skips values: messages were lost."""

    def __init__(self, topic: str, field: str, missing: int, first_at: int) -> None:
        super().__init__(f"{topic}: {missing} message(s) missing by {field} (first after {field}={first_at})")
        self.topic, self.missing = topic, missing
