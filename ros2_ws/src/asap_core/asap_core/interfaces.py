"""The graph's names: nodes, topics and services (with their types), defined once.

Every node, the bag reader (``asap_logger.reader``), the monitor and the graph client take their names
from here, so a name changes here or nowhere. Plain strings: asap_core never imports ROS; the nodes import
the message classes themselves, :data:`TYPES` names them (``pkg/msg/Name``) for the bag reader's checks and
for tools that list the graph. Topics are absolute (remappable with ``--ros-args -r``), except the
recorder's services and events, which are private to its node (``~/...``; :func:`resolve` gives the name
a client calls).
"""

from __future__ import annotations

from types import MappingProxyType

# --- the robot: Unitree's topics (the twin speaks them too) ------------------------------------
LOWCMD = "/lowcmd"
LOWSTATE = "/lowstate"
MOTION_SWITCHER_REQUEST = "/api/motion_switcher/request"
MOTION_SWITCHER_RESPONSE = "/api/motion_switcher/response"

# --- ROS conventions -----------------------------------------------------------------------------
JOINT_STATES = "/joint_states"
ODOMETRY = "/odometry"
"""The floating base in the world: the twin's ground truth, a mocap or a state estimator."""
CLOCK = "/clock"
DIAGNOSTICS = "/diagnostics"
TF = "/tf"
TF_STATIC = "/tf_static"

# --- the policy node (asap_policy) ---------------------------------------------------------------
POLICY_NODE = "policy_node"
POLICY_RECORD = "/policy/record"
POLICY_STATUS = "/policy/status"
SET_MODE = "/policy/set_mode"
LOAD_POLICY = "/policy/load_policy"

# --- the simulated twin (asap_sim) ---------------------------------------------------------------
TWIN_NODE = "g1_sim"
SIM_WIRELESS_REMOTE = "/sim/wireless_remote"
SIM_RESET = "/sim/reset"
SIM_RELEASE_BAND = "/sim/release_band"
SIM_RELEASE_BAND_ON_NEW_COMMAND = "/sim/release_band_on_new_command"
SIM_HOLD_BAND = "/sim/hold_band"

# --- the recorder (asap_logger) ------------------------------------------------------------------
RECORDER_NODE = "recorder"
START_EPISODE = "~/start_episode"
STOP_EPISODE = "~/stop_episode"
EPISODE_EVENTS = "~/episode_events"

# --- the monitor (asap_bringup) ------------------------------------------------------------------
MONITOR_NODE = "monitor"
MONITOR_MARKERS = "/monitor/markers"
MONITOR_ERROR = "/monitor/tracking_error_m"
MONITOR_ERROR_LOCAL = "/monitor/tracking_error_local_m"
MONITOR_REFERENCE = "/monitor/reference"

TYPES = MappingProxyType(
    {
        LOWCMD: "unitree_hg/msg/LowCmd",
        LOWSTATE: "unitree_hg/msg/LowState",
        MOTION_SWITCHER_REQUEST: "unitree_api/msg/Request",
        MOTION_SWITCHER_RESPONSE: "unitree_api/msg/Response",
        JOINT_STATES: "sensor_msgs/msg/JointState",
        ODOMETRY: "nav_msgs/msg/Odometry",
        CLOCK: "rosgraph_msgs/msg/Clock",
        DIAGNOSTICS: "diagnostic_msgs/msg/DiagnosticArray",
        TF: "tf2_msgs/msg/TFMessage",
        TF_STATIC: "tf2_msgs/msg/TFMessage",
        POLICY_RECORD: "asap_msgs/msg/PolicyRecord",
        POLICY_STATUS: "asap_msgs/msg/PolicyStatus",
        SET_MODE: "asap_msgs/srv/SetMode",
        LOAD_POLICY: "asap_msgs/srv/LoadPolicy",
        SIM_WIRELESS_REMOTE: "asap_msgs/msg/WirelessRemote",
        SIM_RESET: "std_srvs/srv/Trigger",
        SIM_RELEASE_BAND: "std_srvs/srv/Trigger",
        SIM_RELEASE_BAND_ON_NEW_COMMAND: "std_srvs/srv/Trigger",
        SIM_HOLD_BAND: "std_srvs/srv/Trigger",
        START_EPISODE: "asap_msgs/srv/StartEpisode",
        STOP_EPISODE: "asap_msgs/srv/StopEpisode",
        EPISODE_EVENTS: "asap_msgs/msg/EpisodeEvent",
        MONITOR_MARKERS: "visualization_msgs/msg/MarkerArray",
        MONITOR_ERROR: "std_msgs/msg/Float32",
        MONITOR_ERROR_LOCAL: "std_msgs/msg/Float32",
        MONITOR_REFERENCE: "asap_msgs/msg/ReferenceMotion",
    }
)
"""Name -> ROS interface type of every topic and service above."""


def resolve(name: str, node: str) -> str:
    """The absolute name of ``name`` as ``node`` declares it: a private ``~/x`` is ``/<node>/x``."""
    return f"/{node}/{name.removeprefix('~/')}" if name.startswith("~/") else name
