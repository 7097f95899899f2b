"""asap-dds-check: what this machine sees of the G1's DDS traffic, and why not when it sees nothing.

Listens for a few seconds and prints: this process's DDS setup (RMW, domain, discovery range, Fast DDS
profile), the ROS nodes and the DDS participants that are not ROS nodes (the G1's firmware, programs on
Unitree's SDK, unitree_mujoco), every topic with its publishers and subscribers, and for /lowstate and
/lowcmd the samples received, their rate, how many carry a valid CRC and which mode_machine. Ends with a
verdict and the likely fix. Exit status 0 when /lowstate arrives with valid CRCs, 1 otherwise.

    asap-dds-check                    # 5 s on the current domain
    asap-dds-check --seconds 10
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from asap_bringup.dds import FASTDDS_PROFILE, disables_type_propagation, loaded_fastdds_profile
from asap_core import interfaces, variants
from asap_core.config_options import ConfigParser
from asap_core.wire import LOWCMD, LOWSTATE, WireCodec

WATCHED = {interfaces.LOWSTATE: LOWSTATE, interfaces.LOWCMD: LOWCMD}
"""The robot's own topics, decoded and CRC-checked."""
NOT_ROS = frozenset({"_CREATED_BY_BARE_DDS_APP_", "_NODE_NAME_UNKNOWN_"})
"""Node names ROS reports (Kilted; older distributions) for an endpoint of a participant that is no node."""


@dataclass
class Traffic:
    """Samples of one watched topic."""

    first_s: float | None = None
    last_s: float | None = None
    count: int = 0
    crc_ok: int = 0
    undecodable: int = 0
    mode_machines: set[int] = field(default_factory=set)

    def add(self, t_s: float, data: bytes, codec: WireCodec) -> None:
        self.first_s = t_s if self.first_s is None else self.first_s
        self.last_s, self.count = t_s, self.count + 1
        try:
            image = codec.from_cdr(data)
        except ValueError:
            self.undecodable += 1
            return
        self.crc_ok += codec.crc(image) == int(image["crc"])
        self.mode_machines.add(int(image["mode_machine"]))

    def rate_hz(self) -> float:
        if self.first_s is None or self.last_s is None or self.count < 2 or self.last_s == self.first_s:
            return 0.0
        return (self.count - 1) / (self.last_s - self.first_s)


@dataclass(frozen=True)
class Endpoints:
    """Who publishes and subscribes a topic: ROS node names, and participants that are not ROS nodes."""

    type_names: tuple[str, ...]
    publishers: tuple[str, ...] = ()
    subscribers: tuple[str, ...] = ()
    foreign_publishers: int = 0
    foreign_subscribers: int = 0


def environment_lines(environ: Mapping[str, str]) -> list[str]:
    """This process's DDS setup, as the user would have to check it."""
    rmw = environ.get("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp (default)")
    domain = environ.get("ROS_DOMAIN_ID", "0 (default)")
    scope = environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE", "SUBNET (default)")
    lines = [f"DDS: {rmw}, ROS_DOMAIN_ID={domain}, ROS_AUTOMATIC_DISCOVERY_RANGE={scope}"]
    if "cyclonedds" in rmw:
        lines.append(f"CycloneDDS config: {environ.get('CYCLONEDDS_URI', 'default (first interface found)')}")
    else:
        profile = loaded_fastdds_profile(environ)
        if profile is None:
            state = "none: CycloneDDS peers (the G1, Unitree's SDK) will be discovered but never matched"
        elif disables_type_propagation(profile):
            state = f"{profile} (type propagation disabled)"
        else:
            state = f"{profile} (does NOT disable type propagation: CycloneDDS peers will not match)"
        lines.append(f"Fast DDS profile: {state}")
    return lines


def verdict(traffic: Mapping[str, Traffic], endpoints: Mapping[str, Endpoints],
            environ: Mapping[str, str]) -> tuple[bool, list[str]]:
    """(robot state seen and valid, what to do), from what the check saw."""
    state, seen = traffic[interfaces.LOWSTATE], endpoints.get(interfaces.LOWSTATE)
    hints = []
    if seen is None or not (seen.publishers or seen.foreign_publishers):
        hints.append("nothing publishes /lowstate here: is the robot (or simulator) on, on this domain (the "
                     "G1 uses 0), and reachable? On the G1's network use "
                     "ROS_AUTOMATIC_DISCOVERY_RANGE=SUBNET (LOCALHOST keeps Fast DDS on this machine) and "
                     "the interface on 192.168.123.0/24; a firewall must let UDP multicast through")
    elif state.count == 0:
        profile = loaded_fastdds_profile(environ)
        if "cyclonedds" not in environ.get("RMW_IMPLEMENTATION", "") and (
                profile is None or not disables_type_propagation(profile)):
            hints.append("a /lowstate publisher is discovered but no sample arrives: CycloneDDS rejects the "
                         "type information Fast DDS 3 announces. Load asap's profile: "
                         f"export FASTDDS_DEFAULT_PROFILES_FILE={FASTDDS_PROFILE} (scripts/env.sh does)")
        else:
            hints.append("a /lowstate publisher is discovered but no sample arrives: check that both sides "
                         "use the same unitree_hg message definition and compatible QoS")
    for topic, t in traffic.items():
        if t.undecodable:
            hints.append(f"{topic}: {t.undecodable} samples of the wrong size for unitree_hg (another type?)")
        bad = t.count - t.undecodable - t.crc_ok
        if bad:
            hints.append(f"{topic}: {bad} of {t.count} samples fail the robot's CRC"
                         + (" (a simulator that sends crc = 0, e.g. unitree_mujoco: run the policy node with "
                            "check_lowstate_crc:=false)" if topic == interfaces.LOWSTATE else ""))
        unknown = sorted(m for m in t.mode_machines if m not in variants.VARIANTS)
        if unknown:
            hints.append(f"{topic}: mode_machine {unknown} is no G1 variant (unitree_mujoco sends 0: "
                         "sim_mode_machine:=0 on the policy node, never on the robot)")
    ok = state.count > 0 and state.crc_ok == state.count
    return ok, hints


