#!/usr/bin/env bash
# Entry point of the asap images: enter the environment, then run a bringup profile or the given command.
#   (no arguments) or name:=value ...  ->  the $ASAP_PROFILE profile with those arguments:
#       `ros2 launch asap_bringup <profile>.launch.py` where ROS 2 is installed (robot image),
#       the asap-up runner otherwise (sim image: ROS 2 from PyPI wheels, no ros2 launch)
#   anything else                       ->  run it (e.g. bash, ros2 topic list, asap-bag info ...)
set -eo pipefail
if [ -f "/opt/ros/${ROS_DISTRO:-humble}/setup.bash" ]; then
  # shellcheck disable=SC1090
  source "/opt/ros/${ROS_DISTRO:-humble}/setup.bash"
  # shellcheck disable=SC1091
  source /opt/asap/ros2_ws/install/setup.bash
  launcher=(ros2 launch asap_bringup "${ASAP_PROFILE:-robot}.launch.py")
else
  # shellcheck disable=SC1091
  source /opt/asap/scripts/env.sh
  launcher=(python -m asap_bringup.runner "${ASAP_PROFILE:-sim2sim}")
fi
if [ $# -eq 0 ] || [[ "$1" == *:=* ]]; then
  exec "${launcher[@]}" "$@"
fi
exec "$@"
