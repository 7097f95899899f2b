"""Turn a bringup profile into a ROS 2 launch description (needs ``launch`` / ``launch_ros``).

Used by ``launch/*.launch.py`` on a full ROS 2 install (Humble or newer). The node list and
parameters come from :func:`asap_bringup.profile.launch_entries`, and the DDS environment from
:func:`asap_bringup.dds.dds_environment`: the same functions the ``asap-up`` runner uses.
"""

from __future__ import annotations

import os
from pathlib import Path

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, SetEnvironmentVariable
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue

from asap_bringup.dds import dds_environment
from asap_bringup.profile import launch_entries, load_profile


def profile_launch_description(name: str) -> LaunchDescription:
    """Launch arguments + one ``Node`` per profile entry."""
    config_dir = Path(get_package_share_directory("asap_bringup")) / "config"
    profile = load_profile(name, config_dir)

    def typed(arg: str) -> ParameterValue:
        return ParameterValue(LaunchConfiguration(arg), value_type=type(profile.arguments[arg]))

    actions = [SetEnvironmentVariable(k, v) for k, v in dds_environment(os.environ).items()]
    actions += [DeclareLaunchArgument(k, default_value=str(v)) for k, v in profile.arguments.items()]
    for entry in launch_entries(profile, typed):
        condition_argument = entry.pop("condition_argument")
        condition = IfCondition(LaunchConfiguration(condition_argument)) if condition_argument else None
        actions.append(Node(**entry, output="screen", condition=condition))
    return LaunchDescription(actions)
