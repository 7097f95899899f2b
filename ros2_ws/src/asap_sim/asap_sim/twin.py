"""The simulated G1 without ROS: physics, drives, gantry band and sensors, stepped by its owner.

Each physics step the drives act on the latest command (through the profile's actuation latency):
the drive law runs in MuJoCo's actuators (``asap_sim.model``), fed :func:`asap_sim.motor.drive_ctrl`.
``TwinConfig.drive = "held"`` instead drives the joints as Unitree's simulator does (``unitree_mujoco``'s
``simulate_python`` bridge): the PD torque computed from the joint sensors MuJoCo holds after the previous
physics step (the state at that step's start) and held over the step, so the PD acts one physics step
late (5 ms at its default timestep; a real G1's drivers run their PD at kHz on fresh encoder data).
While the band is held, a spring-damper pulls the pelvis to its start pose (position and
orientation). :meth:`Twin.read_state` returns what LowState carries, with the profile's sensor noise,
plus ground truth for odometry.

The band differs from unitree_mujoco's elastic band (a translational spring to a point 3 m up):
it anchors at the start pose and also holds orientation, so a held robot stands on its feet
exactly where it was placed and a released one starts from a standing posture.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal, get_args

import mujoco
import numpy as np

from asap_core import g1
from asap_sim.model import TWIN_TIMESTEP, G1Indices, as_slice, build_model, standing_base_height
from asap_sim.motor import ControlDelay, MotorCommand, MotorParams, drive_ctrl, hold_pd, latency_steps
from asap_sim.profiles import DynamicsProfile, nominal_profile


@dataclass(frozen=True, kw_only=True)
class BandConfig:
    """The gantry: spring-dampers from the pelvis to its start pose."""

    stiffness: float = 10000.0
    """N/m."""
    damping: float = 1000.0
    """N s/m."""
    rot_stiffness: float = 300.0
    """N m/rad."""
    rot_damping: float = 5.0
    """N m s/rad."""


Drive = Literal["engine", "held"]
"""Joint drives: engine, the PD on the current state at every physics step (a G1's motor drivers); held,
the PD torque from the previous step's joint sensors, held over the step (Unitree's simulator)."""
DRIVES: tuple[str, ...] = get_args(Drive)


@dataclass(frozen=True, kw_only=True)
class TwinConfig:
    """How the twin starts and steps."""

    physics_dt: float = TWIN_TIMESTEP
    """s; 0.002 = 500 Hz."""
    drive: Drive = "engine"
    """See :data:`Drive`."""
    held_lag: float = 1.0
    """The held drive's ``lag`` (:func:`asap_sim.motor.hold_pd`): 1 as Unitree's simulator."""
    initial_pose: str = "asap"
    """A pose name of ``asap_core.g1.DEFAULT_POSES``."""
    lift: float = 0.0
    """m the pelvis starts above the height where the feet touch the floor."""
    band_held: bool = True
    band: BandConfig = field(default_factory=BandConfig)
    seed: int | None = None
    """Sensor-noise seed; None takes the profile's."""


@dataclass(frozen=True, eq=False, kw_only=True)
class TwinState:
    """One sample: LowState content (with sensor noise) and ground truth. Joint arrays in motor order."""

    time_s: float
    tick: int
    """Simulated milliseconds (as unitree_mujoco reports it)."""
    q: np.ndarray
    dq: np.ndarray
    ddq: np.ndarray
    tau_est: np.ndarray
    """Torque the drives applied in the last physics step (N m)."""
    imu_quat_wxyz: np.ndarray
    gyro_b: np.ndarray
    """rad/s, IMU frame."""
    acc_b: np.ndarray
    """m/s^2, IMU frame (specific force: +9.81 up when at rest)."""
    rpy: np.ndarray
    """roll, pitch, yaw (rad) of the IMU quaternion."""
    base_pos_w: np.ndarray
    base_quat_wxyz: np.ndarray
    base_lin_vel_w: np.ndarray
    base_lin_vel_b: np.ndarray
    """Pelvis linear velocity in the pelvis frame (as nav_msgs/Odometry's twist wants it)."""
    base_ang_vel_b: np.ndarray
    foot_contact: np.ndarray
    """(left, right) touching the floor."""
    band_held: bool


def quat_to_rpy(quat_wxyz: np.ndarray) -> np.ndarray:
    """Roll, pitch, yaw (rad; intrinsic z-y-x) of a unit quaternion (w, x, y, z)."""
    w, x, y, z = quat_wxyz.tolist()  # scalar math: numpy per-scalar calls cost ~10x more
    return np.array([
        math.atan2(2.0 * (w * x + y * z), 1.0 - 2.0 * (x * x + y * y)),
        math.asin(min(1.0, max(-1.0, 2.0 * (w * y - z * x)))),
        math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z)),
    ])


