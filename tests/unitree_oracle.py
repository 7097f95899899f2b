"""Ask Unitree's own Python SDK (installed apart in .venv-oracle by `make setup`) about messages, or
run it as a live DDS participant next to our nodes."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ORACLE_PY = REPO / ".venv-oracle" / "bin" / "python"
ORACLE_SCRIPT = REPO / "tests" / "oracle" / "unitree_sdk_oracle.py"
PEER_SCRIPT = REPO / "tests" / "oracle" / "unitree_sdk_peer.py"
CYCLONEDDS_LOOPBACK = REPO / "ros2_ws" / "src" / "asap_bringup" / "config" / "dds" / "cyclonedds_loopback.xml"


def _require_oracle() -> None:
    if not ORACLE_PY.exists():
        pytest.skip("the Unitree SDK oracle venv is missing: run `make setup`")
    probe = subprocess.run([str(ORACLE_PY), "-c", "import cyclonedds, importlib.util as u; "
                            "assert u.find_spec('unitree_sdk2py'), 'unitree_sdk2py is not installed'"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"Unitree's SDK does not import in .venv-oracle: {probe.stderr.strip()[-300:]}")


def sdk(request: dict) -> list:
    """Send one request to the SDK oracle (see the script's docstring for the operations)."""
    _require_oracle()
    out = subprocess.run([str(ORACLE_PY), str(ORACLE_SCRIPT)], input=json.dumps(request),
                         capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(f"Unitree SDK oracle failed:\n{out.stderr}")
    return json.loads(out.stdout)


class SdkPeer:
    """Unitree's SDK as a live DDS participant (CycloneDDS) on this test session's domain and loopback,
    in its own process; :meth:`ask` sends one request of ``tests/oracle/unitree_sdk_peer.py``."""

    def __init__(self) -> None:
        _require_oracle()
        self.proc = subprocess.Popen(
            [str(ORACLE_PY), str(PEER_SCRIPT), os.environ["ROS_DOMAIN_ID"], str(CYCLONEDDS_LOOPBACK)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self._answer()  # {"ready": true} once its participant exists

    def ask(self, op: str, **request) -> dict:
        self.proc.stdin.write(json.dumps({"op": op, **request}) + "\n")
        self.proc.stdin.flush()
        return self._answer()

    def _answer(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            self.proc.kill()
            raise RuntimeError(f"the Unitree SDK peer died:\n{self.proc.stderr.read()[-3000:]}")
        return json.loads(line)

    def close(self) -> None:
        try:
            self.proc.communicate(json.dumps({"op": "quit"}) + "\n", timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
