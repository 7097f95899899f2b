"""ros2 launch asap_bringup sim2sim_lockstep.launch.py [name:=value ...].

See config/profiles/sim2sim_lockstep.yaml.
"""

from asap_bringup.launch_common import profile_launch_description


def generate_launch_description():
    return profile_launch_description("sim2sim_lockstep")
