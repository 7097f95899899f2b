# asap robot image: ROS 2 Humble + CycloneDDS (what the G1 and unitree_ros2 speak) + the asap workspace.
# Runs a bringup profile with `ros2 launch` (default `robot`: policy node + recorder + robot_state_publisher).
#
#   docker build -f docker/robot.Dockerfile -t asap/robot .
#   docker run --rm -it --network host -e ASAP_NETWORK_INTERFACE=eth0 \
#     -v /path/policies:/policies -v /path/bags:/bags asap/robot policy:=/policies/policy.onnx
#
# Not built in CI (no Docker engine there); linted by tests/test_docker.py. Humble's Python is 3.10: the
# nodes and asap_core target it. Not in this image: the MuJoCo twin and asap_training (both need
# Python >= 3.11 with MuJoCo 4): sim2sim runs in docker/sim.Dockerfile, training in training.Dockerfile.
FROM ros:humble-ros-base-jammy

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV DEBIAN_FRONTEND=noninteractive PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1

# CycloneDDS RMW; robot_state_publisher + tf2_msgs for RViz; MCAP storage for `ros2 bag info/play` of the
# recorder's bags; foxglove_bridge for the Foxglove layout. The ROS apt repository keeps only the newest
# version of each package, so versions are not pinned (docker/.hadolint.yaml): the base image tag is.
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
       ros-humble-rmw-cyclonedds-cpp \
       ros-humble-robot-state-publisher \
       ros-humble-tf2-msgs \
       ros-humble-diagnostic-msgs \
       ros-humble-visualization-msgs \
       ros-humble-nav-msgs \
       ros-humble-std-srvs \
       ros-humble-rosbag2-storage-mcap \
       ros-humble-foxglove-bridge \
       python3-pip \
       python3-yaml \
       python3-colcon-common-extensions \
    && rm -rf /var/lib/apt/lists/*

# Python runtime of the nodes, pinned for Python 3.10 (docker/requirements-robot.txt says why each).
COPY docker/requirements-robot.txt /tmp/requirements-robot.txt
RUN python3 -m pip install --no-cache-dir -r /tmp/requirements-robot.txt

WORKDIR /opt/asap
COPY ros2_ws/src ros2_ws/src
WORKDIR /opt/asap/ros2_ws
# The twin (asap_sim) needs MuJoCo 4 (Python >= 3.11): not built here.
RUN . /opt/ros/humble/setup.bash \
    && colcon build --packages-skip asap_sim --event-handlers console_cohesion- \
       --cmake-args -DBUILD_TESTING=OFF \
    && rm -rf build log

WORKDIR /opt/asap
COPY ros2_ws/src/asap_bringup/config/dds /opt/asap/dds
COPY docker/entrypoint.sh /opt/asap/entrypoint.sh
# The G1 network is 192.168.123.0/24: ASAP_NETWORK_INTERFACE names the interface on it (eth0 on PC2).
# The Fast DDS profile matters only with RMW_IMPLEMENTATION=rmw_fastrtps_cpp: it keeps Fast DDS from
# announcing type objects that CycloneDDS (the robot) rejects. Humble's Fast DDS 2 reads FASTRTPS_*,
# Fast DDS 3 (Kilted and newer) FASTDDS_*.
ENV RMW_IMPLEMENTATION=rmw_cyclonedds_cpp \
    CYCLONEDDS_URI=file:///opt/asap/dds/cyclonedds_robot.xml \
    FASTRTPS_DEFAULT_PROFILES_FILE=/opt/asap/dds/fastdds.xml \
    FASTDDS_DEFAULT_PROFILES_FILE=/opt/asap/dds/fastdds.xml \
    ASAP_NETWORK_INTERFACE=eth0 \
    ASAP_PROFILE=robot \
    ROS_DOMAIN_ID=0
ENTRYPOINT ["/opt/asap/entrypoint.sh"]
CMD []
