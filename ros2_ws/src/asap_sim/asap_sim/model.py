"""The one builder of the G1 MuJoCo model, shared by the twin and by training (physics parity).

``build_model`` starts from the G1 29-DoF MJCF (installed by ``make setup`` from the mjlab wheel;
``ASAP_G1_MJCF`` overrides the path) and adds, through ``mujoco.MjSpec``:

- a floor plane named ``floor`` whose friction wins every contact (``priority``);
- the G1 drive law in the engine (:func:`_add_drives`): per joint three affine actuators whose forces
  sum to ``kp*(q* - q) + kd*(dq* - dq) + tau_ff``, clamped per joint to the effort limit and scaled by
  the profile's ``torque_scale``; ``data.ctrl`` is :func:`asap_sim.motor.drive_ctrl` of a command, so
  the PD runs in C at every physics step (the twin, every training backend and MuJoCo Warp alike);
- the semi-implicit Euler integrator (:data:`INTEGRATOR`);
- sensors at the pelvis IMU site (:data:`IMU_SITE`): orientation quaternion (w, x, y, z, world),
  gyroscope and accelerometer (site frame); per foot a contact sensor against the floor
  (found flag + net force, world frame);
- the profile's joint armature / damping / friction, link masses, pelvis CoM and floor friction.

Joint q/dq addresses, sensor addresses and body ids are resolved once by :class:`G1Indices`.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from asap_core import g1
from asap_sim.profiles import DynamicsProfile, assign_patterns, match_names, nominal_profile

MJCF_ENV = "ASAP_G1_MJCF"
"""Environment variable that overrides the G1 MJCF path."""
DEFAULT_MJCF = Path(sys.prefix) / "share" / "asap" / "unitree_g1" / "g1.xml"
BASE_BODY = "pelvis"
IMU_SITE = "imu_in_pelvis"
FEET = dict(zip(("left", "right"), g1.FEET, strict=True))
"""Foot bodies by side."""
FLOOR = "floor"
SENSORS = ("imu_quat", "imu_gyro", "imu_acc", "left_foot_contact", "right_foot_contact")
"""Sensor names this builder adds (the MJCF's own sensors are removed)."""
TWIN_TIMESTEP = 0.002
"""Physics step of the twin (500 Hz); training uses 0.005 (200 Hz)."""
INTEGRATOR = mujoco.mjtIntegrator.mjINT_EULER
"""Semi-implicit Euler: joint damping implicit, the drives' kd explicit, as a motor driver computes its PD
from the measured state. ``implicitfast`` would also integrate the actuators' kd implicitly: another,
stiffer-looking drive (a falling G1 1 s later 0.15 m elsewhere), at ~1.8x the cost per step."""
DRIVE_TERMS = ("bias", "kp", "kd")
"""The drive actuators of every joint, in ctrl order: ``ctrl = [bias (29) | kp (29) | kd (29)]`` with
``bias = kp*q* + kd*dq* + tau_ff`` (motor order). The ``bias`` actuators carry the joints' own names."""


class ModelError(RuntimeError):
    """The G1 MJCF is missing or does not match the joint table in asap_core.g1."""


def mjcf_path() -> Path:
    """The G1 MJCF to build from: ``$ASAP_G1_MJCF`` or the one ``make setup`` installs."""
    path = Path(os.environ.get(MJCF_ENV) or DEFAULT_MJCF)
    if not path.is_file():
        raise ModelError(f"G1 MJCF not found at {path}: run `make setup` (it installs the G1 model "
                         f"from the mjlab wheel) or point {MJCF_ENV} at a g1.xml")
    return path


def build_model(profile: DynamicsProfile | None = None, *, timestep: float = TWIN_TIMESTEP,
                mjcf: str | Path | None = None, visual_meshes: bool = False) -> mujoco.MjModel:
    """Compile the G1 with floor, IMU, foot contacts, motors and a dynamics profile (default nominal).

    ``visual_meshes=False`` drops the massless, collision-free mesh geoms (compiles in ~20 ms
    instead of seconds, same dynamics); pass True to render.
    """
    profile = profile or nominal_profile()
    spec = mujoco.MjSpec.from_file(str(mjcf or mjcf_path()))
    _check_joints(spec)
    if not visual_meshes:
        _drop_meshes(spec)
    spec.option.timestep = timestep
    spec.option.integrator = INTEGRATOR
    _add_floor(spec, profile.ground_friction)
    _add_drives(spec, profile.torque_scale)
    _add_sensors(spec)
    _apply_joint_dynamics(spec, profile)
    _apply_masses(spec, profile)
    return spec.compile()


def _check_joints(spec: mujoco.MjSpec) -> None:
    hinges = tuple(j.name for j in spec.joints if j.type == mujoco.mjtJoint.mjJNT_HINGE)
    if hinges != g1.MOTOR_ORDER:
        raise ModelError(f"the MJCF's hinge joints {hinges} are not asap_core.g1.MOTOR_ORDER; "
                         f"use the 29-DoF G1 model that `make setup` installs")


def _drop_meshes(spec: mujoco.MjSpec) -> None:
    for geom in list(spec.geoms):
        if geom.type == mujoco.mjtGeom.mjGEOM_MESH:
            if geom.contype or geom.conaffinity or geom.density:
                raise ModelError(f"mesh geom {geom.name!r} collides or has mass; build with "
                                 f"visual_meshes=True")
            spec.delete(geom)
    for mesh in list(spec.meshes):
        spec.delete(mesh)


def _add_floor(spec: mujoco.MjSpec, friction: float) -> None:
    spec.worldbody.add_geom(name=FLOOR, type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 0.05],
                            friction=[friction, 0.005, 0.0001], priority=1, condim=3)


