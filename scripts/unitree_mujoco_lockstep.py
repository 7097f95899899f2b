"""A policy artifact on Unitree's simulator's own G1 model and drive, off-line, in lock-step with the node.

unitree_mujoco's ``simulate_python`` steps ``unitree_robots/g1/scene_29dof.xml`` every ``SIMULATE_DT``; its
bridge computes each LowCmd's PD torque when the command arrives, from the sensors after the last physics
step, and holds it (clamped by the motors' ``ctrlrange``). This script runs that drive on that model with
the policy node's own tick (``asap_core.control.Controller``) every 20 ms on the LowState the bridge would
publish, through a graph episode's sequence: standing at the policy's default pose in the twin's gantry
band (``asap_sim.twin.BandConfig``'s spring-dampers on the pelvis; unitree_mujoco's own elastic band, a
spring to a point 3 m up, is not modelled), RAMP, 1 s of HOLD, POLICY with the band let go. It prints
whether the motion completed, the node's fault, E_g-mpjpe (the tracked points by our kinematics from its
base pose and joint angles) and the drift. No DDS: the numbers do not depend on the machine keeping up.

    git clone https://github.com/unitreerobotics/unitree_mujoco ~/unitree_mujoco
    python scripts/unitree_mujoco_lockstep.py ~/unitree_mujoco \\
        training/policies/arm_swing_unitree_sim/policy.onnx --dt 0.005
"""

from __future__ import annotations

import argparse
from pathlib import Path

import mujoco
import numpy as np

from asap_core import g1, quat
from asap_core.artifact import load_artifact
from asap_core.control import ControlCfg, Controller, LoadedPolicy, MotorCommand, RobotState, TickOutput
from asap_core.modes import Event, Mode
from asap_sim.twin import BandConfig
from asap_training.envs.tracking_env import TrackingEnv
from asap_training.eval.evaluate import eval_env_cfg, reference_points
from asap_training.eval.metrics import tracking_metrics

SCENE = Path("unitree_robots/g1/scene_29dof.xml")
HOLD_S = 1.0


class UnitreeMujocoG1:
    """Their model, stepped with their bridge's drive; our gantry band on the pelvis until released."""

    def __init__(self, scene: Path, dt: float, pose: np.ndarray) -> None:
        self.model = mujoco.MjModel.from_xml_path(str(scene))
        self.model.opt.timestep = dt
        self.data = mujoco.MjData(self.model)
        motors = tuple(mujoco.mj_id2name(self.model, mujoco.mjtObj.mjOBJ_ACTUATOR, i) + "_joint"
                       for i in range(self.model.nu))
        if motors != g1.MOTOR_ORDER:
            raise ValueError(f"{scene}: its motors are not the G1's 29 in motor order: {motors}")
        self.n = self.model.nu
        self.imu_quat = self.model.sensor("imu_quat").adr[0]
        self.imu_gyro = self.model.sensor("imu_gyro").adr[0]
        self.pelvis = self.model.body("pelvis").id
        self.data.qpos[3:7], self.data.qpos[7:] = (1.0, 0.0, 0.0, 0.0), pose
        mujoco.mj_forward(self.model, self.data)
        feet = [self.model.body(f"{side}_ankle_roll_link").id for side in ("left", "right")]
        lowest = min(self.data.geom_xpos[i][2] - self.model.geom_size[i][0] for i in range(self.model.ngeom)
                     if self.model.geom_bodyid[i] in feet and self.model.geom_contype[i])
        self.data.qpos[2] -= lowest  # feet on the floor (their foot contacts are spheres)
        mujoco.mj_forward(self.model, self.data)
        self.anchor = self.data.qpos[:7].copy()
        self.band_held = True
        self.command = MotorCommand.zero_torque()

    def state(self) -> RobotState:
        """The LowState their bridge publishes: the sensors after the last physics step."""
        s, n = self.data.sensordata, self.n
        return RobotState(q=s[:n].copy(), dq=s[n : 2 * n].copy(),
                          quat_wxyz=s[self.imu_quat : self.imu_quat + 4].copy(),
                          gyro_b=s[self.imu_gyro : self.imu_gyro + 3].copy())

    def step(self, steps: int) -> None:
        """``steps`` physics steps, each with their LowCmdHandler's torque from the sensors before it."""
        c, s, n = self.command, self.data.sensordata, self.n
        for _ in range(steps):
            self.data.ctrl[:] = c.tau + c.kp * (c.q - s[:n]) + c.kd * (c.dq - s[n : 2 * n])
            self._band()
            mujoco.mj_step(self.model, self.data)

    def _band(self) -> None:
        band, qpos, qvel = BandConfig(), self.data.qpos, self.data.qvel
        if not self.band_held:
            self.data.xfrc_applied[self.pelvis] = 0.0
            return
        err, rot = np.zeros(3), np.zeros(9)
        mujoco.mju_subQuat(err, self.anchor[3:7], qpos[3:7])
        mujoco.mju_quat2Mat(rot, qpos[3:7])
        force = band.stiffness * (self.anchor[:3] - qpos[:3]) - band.damping * qvel[:3]
        torque_b = band.rot_stiffness * err - band.rot_damping * qvel[3:6]
        self.data.xfrc_applied[self.pelvis] = np.concatenate([force, rot.reshape(3, 3) @ torque_b])


