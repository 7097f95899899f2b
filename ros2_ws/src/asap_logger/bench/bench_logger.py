"""Recorder and reader throughput (``make bench``). Prints numbers and ratios to raw baselines.

1. Writer, in process: the recorder core (queue + writer thread + rosbag2 MCAP bag) fed the
   G1 mix (500 Hz LowState + 500 Hz LowCmd + 50 Hz PolicyRecord, rclpy-serialized bytes) as
   fast as it takes them, against raw writers writing the same bytes in the same run: the
   ``mcap`` library's Writer and rosbags' rosbag2 Writer.
2. Over DDS, recorder node in its own process: the G1 rates for 10 s (drops, CPU per message),
   then LowState alone at rising rates until messages are lost: the maximum rate before drops.
3. Reader: ``open_episode`` + typed arrays + alignment on the bag from 2, against rosbags
   deserializing the same messages one by one.

On a shared 2-core machine the figures vary (+-25 % run to run); the ratios are more stable.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import rclpy
from asap_msgs.msg import PolicyRecord
from mcap.writer import CompressionType
from mcap.writer import Writer as McapWriter
from rclpy.serialization import serialize_message
from rosbags.highlevel import AnyReader
from rosbags.rosbag2 import StoragePlugin
from rosbags.rosbag2 import Writer as RosbagsWriter
from rosbags.typesys import Stores, get_typestore
from unitree_hg.msg import LowCmd, LowState

from asap_logger.bag import BagCfg, TopicInfo, qos_profile
from asap_logger.msgdefs import load_definition
from asap_logger.reader import open_episode
from asap_logger.recorder import Recorder, RecorderCfg

HERE = Path(__file__).resolve().parent
PUBLISHER = HERE.parent / "test" / "graph" / "stream_publisher.py"
MIX = {
    "/lowstate": ("unitree_hg/msg/LowState", 500),
    "/lowcmd": ("unitree_hg/msg/LowCmd", 500),
    "/policy/record": ("asap_msgs/msg/PolicyRecord", 50),
}


def _mix(seconds: float) -> list[tuple[str, int, bytes]]:
    """(topic, log time, bytes) of ``seconds`` of the G1 mix, in time order."""
    rec = PolicyRecord(observation=[0.1] * 380, action=[0.0] * 29, action_raw=[0.0] * 29, q_target=[0.0] * 29)
    blobs = {
        "/lowstate": serialize_message(LowState()),
        "/lowcmd": serialize_message(LowCmd()),
        "/policy/record": serialize_message(rec),
    }
    t0, out = time.time_ns(), []
    for i in range(int(seconds * 500)):
        t = t0 + i * 2_000_000
        out += [("/lowstate", t, blobs["/lowstate"]), ("/lowcmd", t + 1000, blobs["/lowcmd"])]
        if i % 10 == 0:
            out.append(("/policy/record", t + 2000, blobs["/policy/record"]))
    return out


def _rate(n: int, nbytes: int, seconds: float) -> str:
    return f"{n / seconds / 1e3:7.1f} k msg/s {nbytes / seconds / 1e6:7.1f} MB/s"


def bench_writers(tmp: Path, seconds: float = 20.0) -> None:
    msgs = _mix(seconds)
    nbytes = sum(len(b) for _, _, b in msgs)
    print(f"-- writers: {len(msgs)} messages ({seconds:.0f} s of G1 data, {nbytes / 1e6:.1f} MB)")
    results = {}
    rec = Recorder(RecorderCfg(output_dir=tmp / "ours", bag=BagCfg(fsync=False)), lambda e: None)
    keys = {
        t: rec.add_topic(TopicInfo(t, load_definition(ty), (qos_profile(),))) for t, (ty, _) in MIX.items()
    }
    start = time.perf_counter()
    rec.start("bench", {})
    for topic, t, blob in msgs:
        rec.push(keys[topic], t, t, blob)
    rec.stop("bench")
    results["asap_logger Recorder (push -> writer thread -> bag)"] = time.perf_counter() - start
    rec.shutdown()

    start = time.perf_counter()
    with (tmp / "raw.mcap").open("wb") as fh:
        writer = McapWriter(fh, compression=CompressionType.NONE)
        writer.start("ros2", "bench")
        ids = {}
        for topic, (ty, _) in MIX.items():
            d = load_definition(ty)
            ids[topic] = writer.register_channel(
                topic, "cdr", writer.register_schema(ty, "ros2msg", d.text.encode())
            )
        for topic, t, blob in msgs:
            writer.add_message(ids[topic], t, blob, t)
        writer.finish()
    results["mcap.writer.Writer (raw)"] = time.perf_counter() - start

    store = get_typestore(Stores.EMPTY)
    start = time.perf_counter()
    with RosbagsWriter(tmp / "rosbags", version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        conns = {}
        for topic, (ty, _) in MIX.items():
            d = load_definition(ty)
            conns[topic] = writer.add_connection(
                topic, ty, typestore=store, msgdef=d.text, rihs01=d.type_hash
            )
        for topic, t, blob in msgs:
            writer.write(conns[topic], t, blob)
    results["rosbags rosbag2 Writer (raw)"] = time.perf_counter() - start
    ours = results["asap_logger Recorder (push -> writer thread -> bag)"]
    for name, dt in results.items():
        print(f"  {name:<52} {_rate(len(msgs), nbytes, dt)}  x{dt / ours:4.2f} the time of ours")
    print(f"  real-time factor of the recorder core: {seconds / ours:.0f}x the G1 rate")


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _publish(kind: str, rate: float, seconds: float, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(PUBLISHER), kind, "--rate", str(rate), "--seconds", str(seconds), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _sent(proc: subprocess.Popen) -> tuple[int, float]:
    out, err = proc.communicate(timeout=120)
    words = out.split("sent ")[-1].split()
    if proc.returncode != 0 or len(words) < 3:
        raise RuntimeError(f"publisher failed: {err[-500:]}")
    return int(words[0]), float(words[2])


class _Recording:
    """The recorder node in a process, one episode via its services."""

    def __init__(self, out: Path) -> None:
        from asap_msgs.srv import StartEpisode, StopEpisode

        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "asap_logger.recorder_node",
                "--ros-args",
                "-p",
                f"output_dir:={out}",
                "-p",
                "auto_episodes:=false",
                "-p",
                "discovery_period_s:=0.2",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.node = rclpy.create_node("bench_operator")
        self.start_cli = self.node.create_client(StartEpisode, "/recorder/start_episode")
        self.stop_cli = self.node.create_client(StopEpisode, "/recorder/stop_episode")
        assert self.start_cli.wait_for_service(timeout_sec=30), "recorder did not come up"
        self.types = (StartEpisode, StopEpisode)

    def call(self, client, request):
        future = client.call_async(request)
        rclpy.spin_until_future_complete(self.node, future, timeout_sec=30)
        return future.result()

    def episode(self, name: str) -> str:
        return self.call(self.start_cli, self.types[0].Request(name=name)).bag_path

    def stop(self) -> None:
        self.call(self.stop_cli, self.types[1].Request(reason="bench"))

    def close(self) -> None:
        self.node.destroy_node()
        self.proc.terminate()
        self.proc.communicate(timeout=20)


def bench_dds(tmp: Path, seconds: float = 10.0) -> Path:
    rec = _Recording(tmp / "dds")
    try:
        print(f"-- over DDS, recorder node in its own process, G1 rates for {seconds:.0f} s")
        bag = rec.episode("g1_rates")
        pubs = {k: _publish(k, r, seconds) for k, r in (("lowstate", 500), ("lowcmd", 500), ("record", 50))}
        time.sleep(1.0)  # CPU is measured over the steady middle of the run
        cpu0, wall0 = _cpu_s(rec.proc.pid), time.monotonic()
        time.sleep(seconds - 2.0)
        cpu, wall = _cpu_s(rec.proc.pid) - cpu0, time.monotonic() - wall0
        sent = {k: _sent(p) for k, p in pubs.items()}
        rec.stop()
        counts = open_episode(bag).counts
        got = sum(counts.get(t, 0) for t in ("/lowstate", "/lowcmd", "/policy/record"))
        n = sum(s[0] for s in sent.values())
        size = sum(p.stat().st_size for p in Path(bag).glob("*.mcap"))
        rates = ", ".join(f"{k} {s[0] / s[1]:.0f} Hz" for k, s in sent.items())
        print(f"  sent {n} ({rates}), recorded {got}: {n - got} dropped; {size / seconds / 1e6:.2f} MB/s")
        per_msg_us = 1e6 * cpu / wall / (n / seconds)
        print(
            f"  recorder CPU {100 * cpu / wall:.0f} % of one core = {per_msg_us:.0f} us per message "
            "(executor + raw callback + writer thread)"
        )
        _max_rate(rec)
    finally:
        rec.close()
    return Path(bag)


def _max_rate(rec: _Recording) -> None:
    print("-- max LowState rate before drops (3 s per step, one publisher process)")
    for rate in (1000, 2000, 4000, 8000):
        step = rec.episode(f"rate{rate}")
        pub = _publish("lowstate", rate, 3.0, "--fast")
        n_sent, dt = _sent(pub)
        rec.stop()
        got_n = open_episode(step, topics=["/lowstate"]).counts.get("/lowstate", 0)
        print(f"  asked {rate:5d} Hz, published {n_sent / dt:6.0f} Hz: recorded {got_n}/{n_sent}")
        if got_n < n_sent or n_sent / dt < 0.8 * rate:
            break


def bench_reader(bag: Path) -> None:
    print(f"-- reader on {bag.name}")
    start = time.perf_counter()
    ep = open_episode(bag)
    t_open = time.perf_counter() - start
    n = sum(ep.counts.values())
    nbytes = sum(p.stat().st_size for p in bag.glob("*.mcap"))
    start = time.perf_counter()
    ls, cmd, pol = ep.lowstate(), ep.lowcmd(), ep.policy()
    t_decode = time.perf_counter() - start
    start = time.perf_counter()
    ep.aligned(validate=False)
    t_align = time.perf_counter() - start
    decoded = len(ls.t) + len(cmd.t) + len(pol.t)
    print(f"  open (scan, keep bytes)            {_rate(n, nbytes, t_open)}")
    print(
        f"  decode LowState+LowCmd+Record      {decoded / t_decode / 1e3:7.1f} k msg/s  "
        f"({len(ls.t)}+{len(cmd.t)}+{len(pol.t)} messages in {t_decode * 1e3:.0f} ms, incl. schema parsing)"
    )
    print(f"  aligned() on {len(pol.t)} policy ticks    {t_align * 1e3:7.0f} ms")
    start = time.perf_counter()
    with AnyReader([bag]) as reader:
        conns = [c for c in reader.connections if c.topic == "/lowstate"]
        k = 0
        for conn, _, raw in reader.messages(connections=conns):
            reader.deserialize(raw, conn.msgtype)
            k += 1
            if k == 2000:
                break
    t_ref = time.perf_counter() - start
    ours = len(ls.t) / (t_decode * len(ls.t) / decoded)
    print(
        f"  baseline rosbags AnyReader deserialize LowState: {k / t_ref / 1e3:.1f} k msg/s "
        f"(ours ~{ours / (k / t_ref):.0f}x)"
    )


def main() -> None:
    rclpy.init()
    try:
        with tempfile.TemporaryDirectory(prefix="asap_bench_") as tmp:
            bench_writers(Path(tmp))
            bench_reader(bench_dds(Path(tmp)))
    finally:
        rclpy.shutdown()


if __name__ == "__main__":
    main()