def _add_drives(spec: mujoco.MjSpec, torque_scale: np.ndarray) -> None:
    """``tau = s * clip(bias - kp*q - kd*dq, -limit, limit)`` per joint, with the command's terms in ctrl.

    Affine gains make each actuator's force ``gain(q, dq) * ctrl``: ``s*ctrl`` (bias), ``-s*q*ctrl`` (kp),
    ``-s*dq*ctrl`` (kd). The joint's ``actuatorfrcrange`` clamps their sum at ``s * limit``, and
    ``s * clip(x, L) = clip(s*x, s*L)`` for ``s >= 0``. Gains stay in ctrl, not in the model, so one model
    serves commands and environments with different kp/kd (the twin's ramps, domain randomization)."""
    limits = torque_scale * g1.joint_array("effort_limit", g1.MOTOR_ORDER)
    for name, limit in zip(g1.MOTOR_ORDER, limits, strict=True):
        joint = spec.joint(name)
        joint.actfrclimited = mujoco.mjtLimited.mjLIMITED_TRUE
        joint.actfrcrange = [-limit, limit]
    for term, gain in zip(DRIVE_TERMS, ([1.0, 0.0, 0.0], [0.0, -1.0, 0.0], [0.0, 0.0, -1.0]), strict=True):
        for name, s in zip(g1.MOTOR_ORDER, torque_scale, strict=True):
            spec.add_actuator(name=name if term == "bias" else f"{name}:{term}", target=name,
                              trntype=mujoco.mjtTrn.mjTRN_JOINT, gaintype=mujoco.mjtGain.mjGAIN_AFFINE,
                              gainprm=[s * g for g in gain] + [0.0] * 7, biasprm=[0.0] * 10)


def _add_sensors(spec: mujoco.MjSpec) -> None:
    for sensor in list(spec.sensors):
        spec.delete(sensor)
    site = mujoco.mjtObj.mjOBJ_SITE
    spec.add_sensor(name="imu_quat", type=mujoco.mjtSensor.mjSENS_FRAMEQUAT, objtype=site,
                    objname=IMU_SITE)
    spec.add_sensor(name="imu_gyro", type=mujoco.mjtSensor.mjSENS_GYRO, objtype=site, objname=IMU_SITE)
    spec.add_sensor(name="imu_acc", type=mujoco.mjtSensor.mjSENS_ACCELEROMETER, objtype=site,
                    objname=IMU_SITE)
    fields = mujoco.mjtConDataField
    found_and_force = (1 << int(fields.mjCONDATA_FOUND)) | (1 << int(fields.mjCONDATA_FORCE))
    net_force = 3  # mjtReduce: one entry summing every contact
    for side, body in FEET.items():
        spec.add_sensor(name=f"{side}_foot_contact", type=mujoco.mjtSensor.mjSENS_CONTACT,
                        objtype=mujoco.mjtObj.mjOBJ_XBODY, objname=body,
                        reftype=mujoco.mjtObj.mjOBJ_GEOM, refname=FLOOR,
                        intprm=[found_and_force, net_force, 1])


def _apply_joint_dynamics(spec: mujoco.MjSpec, profile: DynamicsProfile) -> None:
    for i, name in enumerate(g1.MOTOR_ORDER):
        joint = spec.joint(name)
        joint.armature = profile.armature[i]
        damping = np.array(joint.damping)  # MuJoCo 4: [linear, higher-order terms...]
        damping[0] = profile.joint_damping[i]
        joint.damping = damping
        joint.frictionloss = profile.joint_friction[i]


