"""Ask Unitree's own Python SDK (installed apart in .venv-oracle by `make setup`) about messages."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ORACLE_PY = REPO / ".venv-oracle" / "bin" / "python"
ORACLE_SCRIPT = REPO / "tests" / "oracle" / "unitree_sdk_oracle.py"


def sdk(request: dict) -> list:
    """Send one request to the SDK oracle (see the script's docstring for the operations)."""
    if not ORACLE_PY.exists():
        pytest.skip("the Unitree SDK oracle venv is missing: run `make setup`")
    out = subprocess.run([str(ORACLE_PY), str(ORACLE_SCRIPT)], input=json.dumps(request),
                         capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(f"Unitree SDK oracle failed:\n{out.stderr}")
    return json.loads(out.stdout)
