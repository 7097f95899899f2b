"""ros2 launch asap_bringup robot.launch.py [name:=value ...]: see config/profiles/robot.yaml."""

from asap_bringup.launch_common import profile_launch_description


def generate_launch_description():
    return profile_launch_description("robot")