def _apply_masses(spec: mujoco.MjSpec, profile: DynamicsProfile) -> None:
    bodies = [b for b in spec.bodies if b.name != "world"]
    names = [b.name for b in bodies]
    assignments = []
    for pattern, value in profile.link_mass_scale:
        hits = match_names(pattern, names)
        if not hits:
            raise ModelError(f"link_mass_scale: pattern {pattern!r} matches no G1 body; bodies: {names}")
        assignments.append((pattern, hits, value))
    scale = assign_patterns("link_mass_scale", np.ones(len(bodies)), assignments)
    for body, s in zip(bodies, scale, strict=True):
        body.mass *= s
        body.inertia = body.inertia * s
    base = spec.body(BASE_BODY)
    base.ipos = base.ipos + np.asarray(profile.base_com_offset)


@dataclass(frozen=True, eq=False)
class G1Indices:
    """Addresses in ``MjData`` resolved by name once; joint arrays are in ``g1.MOTOR_ORDER``."""

    qpos: np.ndarray
    """qpos address of each joint."""
    qvel: np.ndarray
    """qvel/qacc address of each joint."""
    actuator: np.ndarray
    """ctrl index of each joint's ``bias`` drive actuator (the ``kp`` and ``kd`` ones follow at +29, +58)."""
    drive_ctrl: slice
    """``ctrl`` span of the drive actuators: ``[bias | kp | kd]`` as :func:`asap_sim.motor.drive_ctrl`."""
    base_body: int
    sensor: dict[str, slice]
    """``sensordata`` slice of each name in :data:`SENSORS`."""

    @classmethod
    def from_model(cls, model: mujoco.MjModel) -> G1Indices:
        """Resolve the indices (raises :class:`ModelError` if the model was not built here)."""
        try:
            joints = [model.joint(n) for n in g1.MOTOR_ORDER]
            drives = [
                model.actuator(n if term == "bias" else f"{n}:{term}").id
                for term in DRIVE_TERMS
                for n in g1.MOTOR_ORDER
            ]
            sensors = {n: model.sensor(n) for n in SENSORS}
        except KeyError as err:
            raise ModelError(f"{err}: build the model with asap_sim.model.build_model") from None
        drive_ctrl = as_slice(np.array(drives))
        if not isinstance(drive_ctrl, slice):
            raise ModelError("the drive actuators are not contiguous [bias | kp | kd] in motor order: build "
                             "the model with asap_sim.model.build_model")
        return cls(
            qpos=np.array([int(j.qposadr[0]) for j in joints]),
            qvel=np.array([int(j.dofadr[0]) for j in joints]),
            actuator=np.array(drives[: g1.NUM_MOTORS]),
            drive_ctrl=drive_ctrl,
            base_body=model.body(BASE_BODY).id,
            sensor={n: slice(int(s.adr[0]), int(s.adr[0] + s.dim[0])) for n, s in sensors.items()},
        )


def as_slice(index: np.ndarray) -> slice | np.ndarray:
    """A contiguous ascending index array as a slice (indexing with it gives a view, not a copy);
    otherwise the array unchanged. G1 joints, dofs and motors are contiguous in motor order."""
    if index.size and np.array_equal(index, np.arange(index[0], index[0] + index.size)):
        return slice(int(index[0]), int(index[0] + index.size))
    return index


def standing_base_height(model: mujoco.MjModel, q: np.ndarray, clearance: float = 0.0) -> float:
    """Pelvis height at which the lowest foot geom of pose ``q`` is ``clearance`` above the floor."""
    idx = G1Indices.from_model(model)
    data = mujoco.MjData(model)
    data.qpos[:7] = (0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0)  # upright, pelvis at the origin
    data.qpos[idx.qpos] = q
    mujoco.mj_kinematics(model, data)
    feet = {model.body(b).id for b in FEET.values()}
    lowest = min(
        data.geom_xpos[g, 2] - _geom_half_height(model, data, g)
        for g in range(model.ngeom)
        if model.geom_bodyid[g] in feet and model.geom_contype[g]
    )
    return clearance - lowest


def _geom_half_height(model: mujoco.MjModel, data: mujoco.MjData, g: int) -> float:
    """Vertical half extent of a capsule or sphere geom in its current pose."""
    radius = model.geom_size[g, 0]
    if model.geom_type[g] != mujoco.mjtGeom.mjGEOM_CAPSULE:
        return radius
    axis_z = data.geom_xmat[g].reshape(3, 3)[2, 2]
    return radius + abs(axis_z) * model.geom_size[g, 1]
