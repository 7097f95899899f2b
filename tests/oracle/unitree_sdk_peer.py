"""A live participant of Unitree's own Python SDK (CycloneDDS through unitree_sdk2py's channels).

Run in .venv-oracle as ``unitree_sdk_peer.py <domain id> <cyclonedds config file>``; the SDK's channel
factory gets that config instead of its auto-detected one (which picks the first real NIC). Requests
come one JSON object per line on stdin; each gets one JSON line on stdout:

  {"op": "state", "seconds": s}
      listen to rt/lowstate for s seconds -> count, SDK CRC checks of a sample of them, mode_machines,
      [tick, q (29 body motors)] of the sampled ones, q of the newest
  {"op": "command", "seconds": s, "rate_hz": r, "q": {"3": 0.6}, "kp": 60, "kd": 2,
   "crc": "sdk" | "bad", "mode_machine": null | int}
      publish SDK-built LowCmds on rt/lowcmd (mode_machine null: echo the newest LowState's): the given
      motors at their targets, every other body motor holding the newest LowState's position
  {"op": "robot", "seconds": s, "rate_hz": r, "mode_machine": 5, "q0": [29], "remote": [[t, [40 bytes]], ...]}
      be the robot: publish LowState on rt/lowstate with the SDK's CRC, joints following received commands
      (first order, 50 ms), the wireless remote bytes given from time t on -> received LowCmds: count,
      SDK CRC checks of a sample, mode_machines, q and kp of the newest with stiffness (kp > 0 somewhere)
  {"op": "quit"}

The SDK's pure-Python CRC costs ~5 ms per LowState and ~2.4 ms per LowCmd, so received samples are
CRC-checked one in ``CHECK_EVERY`` and the robot publishes at ``rate_hz`` (100 by default).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import unitree_sdk as sdk
from unitree_sdk2py.core import channel

BODY = 29
CHECK_EVERY = 25
FOLLOW_S = 0.05


class Peer:
    """The SDK side; every channel is created through the SDK's own ChannelFactory."""

    def __init__(self, domain: int, config: Path) -> None:
        channel.ChannelConfigAutoDetermine = config.read_text()
        channel.ChannelFactoryInitialize(domain)
        self._lock = threading.Lock()
        self._states: list = []
        self._state_count = 0
        self._newest_state = None
        self._cmds: list = []
        self._cmd_count = 0
        self._newest_cmd = self._newest_stiff_cmd = None
        self._listening = False
        self._cmd_pub = self._state_pub = self._cmd_sub = None
        self._state_sub = channel.ChannelSubscriber("rt/lowstate", sdk.hg.LowState_)
        self._state_sub.Init(self._on_state, 10)

    def _on_state(self, msg) -> None:
        with self._lock:
            self._newest_state = msg
            if self._listening:
                self._state_count += 1
                if self._state_count % CHECK_EVERY == 1:
                    self._states.append(msg)

    def _on_cmd(self, msg) -> None:
        with self._lock:
            self._newest_cmd = msg
            if any(m.kp > 0 for m in msg.motor_cmd):
                self._newest_stiff_cmd = msg
            self._cmd_count += 1
            if self._cmd_count % CHECK_EVERY == 1:
                self._cmds.append(msg)

    def state(self, seconds: float) -> dict:
        with self._lock:
            self._states, self._state_count, self._listening = [], 0, True
        time.sleep(seconds)
        with self._lock:
            self._listening = False
            sampled, count, newest = list(self._states), self._state_count, self._newest_state
        return {"count": count, "crc_checked": len(sampled),
                "crc_valid": sum(sdk.crc(m) == m.crc for m in sampled),
                "mode_machines": sorted({m.mode_machine for m in sampled}),
                "samples": [[m.tick, [s.q for s in m.motor_state[:BODY]]] for m in sampled],
                "q": [m.q for m in newest.motor_state[:BODY]] if newest is not None and count else None}

    def command(self, seconds: float, rate_hz: float, q: dict, kp: float, kd: float, crc: str,
                mode_machine: int | None) -> dict:
        if self._cmd_pub is None:
            self._cmd_pub = channel.ChannelPublisher("rt/lowcmd", sdk.hg.LowCmd_)
            self._cmd_pub.Init()
        with self._lock:
            state = self._newest_state
        if state is None:
            return {"sent": 0, "error": "no LowState received: nothing to hold the other motors at"}
        cmd = sdk.default.unitree_hg_msg_dds__LowCmd_()
        cmd.mode_pr, cmd.mode_machine = 0, state.mode_machine if mode_machine is None else mode_machine
        for i in range(BODY):
            m = cmd.motor_cmd[i]
            m.mode, m.q, m.kp, m.kd = 1, float(q.get(str(i), state.motor_state[i].q)), kp, kd
        cmd.crc = sdk.crc(cmd) ^ (0 if crc == "sdk" else 0xDEADBEEF)  # constant content: one CRC
        sent, period, t_end = 0, 1.0 / rate_hz, time.monotonic() + seconds
        while time.monotonic() < t_end:
            self._cmd_pub.Write(cmd)
            sent += 1
            time.sleep(period)
        return {"sent": sent, "mode_machine": cmd.mode_machine}

    def robot(self, seconds: float, rate_hz: float, mode_machine: int, q0: list, remote: list) -> dict:
        if self._state_pub is None:
            self._state_pub = channel.ChannelPublisher("rt/lowstate", sdk.hg.LowState_)
            self._state_pub.Init()
            self._cmd_sub = channel.ChannelSubscriber("rt/lowcmd", sdk.hg.LowCmd_)
            self._cmd_sub.Init(self._on_cmd, 10)
        with self._lock:
            self._cmds, self._cmd_count, self._newest_cmd, self._newest_stiff_cmd = [], 0, None, None
        msg = sdk.default.unitree_hg_msg_dds__LowState_()
        msg.mode_machine = mode_machine
        msg.imu_state.quaternion = [1.0, 0.0, 0.0, 0.0]
        q, dt = list(q0), 1.0 / rate_hz
        t0 = time.monotonic()
        tick = 0
        while (now := time.monotonic()) < t0 + seconds:
            with self._lock:
                cmd = self._newest_cmd
            keys = [b for t, b in remote if now - t0 >= t]
            msg.wireless_remote = keys[-1] if keys else [0] * 40
            for i in range(BODY):
                target = cmd.motor_cmd[i] if cmd is not None else None
                dq = (target.q - q[i]) / FOLLOW_S if target is not None and target.kp > 0 else 0.0
                q[i] += dq * dt
                msg.motor_state[i].q, msg.motor_state[i].dq = q[i], dq
            msg.tick = tick
            msg.crc = sdk.crc(msg)
            self._state_pub.Write(msg)
            tick += 1
            time.sleep(max(0.0, t0 + tick * dt - time.monotonic()))
        with self._lock:
            sampled, count, newest = list(self._cmds), self._cmd_count, self._newest_stiff_cmd
        return {"states_sent": tick, "count": count, "crc_checked": len(sampled),
                "crc_valid": sum(sdk.crc(m) == m.crc for m in sampled),
                "mode_machines": sorted({m.mode_machine for m in sampled}),
                "q": [m.q for m in newest.motor_cmd[:BODY]] if newest is not None else None,
                "kp": [m.kp for m in newest.motor_cmd[:BODY]] if newest is not None else None}


def main() -> None:
    peer = Peer(int(sys.argv[1]), Path(sys.argv[2]))
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        op = req.pop("op")
        if op == "quit":
            break
        print(json.dumps(getattr(peer, op)(**req)), flush=True)


if __name__ == "__main__":
    main()
