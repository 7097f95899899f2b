"""SROS2 for the robot profile (issue 16, item 9): the access-control policy says what the README
promises, the robot profile runs every node in its enclave, and enforcement fails closed here.

Denied calls and rejected writers cannot be observed in CI: the PyPI wheels' Fast DDS has no
security plugins and sros2 is not on PyPI (config/security/README.md, "What was tested where").
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from asap_bringup import runner
from asap_bringup.profile import launch_entries, load_profile

CONFIG = Path(__file__).resolve().parents[1] / "config"
POLICY = ET.parse(CONFIG / "security" / "policy.xml").getroot()


def granted(kind: str, access: str, name: str) -> set[str]:
    """Enclaves whose policy lets a node ``access`` (publish, subscribe, request, reply) ``name``."""
    out = set()
    for enclave in POLICY.iter("enclave"):
        for block in enclave.iter(kind):
            if block.get(access) == "ALLOW" and name in {e.text for e in block}:
                out.add(enclave.get("path"))
    return out


def test_only_the_policy_node_may_publish_lowcmd() -> None:
    assert granted("topics", "publish", "lowcmd") == {"/asap/policy_node"}
    assert granted("topics", "subscribe", "lowcmd") == {"/asap/recorder"}


@pytest.mark.parametrize("service", ["policy/set_mode", "policy/load_policy"])
def test_only_the_operator_may_call_the_policy_services(service: str) -> None:
    assert granted("services", "request", service) == {"/asap/operator"}
    assert granted("services", "reply", service) == {"/asap/policy_node"}


def test_no_rule_denies_or_grants_by_wildcard() -> None:
    texts = [e.text for e in POLICY.iter() if e.tag in ("topic", "service")]
    assert not any("*" in t for t in texts)
    assert {b.get(a) for b in POLICY.iter() for a in ("publish", "subscribe", "request", "reply")
            if b.get(a)} == {"ALLOW"}


def test_every_robot_node_runs_in_an_enclave_that_has_its_profile() -> None:
    profile = load_profile("robot", CONFIG)
    profiles = {(e.get("path"), p.get("node")) for e in POLICY.iter("enclave") for p in e.iter("profile")}
    for node in profile.nodes:
        assert (node.enclave, node.name) in profiles, node
    args = runner.parse_arguments(profile, [])
    for entry in launch_entries(profile, args.__getitem__):
        cmd = runner.node_command(entry, "/bin/x")
        assert cmd[cmd.index("--enclave") + 1] == f"/asap/{entry['name']}", cmd


def _start_policy_node_enforced(keystore: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "ROS_SECURITY_ENABLE": "true", "ROS_SECURITY_STRATEGY": "Enforce",
           "ROS_SECURITY_KEYSTORE": str(keystore)}
    return subprocess.run([sys.executable, "-m", "asap_policy.policy_node", "--ros-args",
                           "--enclave", "/asap/policy_node"], env=env, capture_output=True, text=True,
                          timeout=60)


def test_enforced_security_without_an_enclave_refuses_to_start(tmp_path: Path) -> None:
    pytest.importorskip("rclpy")
    done = _start_policy_node_enforced(tmp_path / "no_keystore")
    assert done.returncode != 0 and "SECURITY ERROR" in done.stderr, done.stderr[-2000:]


def test_enforced_security_without_plugins_refuses_to_start(tmp_path: Path) -> None:
    """The PyPI wheels: an enclave present, no security plugins in Fast DDS -> no node, never an open one."""
    pytest.importorskip("rclpy")
    enclave = tmp_path / "keystore" / "enclaves" / "asap" / "policy_node"
    enclave.mkdir(parents=True)
    for name in ("cert.pem", "key.pem", "identity_ca.cert.pem", "permissions_ca.cert.pem",
                 "governance.p7s", "permissions.p7s"):
        (enclave / name).write_text("placeholder: the node must not start on these\n")
    done = _start_policy_node_enforced(tmp_path / "keystore")
    assert done.returncode != 0 and "error creating node" in done.stderr, done.stderr[-2000:]
