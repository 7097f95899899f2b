"""Simulator backends of the tracking MDP (the protocol is :mod:`asap_training.sim.base`)."""

SIMULATORS = {
    "mujoco": "asap_training.sim.mujoco_cpu:MujocoCpuSimulator",
    "mujoco_warp": "asap_training.sim.mujoco_warp:MujocoWarpSimulator",
}
"""``--sim`` name → backend class (``module:Class``, ``TrackingEnvCfg.simulator``)."""