def run(unitree_mujoco: Path, policy: Path, dt: float, hold_gains: str) -> str:
    """One episode; returns the line of results."""
    artifact = load_artifact(policy)
    meta = artifact.metadata
    env = TrackingEnv(eval_env_cfg(artifact))
    pose = g1.default_pose(g1.MOTOR_ORDER, env.cfg.actions.default_pose)
    sim = UnitreeMujocoG1(unitree_mujoco / SCENE, dt, pose)
    cfg = ControlCfg(control_dt=meta.control_dt, hold_gains=hold_gains)
    control = Controller(cfg, LoadedPolicy(artifact))
    substeps = round(meta.control_dt / dt)

    def tick(request: Event | None = None) -> TickOutput:
        out = control.tick(sim.state(), 0.0, () if request is None else (request,))
        if request is not None and not out.results[0].accepted:
            raise RuntimeError(f"the node refused {request.name}: {out.results[0].reason}")
        sim.command = out.command
        sim.step(substeps)
        return out

    for request in (Event.REQUEST_ZERO_TORQUE, Event.REQUEST_ZERO_TORQUE, Event.REQUEST_RAMP):
        out = tick(request)  # as a graph episode starts: motors off in the band, then RAMP
    while out.mode is Mode.RAMP:
        out = tick()
    for _ in range(round(HOLD_S / meta.control_dt)):
        out = tick()
    if out.mode is not Mode.HOLD:
        return f"HOLD lost in the band: {control.fault}"

    offset = sim.data.qpos[:3] - reference_points(env, 0.0)[0]
    offset[2] = 0.0
    robot, ref, fell, ticks = [], [], False, 0
    while True:
        robot.append(env.kin.points(sim.data.qpos.copy())[0][0])
        ref.append(reference_points(env, ticks * meta.control_dt) + offset)
        if np.any(np.abs(quat.rotate_inv(sim.data.qpos[3:7], np.array([0.0, 0.0, -1.0]))[:2]) > 0.8):
            fell = True  # the pelvis tilted past 53 degrees
            break
        sim.band_held = False  # let go with the policy's first command, as the graph client does
        out = tick(None if ticks else Event.REQUEST_POLICY)
        ticks += 1
        if out.mode is Mode.DAMPING or out.phase >= 1.0:
            fell = out.mode is Mode.DAMPING
            break
    m = tracking_metrics(np.array(robot), np.array(ref), fell)
    drift = np.linalg.norm(robot[-1][0, :2] - ref[-1][0, :2]) * 1000.0
    return (f"{policy} on {SCENE.name}, their drive at {dt * 1000:g} ms: "
            f"{'FELL' if fell else 'complete'} after {ticks * meta.control_dt:.2f} s"
            f"{', fault: ' + control.fault if control.fault else ''}; E_g-mpjpe {m.e_g_mpjpe_mm:.1f} mm, "
            f"E_mpjpe {m.e_mpjpe_mm:.1f} mm, drift {drift:.0f} mm")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("unitree_mujoco", type=Path, help="a clone of unitreerobotics/unitree_mujoco")
    p.add_argument("policy", type=Path, help="a policy artifact (policy.onnx)")
    p.add_argument("--dt", type=float, default=0.005, help="their SIMULATE_DT (default: its default 0.005)")
    p.add_argument("--hold-gains", default="policy", help="the node's hold_gains (default: the policy's)")
    args = p.parse_args()
    if not (args.unitree_mujoco / SCENE).is_file():
        p.error(f"{args.unitree_mujoco / SCENE}: not found; pass a clone of "
                "https://github.com/unitreerobotics/unitree_mujoco")
    print(run(args.unitree_mujoco, args.policy, args.dt, args.hold_gains), flush=True)


if __name__ == "__main__":
    main()
