"""Synthetic episode bags of known content, serialized by rosbags (no rclpy needed).

Shared by the logger's reader tests, the bag fault tests and training's ingest tests: message builders
with known fields, :func:`write_messages` for any message sequence, :func:`write_episode` for a standard
episode.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rosbags.typesys import Stores, get_types_from_msg, get_typestore

from asap_core import interfaces
from asap_logger.bag import BagCfg, BagWriter, TopicInfo, qos_profile
from asap_logger.msgdefs import load_definition

T0 = 1_700_000_000_000_000_000
TYPES = {
    name: interfaces.TYPES[name]
    for name in (interfaces.LOWSTATE, interfaces.LOWCMD, interfaces.POLICY_RECORD, interfaces.ODOMETRY)
}


def typestore():
    """A rosbags typestore knowing every type the recorder records by default."""
    store = get_typestore(Stores.EMPTY)
    types = {}
    for msgtype in TYPES.values():
        d = load_definition(msgtype)
        types.update(get_types_from_msg(d.text, d.msgtype))
    store.register(types)
    return store


@dataclass
class Truth:
    """What a synthetic episode contains."""

    lowstate_q: np.ndarray
    lowstate_tick: np.ndarray
    lowstate_t: np.ndarray
    record_tick: np.ndarray
    record_obs: np.ndarray
    record_t: np.ndarray
    lowcmd_kp: np.ndarray
    odom_pos: np.ndarray


def lowstate(
    store, tick: int, q: np.ndarray, *, dq: np.ndarray | None = None, tau: np.ndarray | None = None,
    mode_machine: int = 5,
):
    """A LowState with ``tick``, joint positions ``q`` (29), velocities ``dq`` (29; default 0.1 i) and
    torques ``tau`` (29; default -0.5 i)."""
    m = store.types
    motors = [
        m["unitree_hg/msg/MotorState"](
            mode=1,
            q=float(q[i]) if i < 29 else 0.0,
            dq=(0.1 * i if dq is None else float(dq[i])) if i < 29 else 0.0,
            ddq=0.0,
            tau_est=-0.5 * i if tau is None else (float(tau[i]) if i < 29 else 0.0),
            temperature=np.zeros(2, np.int16),
            vol=24.0,
            sensor=np.zeros(2, np.uint32),
            motorstate=0,
            reserve=np.zeros(4, np.uint32),
        )
        for i in range(35)
    ]
    imu = m["unitree_hg/msg/IMUState"](
        quaternion=np.array([1, 0, 0, 0], np.float32),
        gyroscope=np.array([0.1, 0.2, 0.3], np.float32),
        accelerometer=np.array([0, 0, 9.81], np.float32),
        rpy=np.zeros(3, np.float32),
        temperature=30,
    )
    return m["unitree_hg/msg/LowState"](
        version=np.zeros(2, np.uint32),
        mode_pr=0,
        mode_machine=mode_machine,
        tick=tick,
        imu_state=imu,
        motor_state=motors,
        wireless_remote=np.zeros(40, np.uint8),
        reserve=np.zeros(4, np.uint32),
        crc=0,
    )


def lowcmd(store, kp: float):
    """A LowCmd whose motors all have gain ``kp``."""
    m = store.types
    motors = [
        m["unitree_hg/msg/MotorCmd"](mode=1, q=0.1, dq=0.0, tau=0.0, kp=kp, kd=1.0, reserve=0)
        for _ in range(35)
    ]
    return m["unitree_hg/msg/LowCmd"](
        mode_pr=0, mode_machine=5, motor_cmd=motors, reserve=np.zeros(4, np.uint32), crc=0
    )


def header(store, t_ns: int, frame: str = ""):
    """A std_msgs/Header stamped ``t_ns``."""
    m = store.types
    return m["std_msgs/msg/Header"](
        stamp=m["builtin_interfaces/msg/Time"](sec=t_ns // 10**9, nanosec=t_ns % 10**9), frame_id=frame
    )


def record(
    store,
    t_ns: int,
    tick: int,
    lowstate_tick: int,
    obs: np.ndarray,
    *,
    mode: int = 3,
    phase: float | None = None,
    policy_sha256: str = "ab" * 32,
    action: np.ndarray | None = None,
    action_raw: np.ndarray | None = None,
):
    """A PolicyRecord for policy tick ``tick`` (stamped ``t_ns``). Defaults: POLICY mode, phase
    tick / 100, action = action_raw = linspace(-1, 1, 29). Empty vectors are what the node sends
    outside POLICY mode."""
    act = np.linspace(-1, 1, 29, dtype=np.float32) if action is None else np.asarray(action, np.float32)
    raw = act if action_raw is None else np.asarray(action_raw, np.float32)
    return store.types["asap_msgs/msg/PolicyRecord"](
        header=header(store, t_ns),
        tick=tick,
        mode=mode,
        phase=tick / 100.0 if phase is None else phase,
        policy_sha256=policy_sha256,
        lowstate_tick=lowstate_tick,
        observation=obs.astype(np.float32),
        action_raw=raw,
        action=act,
        q_target=act * 0.25,
        inference_ms=0.03,
    )


def odometry(
    store,
    t_ns: int,
    pos: np.ndarray,
    *,
    quat: Sequence[float] = (1.0, 0.0, 0.0, 0.0),
    lin_vel: Sequence[float] = (1.0, 0.0, 0.0),
    ang_vel: Sequence[float] = (0.0, 0.0, 0.5),
):
    """An Odometry at ``pos``, orientation ``quat`` (w, x, y, z), twist in the child frame."""
    g = store.types
    w, x, y, z = (float(v) for v in quat)
    vec = g["geometry_msgs/msg/Vector3"]
    pose = g["geometry_msgs/msg/Pose"](
        position=g["geometry_msgs/msg/Point"](x=pos[0], y=pos[1], z=pos[2]),
        orientation=g["geometry_msgs/msg/Quaternion"](x=x, y=y, z=z, w=w),
    )
    twist = g["geometry_msgs/msg/Twist"](
        linear=vec(*(float(v) for v in lin_vel)), angular=vec(*(float(v) for v in ang_vel))
    )
    return g["nav_msgs/msg/Odometry"](
        header=header(store, t_ns, "world"),
        child_frame_id="pelvis",
        pose=g["geometry_msgs/msg/PoseWithCovariance"](pose=pose, covariance=np.zeros(36)),
        twist=g["geometry_msgs/msg/TwistWithCovariance"](twist=twist, covariance=np.zeros(36)),
    )


def write_messages(
    path: Path,
    messages: Iterable[tuple[str, int, object]],
    *,
    metadata: dict | None = None,
    cfg: BagCfg | None = None,
) -> Path:
    """Write ``(topic, receive time ns, message)`` in order into the bag ``path`` (topics of :data:`TYPES`).

    ``metadata`` is stored as the recorder stores an episode's: in the bag and as ``episode.json``.
    """
    store = typestore()
    meta = {"episode_id": path.name, **(metadata or {})}
    writer = BagWriter(
        path,
        cfg or BagCfg(fsync=False, chunk_bytes=64 << 10),
        custom_data={"episode_id": meta["episode_id"], "json": json.dumps(meta)},
    )
    ids: dict[str, int] = {}
    for topic, t_ns, msg in messages:
        if topic not in ids:
            ids[topic] = writer.add_topic(TopicInfo(topic, load_definition(TYPES[topic]), (qos_profile(),)))
        writer.write(ids[topic], t_ns, t_ns, store.serialize_cdr(msg, TYPES[topic]))
    writer.close()
    (path / "episode.json").write_text(json.dumps(meta))
    return path


def write_episode(
    path: Path,
    *,
    seconds: float = 2.0,
    skip_topics: tuple[str, ...] = (),
    drop_records: tuple[int, ...] = (),
    cfg: BagCfg | None = None,
    obs_dim: int = 64,
) -> Truth:
    """Write a bag with 500 Hz LowState/LowCmd/Odometry and 50 Hz PolicyRecord; return the truth."""
    store = typestore()
    writer = BagWriter(
        path, cfg or BagCfg(fsync=False, chunk_bytes=64 << 10), custom_data={"episode_id": path.name}
    )
    ids = {
        t: writer.add_topic(TopicInfo(t, load_definition(ty), (qos_profile(),)))
        for t, ty in TYPES.items()
        if t not in skip_topics
    }
    n = int(seconds * 500)
    rng = np.random.default_rng(0)
    q = rng.normal(size=(n, 29)).astype(np.float32)
    ticks = np.arange(n, dtype=np.uint32) * 2 + 1000
    t_ls = T0 + np.arange(n, dtype=np.int64) * 2_000_000
    rec_idx = [i for i in range(0, n, 10) if i // 10 not in drop_records]
    obs = rng.normal(size=(len(rec_idx), obs_dim)).astype(np.float32)
    kp = np.arange(n, dtype=np.float32)
    ser = store.serialize_cdr
    for i in range(n):
        t = int(t_ls[i])
        if interfaces.LOWSTATE in ids:
            state = lowstate(store, int(ticks[i]), q[i])
            writer.write(ids[interfaces.LOWSTATE], t, t, ser(state, TYPES[interfaces.LOWSTATE]))
        if interfaces.ODOMETRY in ids:
            writer.write(
                ids[interfaces.ODOMETRY],
                t + 100,
                t,
                ser(odometry(store, t, np.array([i * 1e-3, 0.0, 0.8])), TYPES[interfaces.ODOMETRY]),
            )
        if interfaces.POLICY_RECORD in ids and i in rec_idx:
            k = rec_idx.index(i)
            writer.write(
                ids[interfaces.POLICY_RECORD],
                t + 200_000,
                t,
                ser(record(store, t, i // 10, int(ticks[i]), obs[k]), TYPES[interfaces.POLICY_RECORD]),
            )
        if interfaces.LOWCMD in ids:
            command = ser(lowcmd(store, float(kp[i])), TYPES[interfaces.LOWCMD])
            writer.write(ids[interfaces.LOWCMD], t + 300_000, t, command)
    writer.close()
    rec_t = t_ls[rec_idx] + 200_000
    return Truth(
        q,
        ticks,
        t_ls,
        np.array([i // 10 for i in rec_idx]),
        obs,
        rec_t,
        kp,
        np.array([[i * 1e-3, 0.0, 0.8] for i in range(n)]),
    )
