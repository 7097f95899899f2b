# asap sim2sim image: the project's own CI-tested stack (Debian 12, CPython 3.11, ROS 2 Kilted from PyPI
# wheels, FastDDS, MuJoCo 4) built by `make setup`, running a bringup profile with the asap-up runner.
# Everything of the sim2sim graph runs here: twin, policy node, recorder, and the monitor with the
# reference ghost (MuJoCo is installed: asap_sim's FK). No RViz / robot_state_publisher / tf2_msgs in the wheels.
#
#   docker build -f docker/sim.Dockerfile -t asap/sim .
#   docker compose -f docker/compose.sim2sim.yaml up          # see that file
#
# Not built in CI (no Docker engine there); linted by tests/test_docker.py.
FROM python:3.11-slim-bookworm

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV DEBIAN_FRONTEND=noninteractive PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    ASAP_PYTHON=python3.11 \
    PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu
# (constraints.txt pins the CPU build torch==2.13.0+cpu, which lives on PyTorch's CPU index.)

# make setup needs a C/C++ compiler and CMake for the interface packages (README "Platforms").
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential cmake git make \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/asap
COPY . /opt/asap
RUN make setup

COPY docker/entrypoint.sh /opt/asap/entrypoint.sh
ENV ASAP_PROFILE=sim2sim ROS_DOMAIN_ID=0
ENTRYPOINT ["/opt/asap/entrypoint.sh"]
CMD []