def report(traffic: Mapping[str, Traffic], endpoints: Mapping[str, Endpoints], nodes: Sequence[str],
           foreign_participants: int, seconds: float, environ: Mapping[str, str]) -> tuple[bool, str]:
    """The printed report and whether the robot's state was seen."""
    lines = environment_lines(environ)
    lines.append(f"ROS nodes ({len(nodes)}): {', '.join(sorted(nodes)) or '-'}")
    lines.append(f"DDS participants that are not ROS nodes (robot firmware, Unitree SDK programs, "
                 f"simulators): {foreign_participants}")
    lines.append(f"topics seen in {seconds:g} s:")
    for topic in sorted(set(endpoints) | set(traffic)):
        e = endpoints.get(topic, Endpoints(()))
        pubs = [*e.publishers, *([f"{e.foreign_publishers} non-ROS"] if e.foreign_publishers else [])]
        subs = [*e.subscribers, *([f"{e.foreign_subscribers} non-ROS"] if e.foreign_subscribers else [])]
        line = (f"  {topic}  [{', '.join(e.type_names) or '?'}]  publishers: {', '.join(pubs) or '-'}  "
                f"subscribers: {', '.join(subs) or '-'}")
        t = traffic.get(topic)
        if t is not None:
            line += (f"\n      received {t.count} ({t.rate_hz():.1f} Hz), CRC valid {t.crc_ok}/{t.count}, "
                     f"mode_machine {sorted(t.mode_machines) or '-'}")
        lines.append(line)
    ok, hints = verdict(traffic, endpoints, environ)
    lines.append("result: " + ("OK: /lowstate arrives with valid CRCs" if ok else "NO valid /lowstate"))
    lines += [f"  - {h}" for h in hints]
    return ok, "\n".join(lines)


def observe(seconds: float) -> tuple[dict[str, Traffic], dict[str, Endpoints], list[str], int]:
    """Listen with rclpy: watched topics' samples (raw), then the graph as discovered."""
    # ROS only to listen: the verdict imports and is tested without ROS (test_dds_check.py, make test-robot)
    import rclpy
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from unitree_hg.msg import LowCmd, LowState

    rclpy.init()
    node = rclpy.create_node("asap_dds_check")
    traffic = {topic: Traffic() for topic in WATCHED}
    qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.BEST_EFFORT)  # matches any writer
    for topic, msg_type in ((interfaces.LOWSTATE, LowState), (interfaces.LOWCMD, LowCmd)):
        node.create_subscription(msg_type, topic, lambda data, t=topic: traffic[t].add(
            time.monotonic(), data, WATCHED[t]), qos, raw=True)
    try:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            rclpy.spin_once(node, timeout_sec=0.05)
        endpoints, participants = {}, set()
        me = node.get_fully_qualified_name()
        for topic, types in node.get_topic_names_and_types():
            infos = {"pub": node.get_publishers_info_by_topic(topic),
                     "sub": node.get_subscriptions_info_by_topic(topic)}
            names = {k: tuple(sorted({_fqn(i) for i in v if i.node_name not in NOT_ROS} - {me}))
                     for k, v in infos.items()}
            foreign = {k: {bytes(i.endpoint_gid[:12]) for i in v if i.node_name in NOT_ROS}
                       for k, v in infos.items()}
            participants |= foreign["pub"] | foreign["sub"]
            endpoints[topic] = Endpoints(tuple(types), names["pub"], names["sub"], len(foreign["pub"]),
                                         len(foreign["sub"]))
        nodes = [f"{ns.rstrip('/')}/{n}" for n, ns in node.get_node_names_and_namespaces()
                 if f"{ns.rstrip('/')}/{n}" != me]
        return traffic, endpoints, nodes, len(participants)
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


def _fqn(info) -> str:
    return f"{info.node_namespace.rstrip('/')}/{info.node_name}"


@dataclass(frozen=True, kw_only=True)
class DdsCheckCfg:
    """How long the check listens."""

    seconds: float = 5.0
    """How long to listen (s)."""


def parser() -> ConfigParser:
    """The options of ``asap-dds-check``."""
    ap = ConfigParser("asap-dds-check", __doc__)
    ap.field(DdsCheckCfg, "seconds")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``asap-dds-check``."""
    ap = parser()
    seconds = ap.config(ap.parse_args(argv), DdsCheckCfg).seconds
    if seconds <= 0:
        ap.error("--seconds must be positive")
    ok, text = report(*observe(seconds), seconds, os.environ)
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