class Twin:
    """A G1 in MuJoCo driven like the real robot. Not thread-safe: one owner steps and reads it."""

    def __init__(self, profile: DynamicsProfile | None = None, config: TwinConfig | None = None) -> None:
        self.profile = profile or nominal_profile()
        self.config = config or TwinConfig()
        if not 0.0 <= self.config.held_lag <= 1.0:
            raise ValueError(f"held_lag is {self.config.held_lag}, expected a share in [0, 1]")
        self.model = build_model(self.profile, timestep=self.config.physics_dt)
        self.data = mujoco.MjData(self.model)
        self.idx = G1Indices.from_model(self.model)
        self._bind_views()
        self._params = MotorParams.from_profile(self.profile)
        self._latency = latency_steps(self.profile.actuation_latency_ms, self.config.physics_dt)
        seed = self.profile.seed if self.config.seed is None else self.config.seed
        self._rng = np.random.default_rng(seed)
        p = self.profile
        # one draw per state for every noisy channel: q, dq, gyro, accelerometer (in that order)
        self._noise_std = np.repeat(
            [p.joint_pos_noise_std, p.joint_vel_noise_std, p.gyro_noise_std, p.accelerometer_noise_std],
            [g1.NUM_MOTORS, g1.NUM_MOTORS, 3, 3],
        )
        self._noisy = bool(self._noise_std.any())
        self.reset()

    def _bind_views(self) -> None:
        """numpy views of the MjData buffers the loops touch, taken once: every attribute access on
        MjData builds a new array object (~0.5 µs), a dozen of them per physics step otherwise. The
        views stay valid: ``mj_resetData`` clears the buffers in place."""
        d, idx = self.data, self.idx
        spans = {}
        for name, addresses in (("q", idx.qpos), ("dq", idx.qvel)):
            span = as_slice(addresses)
            if not isinstance(span, slice):
                raise ValueError(
                    f"G1 model joints not contiguous in motor order ({name}); build it with "
                    f"asap_sim.model.build_model"
                )
            spans[name] = span
        self._joint_q, self._joint_dq = d.qpos[spans["q"]], d.qvel[spans["dq"]]
        self._joint_ddq, self._joint_tau = d.qacc[spans["dq"]], d.qfrc_actuator[spans["dq"]]
        self._ctrl = d.ctrl[idx.drive_ctrl]
        self._base_pos, self._base_quat = d.qpos[0:3], d.qpos[3:7]
        self._base_vel, self._base_ang_vel = d.qvel[0:3], d.qvel[3:6]
        self._base_xmat = d.xmat[idx.base_body]
        self._base_xfrc = d.xfrc_applied[idx.base_body]
        self._band_force, self._band_torque = self._base_xfrc[:3], self._base_xfrc[3:]
        sensors = d.sensordata
        self._imu_quat, self._imu_gyro, self._imu_acc = (
            sensors[idx.sensor[n]] for n in ("imu_quat", "imu_gyro", "imu_acc")
        )
        self._contacts = [sensors[idx.sensor[f"{side}_foot_contact"]] for side in ("left", "right")]

    def reset(self, *, keep_time: bool = False, band_held: bool | None = None) -> None:
        """Back to the initial pose at rest, motors off, band as configured (or ``band_held``).

        ``keep_time`` keeps the simulated clock running on from where it is (a twin reset between
        episodes): LowState ticks and sim time never go back, which every consumer of the stream
        (the policy node's sim clock, the bag reader's tick checks) relies on.
        """
        q = g1.default_pose(g1.MOTOR_ORDER, self.config.initial_pose)
        height = standing_base_height(self.model, q, clearance=self.config.lift)
        now = self.data.time
        mujoco.mj_resetData(self.model, self.data)
        if keep_time:
            self.data.time = now
        self.data.qpos[:7] = (0.0, 0.0, height, 1.0, 0.0, 0.0, 0.0)
        self.data.qpos[self.idx.qpos] = q
        mujoco.mj_forward(self.model, self.data)
        self._rot_err_b = np.zeros(3)  # scratch: rotation error, then body torque
        self._anchor_pos = self.data.qpos[:3].copy()
        self._anchor_quat = self.data.qpos[3:7].copy()
        self._band_held = self.config.band_held if band_held is None else band_held
        self._command = MotorCommand.off()
        self._command_ctrl = drive_ctrl(self._command, self._params)
        self._delay = ControlDelay(self._latency, 1, np.zeros_like(self._command_ctrl))
        self._ctrl_in_use: np.ndarray | None = None  # what self._ctrl holds: written once per change
        # held drive: the joint state its PD reads (MuJoCo's sensors after a step: that step's start)
        self._sensed_q, self._sensed_dq = self._joint_q.copy(), self._joint_dq.copy()

    @property
    def time_s(self) -> float:
        """Simulated time (s)."""
        return float(self.data.time)

    @property
    def band_held(self) -> bool:
        """Whether the gantry band holds the pelvis."""
        return self._band_held

    def release_band(self) -> None:
        """Let go of the pelvis."""
        self._band_held = False
        self._base_xfrc[:] = 0.0

    def hold_band(self) -> None:
        """Catch the pelvis where it is (position) and turn it back upright (start orientation)."""
        if not self._band_held:
            self._anchor_pos = self.data.qpos[:3].copy()
        self._band_held = True

    def set_command(self, cmd: MotorCommand) -> None:
        """The command the drives act on from the next physics step (after the latency). Its ctrl is
        computed once per command object: the node hands over the same one for every state until a new
        LowCmd arrives."""
        if cmd is not self._command:
            self._command, self._command_ctrl = cmd, drive_ctrl(cmd, self._params)

    def step(self, n: int = 1) -> None:
        """Advance ``n`` physics steps."""
        model, data = self.model, self.data
        held = self.config.drive == "held"
        for _ in range(n):
            ctrl = self._delay.push(self._command_ctrl)[0][0] if self._latency else self._command_ctrl
            if held:
                hold_pd(ctrl, self._sensed_q, self._sensed_dq, self._joint_q, self._joint_dq, self._ctrl,
                        self.config.held_lag)
            elif ctrl is not self._ctrl_in_use:
                self._ctrl[:], self._ctrl_in_use = ctrl, ctrl
            if self._band_held:
                self._apply_band()
            mujoco.mj_step(model, data)

    def _apply_band(self) -> None:
        """The band's spring-dampers on the pelvis, as a world-frame [force, torque] on its body."""
        # mju_ 3-vector calls, in place: a third of the time of the numpy expressions, every step
        band, force, torque_b = self.config.band, self._band_force, self._rot_err_b
        mujoco.mju_sub3(force, self._anchor_pos, self._base_pos)
        mujoco.mju_scl3(force, force, band.stiffness)
        mujoco.mju_addToScl3(force, self._base_vel, -band.damping)
        mujoco.mju_subQuat(torque_b, self._anchor_quat, self._base_quat)
        mujoco.mju_scl3(torque_b, torque_b, band.rot_stiffness)
        mujoco.mju_addToScl3(torque_b, self._base_ang_vel, -band.rot_damping)
        mujoco.mju_mulMatVec3(self._band_torque, self._base_xmat, torque_b)

    def read_state(self) -> TwinState:
        """The current sample. Draws sensor noise: call once per published state."""
        time_s = float(self.data.time)
        quat = self._imu_quat.copy()
        q, dq = self._joint_q.copy(), self._joint_dq.copy()
        gyro, acc = self._imu_gyro.copy(), self._imu_acc.copy()
        if self._noisy:
            noise = self._rng.standard_normal(self._noise_std.size) * self._noise_std
            n = g1.NUM_MOTORS
            q += noise[:n]
            dq += noise[n : 2 * n]
            gyro += noise[2 * n : 2 * n + 3]
            acc += noise[2 * n + 3 :]
        base_vel = self._base_vel.copy()
        base_vel_b = np.empty(3)
        mujoco.mju_mulMatTVec3(base_vel_b, self._base_xmat, base_vel)
        return TwinState(
            time_s=time_s,
            tick=round(time_s * 1000.0),
            q=q,
            dq=dq,
            ddq=self._joint_ddq.copy(),
            tau_est=self._joint_tau.copy(),
            imu_quat_wxyz=quat,
            gyro_b=gyro,
            acc_b=acc,
            rpy=quat_to_rpy(quat),
            base_pos_w=self._base_pos.copy(),
            base_quat_wxyz=self._base_quat.copy(),
            base_lin_vel_w=base_vel,
            base_lin_vel_b=base_vel_b,
            base_ang_vel_b=self._base_ang_vel.copy(),
            foot_contact=np.array([self._contacts[0][0] > 0, self._contacts[1][0] > 0]),
            band_held=self._band_held,
        )
