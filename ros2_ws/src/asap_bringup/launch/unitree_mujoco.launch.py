"""ros2 launch asap_bringup unitree_mujoco.launch.py [name:=value ...]: see profiles/unitree_mujoco.yaml."""

from asap_bringup.launch_common import profile_launch_description


def generate_launch_description():
    return profile_launch_description("unitree_mujoco")
