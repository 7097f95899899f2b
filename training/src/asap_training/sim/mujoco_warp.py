"""N G1 instances as the worlds of one MuJoCo Warp (MJWarp) batch: thousands of envs on a GPU, or a few on
Warp's CPU device (slow, for CI parity with the C backend).

The model is the one ``asap_sim.model.build_model`` makes (the drive law in its actuators, Euler
integrator), put on the device once (``mujoco_warp.put_model``); ``num_envs`` worlds share it. Model
variants (e.g. floor friction for domain randomization) become per-world copies of the fields in which the
variants differ (MJWarp indexes such "batched" model fields by ``world % rows``). Per policy step: the
command pieces of the actuation latency (:class:`asap_sim.motor.ControlDelay`) go to the device in one
host->device copy; the substeps run there (captured once per piece layout as a graph, replayed after);
kinematics, ``comPos`` and ``comVel`` bring body poses and velocities up to the new state, as the CPU backend
does; one gather packs the arrays the MDP reads (``RAW_FIELDS``) into one device buffer, seen by torch without
a copy (``wp.to_torch``), from which :class:`StateLayout` derives the :class:`SimState` tensors on the device
with the code the C backend uses. Commands arrive as tensors on the device and are written into the ctrl
pieces in place: a policy step moves nothing between host and device but one overflow flag per step.
A reset is fixed-shape device work too (the new states staged for every world, a mask of those reset), so
it is one graph as well: launching its ~160 kernels one by one from Python cost more than the physics.
MJWarp computes in float32 (the C backend in float64): trajectories agree to the tolerances stated in
``training/tests/test_sim_backends.py``, not bit for bit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import mujoco
import mujoco_warp as mjw
import numpy as np
import torch
import warp as wp

from asap_core import g1, quat
from asap_sim.model import G1Indices
from asap_sim.motor import MotorCommand, MotorParams
from asap_training.sim.base import RAW_FIELDS, DriveInput, SimState, StateLayout, to_numpy

FATAL_OVERFLOW = (
    mjw.OverflowType.NEFC
    | mjw.OverflowType.NJMAX_NNZ
    | mjw.OverflowType.BROADPHASE
    | mjw.OverflowType.NARROWPHASE
    | mjw.OverflowType.CONTACT_MATCH
)
"""Overflows after which MJWarp silently drops contacts or constraints (the solver's iteration limit is
not one of them: the C backend stops at the same limit)."""

SOLVER_TOLERANCE = 1e-10
"""Newton solver tolerance on the device. MJWarp's solver also stops when its predicted improvement (the
Newton decrement) falls below the tolerance; at the model's 1e-8 that ends one iteration before C MuJoCo on
the G1 (qacc ~1e-2 rad/s^2 off in the light wrist links: centimetres of hand drift per second). At 1e-10 it
stops where C does (qacc equal to float32 precision), at about one more iteration per physics step."""


@wp.kernel
def _gather(src: wp.array2d(dtype=float), col0: int, out: wp.array2d(dtype=float)):
    world, j = wp.tid()
    out[world, col0 + j] = src[world, j]


@wp.kernel
def _gather_flag(src: wp.array(dtype=int), col: int, out: wp.array2d(dtype=float)):
    world = wp.tid()
    out[world, col] = float(src[world])


@wp.kernel
def _scatter(src: wp.array2d(dtype=float), rows: wp.array(dtype=int), add: int, out: wp.array2d(dtype=float)):
    k, j = wp.tid()
    if add:
        out[rows[k], j] = out[rows[k], j] + src[k, j]
    else:
        out[rows[k], j] = src[k, j]


@wp.kernel
def _masked_set(src: wp.array2d(dtype=float), mask: wp.array(dtype=wp.bool), out: wp.array2d(dtype=float)):
    world, j = wp.tid()
    if mask[world]:
        out[world, j] = src[world, j]


@wp.kernel
def _set_ctrl(pieces: wp.array3d(dtype=float), piece: int, col0: int, ctrl: wp.array2d(dtype=float)):
    world, j = wp.tid()
    ctrl[world, col0 + j] = pieces[piece, world, j]


def _as_float_2d(a: wp.array) -> wp.array:
    """A contiguous (worlds, n) array of scalars or vectors, seen as (worlds, n * vector length) floats."""
    width = int(np.prod(a.shape[1:])) * wp.types.type_size(a.dtype)
    return wp.array(ptr=a.ptr, dtype=float, shape=(a.shape[0], width), device=a.device)


class MujocoWarpSimulator:
    """MuJoCo Warp backend of :class:`asap_training.sim.base.Simulator`.

    ``models``: variants of one G1 model from ``asap_sim.model.build_model`` (variant 0 at start).
    ``device``: ``"cpu"`` (Warp's CPU device: tests) or ``"cuda:N"``; the state tensors live there (float32).
    ``threads`` is accepted for the common backend signature and ignored: MJWarp parallelizes over worlds on
    the device (on Warp's CPU device every kernel runs serially). ``nconmax``: contacts per world on average
    (MJWarp pools them over worlds), ``njmax``: constraint rows per world (a fallen G1 needs ~32 contacts,
    ~130 rows); an overflow raises, since MJWarp would otherwise drop contacts silently.
    ``solver_tolerance``: see :data:`SOLVER_TOLERANCE` (None keeps the model's). ``graph``: capture each
    policy step's and each reset's device work once as a graph and replay it (a CUDA graph on a GPU; on
    Warp's CPU device a recorded launch sequence, ~5x faster than Python launching every kernel); False
    launches eagerly (same numbers, bit for bit).
    """

    def __init__(
        self,
        models: Sequence[mujoco.MjModel],
        num_envs: int,
        motor_params: MotorParams,
        latency_steps: int = 0,
        threads: int = 0,
        *,
        device: str = "cuda:0",
        nconmax: int = 64,
        njmax: int = 256,
        solver_tolerance: float | None = SOLVER_TOLERANCE,
        graph: bool = True,
    ) -> None:
        """Put the model and ``num_envs`` worlds on ``device`` and compute their initial state."""
        del threads  # see the class docstring
        self.models = list(models)
        self.num_envs = num_envs
        m = self.models[0]
        self.physics_dt = float(m.opt.timestep)
        self.layout = StateLayout.from_model(m)
        self.motor_params = motor_params
        self.latency_steps = latency_steps
        self.variant = np.zeros(num_envs, dtype=np.intp)
        self.device = torch.device(device)
        self._wp_device = wp.get_device(str(self.device) if self.device.type == "cuda" else "cpu")
        if self._wp_device.is_cuda:
            # torch and Warp on one CUDA stream: the MDP's tensors and the physics kernels are then ordered
            # without events (Warp's stream does not wait for torch's default one), and graphs can be
            # captured on it (never on the legacy default stream)
            torch.cuda.set_stream(wp.stream_to_torch(self._wp_device))
        zeros = SimState.zeros(num_envs, g1.NUM_MOTORS, len(self.layout.bodies))
        self.state = SimState(**{k: torch.as_tensor(v, dtype=torch.float32, device=self.device)
                                 for k, v in vars(zeros).items()})
        self.graph = graph
        self._qpos0 = m.qpos0.copy()
        self._ctrl_sl = G1Indices.from_model(m).drive_ctrl
        self._drive = DriveInput(num_envs, latency_steps)
        self._graphs: dict[tuple[int | str, ...], Any] = {}
        with wp.ScopedDevice(self._wp_device):
            self.mw, self._variant_fields = _put_variants(self.models, num_envs)
            if solver_tolerance is not None:
                self.mw.opt.tolerance.fill_(solver_tolerance)
            self.dw = mjw.make_data(m, nworld=num_envs, nconmax=nconmax, njmax=njmax)
            self._fields = [_as_float_2d(getattr(self.dw, name)) for name in RAW_FIELDS]
            widths = [a.shape[1] for a in self._fields]
            self._cols = np.cumsum([0, *widths])  # raw field i in packed columns [cols[i], cols[i+1])
            self._shapes = {name: np.shape(getattr(mujoco.MjData(m), name)) for name in RAW_FIELDS}
            self._packed = wp.zeros((num_envs, int(self._cols[-1]) + 1), dtype=float)  # + overflow flags
            self._packed_t = wp.to_torch(self._packed)  # the same memory
            self._all_t = torch.arange(num_envs, device=self.device)
            self._pieces = wp.zeros((2, num_envs, self._ctrl_sl.stop - self._ctrl_sl.start), dtype=float)
            self._pieces_t = wp.to_torch(self._pieces)
            # reset staging: the new qpos/qvel of every world, applied where the mask is set
            self._reset_qpos = wp.zeros((num_envs, self.mw.nq), dtype=float)
            self._reset_qvel = wp.zeros((num_envs, self.mw.nv), dtype=float)
            self._reset_mask = wp.zeros(num_envs, dtype=wp.bool)
            self._reset_t = [wp.to_torch(a) for a in (self._reset_qpos, self._reset_qvel, self._reset_mask)]
            mjw.forward(self.mw, self.dw)
            self._gather()
            self._read_state(self._all_t)

    # --- protocol -------------------------------------------------------------------------------------
    def set_model_variant(self, env_ids: np.ndarray, variant: np.ndarray) -> None:
        """Assign physics variants per env (uploads the per-world rows of the fields that differ)."""
        self.variant[to_numpy(env_ids)] = to_numpy(variant)
        if not self._variant_fields:
            return
        with wp.ScopedDevice(self._wp_device):
            for array, table in self._variant_fields:
                array.assign(table[self.variant])

    def reset(
        self,
        env_ids: np.ndarray,
        root_pos_w: np.ndarray,
        root_quat_w: np.ndarray,
        root_lin_vel_w: np.ndarray,
        root_ang_vel_w: np.ndarray,
        joint_pos: np.ndarray,
        joint_vel: np.ndarray,
        keep_latency: bool = False,
        in_flight: Sequence[MotorCommand] = (),
    ) -> None:
        """Start envs over (:meth:`~asap_training.sim.base.Simulator.reset`; cleared as by
        ``mj_resetData``: zero warm start, ctrl, forces); free-joint qvel is (world linear, body angular)
        velocity."""
        ids = self._ids(env_ids)
        if ids.numel() == 0:
            return
        f32 = lambda a: torch.as_tensor(a, device=self.device, dtype=torch.float32)  # noqa: E731
        root_quat_w = f32(root_quat_w)
        qpos = f32(self._qpos0).repeat(ids.numel(), 1)
        qvel = torch.zeros(ids.numel(), self.mw.nv, device=self.device)
        qpos[:, :3], qpos[:, 3:7], qpos[:, self.layout.qpos] = f32(root_pos_w), root_quat_w, f32(joint_pos)
        qvel[:, :3] = f32(root_lin_vel_w)
        qvel[:, 3:6] = quat.rotate_inv(root_quat_w, f32(root_ang_vel_w))
        qvel[:, self.layout.qvel] = f32(joint_vel)
        staged_qpos, staged_qvel, mask = self._reset_t
        staged_qpos[ids], staged_qvel[ids] = qpos, qvel
        mask.zero_()
        mask[ids] = True
        if not keep_latency:
            self._drive.clear(ids, in_flight, self.motor_params)
        with wp.ScopedDevice(self._wp_device):
            self._run(("reset",), self._reset_worlds)
            self._read_state(ids)

    def push(self, env_ids: np.ndarray, delta_lin_vel_w: np.ndarray) -> None:
        """Kick the pelvis (the state shows it after the next step, as on the CPU backend)."""
        ids = self._ids(env_ids)
        if ids.numel() == 0:
            return
        kick = torch.as_tensor(delta_lin_vel_w, device=self.device, dtype=torch.float32)
        with wp.ScopedDevice(self._wp_device):
            self._scatter(kick, wp.from_torch(ids.to(torch.int32).contiguous(), dtype=wp.int32), self.dw.qvel,
                          add=True)

    def step(self, command: MotorCommand, substeps: int) -> None:
        """Hold ``command`` for ``substeps`` physics steps (through the actuation latency) on the device."""
        pieces = self._drive.pieces(command, self.motor_params, substeps)
        for p, (piece_ctrl, _) in enumerate(pieces):
            as_owned = piece_ctrl.copy() if isinstance(piece_ctrl, np.ndarray) else piece_ctrl  # a view: copy
            self._pieces_t[p] = torch.as_tensor(as_owned, device=self.device)
        nsteps = tuple(n for _, n in pieces)
        with wp.ScopedDevice(self._wp_device):
            self._run(nsteps, lambda: self._advance(nsteps))
            self._read_state(self._all_t)

    # --- extras ---------------------------------------------------------------------------------------
    def synchronize(self) -> None:
        """Wait for the device (for timing: :meth:`step` already returns with the state on the host)."""
        wp.synchronize_device(self._wp_device)

    @property
    def captured(self) -> list[tuple[int | str, ...]]:
        """The device work captured as graphs so far: the command-piece layouts of policy steps (physics
        steps per piece) and ``("reset",)``."""
        return list(self._graphs)

    def memory_per_world_bytes(self) -> int:
        """Device bytes of the batch's data divided by the worlds (model not included)."""
        return sum(a.capacity for a in _arrays(self.dw)) // self.num_envs

    # --- internals ------------------------------------------------------------------------------------
    def _run(self, key: tuple[int | str, ...], work: Callable[[], None]) -> None:
        """Do ``work`` (device launches only): replay its graph, captured at the first call, or launch it
        eagerly when ``graph`` is off."""
        if not self.graph:
            work()
            return
        if key not in self._graphs:
            with wp.ScopedCapture() as capture:
                work()
            self._graphs[key] = capture.graph
        wp.capture_launch(self._graphs[key])

    def _reset_worlds(self) -> None:
        """The device work of a reset: clear the masked worlds as ``mj_resetData`` does, set their staged
        qpos/qvel, recompute every world (MJWarp has no per-world forward; the others' next step recomputes
        all it changes, their warm start stays) and pack the raw arrays."""
        mjw.reset_data(self.mw, self.dw, self._reset_mask)
        for staged, out in ((self._reset_qpos, self.dw.qpos), (self._reset_qvel, self.dw.qvel)):
            wp.launch(_masked_set, dim=staged.shape, inputs=[staged, self._reset_mask], outputs=[out])
        mjw.forward(self.mw, self.dw)
        self._gather()

    def _advance(self, nsteps: tuple[int, ...]) -> None:
        """The device work of one policy step (what a graph captures): per command piece, its ctrl then
        its physics steps; then body poses and velocities at the new state and the packed raw arrays."""
        width = self._pieces.shape[2]
        for p, n in enumerate(nsteps):
            wp.launch(_set_ctrl, dim=(self.num_envs, width),
                      inputs=[self._pieces, p, self._ctrl_sl.start], outputs=[self.dw.ctrl])
            for _ in range(n):
                mjw.step(self.mw, self.dw)
        # mj_step leaves body poses and velocities at the start of its last step: bring the ones the MDP
        # reads up to the new qpos/qvel (as the CPU backend does)
        mjw.kinematics(self.mw, self.dw)
        mjw.com_pos(self.mw, self.dw)
        mjw.com_vel(self.mw, self.dw)
        self._gather()

    def _gather(self) -> None:
        """Pack the raw arrays of every world into the packed buffer (row = world)."""
        for src, col0 in zip(self._fields, self._cols[:-1], strict=True):
            wp.launch(_gather, dim=(self.num_envs, src.shape[1]), inputs=[src, int(col0)],
                      outputs=[self._packed])
        wp.launch(_gather_flag, dim=self.num_envs, inputs=[self.dw.overflow, int(self._cols[-1])],
                  outputs=[self._packed])

    def _ids(self, env_ids: Any) -> torch.Tensor:
        return torch.as_tensor(env_ids, device=self.device).long().flatten()

    def _scatter(self, values: torch.Tensor, rows: wp.array, out: wp.array, add: bool = False) -> None:
        src = wp.from_torch(values.to(torch.float32).contiguous(), dtype=wp.float32)
        wp.launch(_scatter, dim=tuple(src.shape), inputs=[src, rows, int(add)], outputs=[out])

    def _read_state(self, ids: torch.Tensor) -> None:
        """Derive the state of envs ``ids`` on the device from their packed raw arrays (no copy)."""
        count = ids.numel()
        packed = self._packed_t if ids is self._all_t else self._packed_t[ids]  # rows in the order of ids
        flags = packed[:, -1].to(torch.int64) & int(FATAL_OVERFLOW)
        if bool(flags.any()):  # the one value a step brings to the host
            kinds = mjw.OverflowType(int(np.bitwise_or.reduce(to_numpy(flags))))
            bad = ids[flags != 0].tolist()
            raise RuntimeError(
                f"MJWarp buffer overflow {kinds!r} in envs {bad[:8]}: contacts or constraints were dropped; "
                f"raise nconmax/njmax "
                f"(simulator_args) above {self.dw.naconmax // self.num_envs}/{self.dw.njmax}"
            )
        raw = {
            name: packed[:, a:b].reshape(count, *self._shapes[name])
            for name, a, b in zip(RAW_FIELDS, self._cols[:-1], self._cols[1:], strict=True)
        }
        self.layout.write(self.state, ids, raw)


def _arrays(obj: Any) -> Iterator[wp.array]:
    """Every warp array of an MJWarp ``Model``/``Data`` (nested dataclasses included)."""
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name, None)
        if isinstance(value, wp.array):
            yield value
        elif dataclasses.is_dataclass(value):
            yield from _arrays(value)


def _put_variants(
    models: Sequence[mujoco.MjModel], num_envs: int
) -> tuple[mjw.Model, list[tuple[wp.array, np.ndarray]]]:
    """The device model of ``models[0]``, with every field in which the variants differ batched per world.

    Returns the model and, per batched field, its (num_envs, ...) device array and the (variants, ...)
    table of values to fill it from. A field that differs but that MJWarp cannot vary per world (not a
    ``Model`` array whose shape starts with ``*``) raises NotImplementedError naming it.
    """
    if len(models) == 1:
        return mjw.put_model(models[0]), []
    specs = {f.name: f.type for f in dataclasses.fields(mjw.Model)}
    variants = [vars(mjw.put_model(m)) for m in models]
    tables = {}
    for name, value in variants[0].items():
        values = [_plain(v[name]) for v in variants]
        if all(_same(values[0], v) for v in values[1:]):
            continue
        if not isinstance(value, wp.array) or getattr(specs.get(name), "shape", ("",))[0] != "*":
            raise NotImplementedError(
                f"model variants differ in {name!r}, which MuJoCo Warp cannot vary per world (only the "
                f"mujoco_warp.Model arrays with a leading '*' dimension can)"
            )
        tables[name] = np.stack([v[0] for v in values])  # (variants, ...): each variant's one row
    model = mjw.put_model(models[0], batch_sizes=dict.fromkeys(tables, num_envs))
    return model, [(getattr(model, name), table) for name, table in tables.items()]


def _plain(value: Any) -> Any:
    """A field value in comparable form (device arrays as numpy, nested options as field dicts)."""
    if isinstance(value, wp.array):
        return value.numpy()
    if isinstance(value, (tuple, list)):
        return tuple(_plain(v) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return value


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(a, b)
    return bool(a == b)
