"""ros2 launch asap_bringup sim2sim.launch.py [name:=value ...]: see config/profiles/sim2sim.yaml."""

from asap_bringup.launch_common import profile_launch_description


def generate_launch_description():
    return profile_launch_description("sim2sim")
