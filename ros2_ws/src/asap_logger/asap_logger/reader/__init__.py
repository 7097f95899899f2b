"""ROS-free episode reader: ``open_episode(path)`` -> typed, time-aligned numpy arrays.

Imports neither rclpy nor any message package (a test runs it with them blocked), so training
and analysis ingest bags on any machine with numpy, mcap's record format and rosbags' parser.
"""

from asap_logger.reader.episode import (
    AlignedEpisode,
    Episode,
    LowCmdArrays,
    LowStateArrays,
    OdometryArrays,
    PolicyArrays,
    TopicNames,
    match_ticks,
    open_episode,
)

__all__ = [
    "AlignedEpisode",
    "Episode",
    "LowCmdArrays",
    "LowStateArrays",
    "OdometryArrays",
    "PolicyArrays",
    "TopicNames",
    "match_ticks",
    "open_episode",
]
