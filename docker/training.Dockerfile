# asap training image: CUDA PyTorch (the default Linux torch wheel on PyPI bundles the CUDA libraries) +
# MuJoCo Warp (mujoco-warp + warp-lang, pinned with mujoco in constraints.txt) + the ROS-free packages
# (asap_core, asap_sim, asap_logger's bag reader) + asap_training. Physics, the MDP and PPO all run on the
# GPU (--sim mujoco_warp --device cuda); several GPUs through torchrun.
#
#   docker build -f docker/training.Dockerfile -t asap/training .
#   docker run --rm --gpus all -v $PWD/runs:/runs asap/training \
#     asap-train --run-dir /runs/arm_swing --motion arm_swing --sim mujoco_warp --device cuda --num-envs 4096
#   docker run --rm --gpus all --ipc host -v $PWD/runs:/runs asap/training \
#     torchrun --nproc_per_node 4 -m asap_training.cli.train --run-dir /runs/r --sim mujoco_warp --device cuda
#   docker run --rm --gpus all -v $PWD/runs:/runs -w /opt/asap -e OUT=/runs/gpu_bench asap/training \
#     bash training/bench/gpu_bench.sh
#
# Needs an NVIDIA driver (R580+ for warp-lang 1.19's CUDA 13) and the NVIDIA container toolkit on the
# host. Not built in CI (no Docker engine there); linted by tests/test_docker.py.
FROM python:3.11-slim-bookworm

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 MUJOCO_GL=egl
WORKDIR /opt/asap

COPY constraints.txt /opt/asap/constraints.txt
COPY ros2_ws/src/asap_core ros2_ws/src/asap_core
COPY ros2_ws/src/asap_sim ros2_ws/src/asap_sim
COPY ros2_ws/src/asap_logger ros2_ws/src/asap_logger
COPY training training
COPY docker/fetch_g1_model.py /opt/asap/fetch_g1_model.py
# constraints.txt pins the CPU torch (torch==2.13.0+cpu) of the dev machines: drop that line and take
# the same torch version's CUDA build from PyPI; everything else keeps its exact pin.
RUN grep -v '^torch==' constraints.txt > /tmp/constraints-gpu.txt \
    && python -m pip install --no-cache-dir -c /tmp/constraints-gpu.txt torch==2.13.0 \
       ./ros2_ws/src/asap_core ./ros2_ws/src/asap_sim ./ros2_ws/src/asap_logger ./training \
    && python /opt/asap/fetch_g1_model.py /opt/asap/share/unitree_g1
ENV ASAP_G1_MJCF=/opt/asap/share/unitree_g1/g1.xml
WORKDIR /runs
CMD ["asap-train", "--help"]
