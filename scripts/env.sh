# Enter the asap development environment:  source scripts/env.sh
# Activates .venv (ROS 2 Kilted from PyPI wheels) and overlays the colcon-built ros2_ws.
# colcon's own install/setup.bash does not expose this prefix layout (see ENVIRONMENT.md), so
# every package's python path, libraries and ament prefix are added here explicitly.

_asap_root="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")/.." && pwd)"
if [ ! -x "$_asap_root/.venv/bin/python" ]; then
  echo "asap: no .venv yet; run 'make setup' first" >&2
  return 1 2>/dev/null || exit 1
fi
# shellcheck disable=SC1091
. "$_asap_root/.venv/bin/activate"
export ASAP_ROOT="$_asap_root"
export AMENT_PREFIX_PATH="$VIRTUAL_ENV${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
export CMAKE_PREFIX_PATH="$VIRTUAL_ENV${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
for _pkg in "$_asap_root"/ros2_ws/install/*/; do
  [ -d "$_pkg" ] || continue
  _pkg="${_pkg%/}"
  export AMENT_PREFIX_PATH="$_pkg:$AMENT_PREFIX_PATH"
  [ -d "$_pkg/lib" ] && export LD_LIBRARY_PATH="$_pkg/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # the packages' console scripts (asap-up, asap-push, asap-bag, ...): what `ros2 run` would find
  [ -d "$_pkg/lib/${_pkg##*/}" ] && export PATH="$_pkg/lib/${_pkg##*/}:$PATH"
  _site="$_pkg/lib/python3.11/site-packages"
  if [ -d "$_site" ]; then
    export PYTHONPATH="$_site${PYTHONPATH:+:$PYTHONPATH}"
    # --symlink-install python packages are linked through an egg-link to their build dir
    for _link in "$_site"/*.egg-link; do
      [ -f "$_link" ] && export PYTHONPATH="$(head -n 1 "$_link"):$PYTHONPATH"
    done
  fi
done
# This checkout's training package first: a .venv shared by several worktrees has its editable
# asap_training pointing at whichever checkout ran setup last.
export PYTHONPATH="$_asap_root/training/src${PYTHONPATH:+:$PYTHONPATH}"
# DDS: stay on this machine unless the user says otherwise (the robot profile overrides it).
export ROS_AUTOMATIC_DISCOVERY_RANGE="${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}"
export RMW_IMPLEMENTATION="${RMW_IMPLEMENTATION:-rmw_fastrtps_cpp}"
# Fast DDS 3 announces XTypes type objects that CycloneDDS (the G1, Unitree's SDK and simulator) rejects:
# discovered, never matched, no data. This profile turns that off (README "Talking to a G1").
if [ -z "${FASTDDS_DEFAULT_PROFILES_FILE:-}${FASTRTPS_DEFAULT_PROFILES_FILE:-}" ]; then
  export FASTDDS_DEFAULT_PROFILES_FILE="$_asap_root/ros2_ws/src/asap_bringup/config/dds/fastdds.xml"
fi
unset _asap_root _pkg _site _link
