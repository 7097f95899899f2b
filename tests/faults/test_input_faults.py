"""Hostile or broken input files: motion pickles and dynamics profiles. Issue 16, items 12 and 14.

Each pickle below is assembled by hand, opcode by opcode, to do what a hostile motion file can do with
callables a name-based allow-list still permits; the data-only unpickler refuses every one with an
``UnsafePickleError`` (and the ASAP clips still load exactly as joblib loads them:
``training/tests/test_safe_pickle.py``). Profiles with duplicate keys or Python tags are refused with a
``ProfileError``. Run alone: ``python -m pytest tests/faults``.
"""

from __future__ import annotations

import bz2
import gzip
import pickle
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from asap_sim.profiles import ProfileError, load_profile
from asap_training.motion import safe_pickle
from asap_training.motion.safe_pickle import UnsafePickleError, safe_load


def _global(module: str, name: str) -> bytes:
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def _str(text: str) -> bytes:
    return b"X" + len(text.encode()).to_bytes(4, "little") + text.encode()


def _bytes(data: bytes) -> bytes:
    return b"B" + len(data).to_bytes(4, "little") + data


def _int(n: int) -> bytes:
    return b"J" + n.to_bytes(4, "little", signed=True)


def _dtype(name: str) -> bytes:
    return _global("numpy", "dtype") + b"(" + _str(name) + b"tR"


P2 = b"\x80\x02"
EXPLOITS = {
    # numpy.ndarray(shape, dtype, buffer, offset, strides): 8 bytes of file seen as a 2.4 GB array
    "ndarray called with zero strides": (
        P2 + _global("numpy", "ndarray") + b"((" + _int(300_000_000) + b"t" + _str("f8") + _bytes(bytes(8))
        + _int(0) + b"(" + _int(0) + b"ttR.", "refusing to call numpy.ndarray"),
    # _frombuffer(int, ...): bytes(n) allocates n zeroed bytes the file never held
    "_frombuffer given an int": (
        P2 + _global("numpy.core.numeric", "_frombuffer") + b"(" + _int(50_000_000) + _dtype("u1") + b"("
        + _int(50_000_000) + b"t" + _str("C") + b"tR.", "array data must be bytes"),
    # _reconstruct without BUILD: an array of uninitialized heap memory
    "_reconstruct without BUILD": (
        P2 + _global("numpy.core.multiarray", "_reconstruct") + b"(" + _global("numpy", "ndarray") + b"("
        + _int(1_000_000) + b"t" + _str("f8") + b"tR.", "an array without its data"),
    # BUILD on a structured dtype (fields of the file's choosing: heap reads)
    "BUILD on a structured dtype": (
        P2 + _dtype("V8") + b"(" + _int(3) + _str("|") + b"N(" + _str("a") + b"t}" + _str("a") + b"("
        + _dtype("f8") + _int(0) + b"ts" + _int(65536) + _int(1) + _int(0) + b"tb.", "refusing dtype"),
    # BUILD on an allowed class: setattr on the class itself
    "BUILD on an allowed class": (
        P2 + _global("joblib.numpy_pickle", "NumpyArrayWrapper") + b"N}" + _str("x") + _int(1) + b"s\x86b.",
        "refusing BUILD on type"),
    # an array whose declared size exceeds the bytes the file gives
    "array larger than its bytes": (
        P2 + _global("numpy.core.numeric", "_frombuffer") + b"(" + _bytes(bytes(8)) + _dtype("f8") + b"("
        + _int(1_000_000) + b"t" + _str("C") + b"tR.", "needs 8000000 bytes, the file gives 8"),
    # an object array: nested pickles inside
    "object dtype": (pickle.dumps({"a": np.array([1, "x"], dtype=object)}), "object dtype"),
    # not a pickle at all, or cut short
    "truncated stream": (pickle.dumps({"a": np.arange(10.0)})[:-5], "not a loadable motion pickle"),
}


@pytest.mark.parametrize("name", list(EXPLOITS))
def test_hostile_motion_pickles_are_refused(tmp_path: Path, name: str) -> None:
    data, message = EXPLOITS[name]
    path = tmp_path / "clip.pkl"
    path.write_bytes(data)
    tracemalloc.start()
    try:
        with pytest.raises(UnsafePickleError, match=message) as err:
            safe_load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(path) in str(err.value)
    assert peak < 8 << 20, f"{name}: {peak >> 20} MiB allocated before refusing"


@pytest.mark.parametrize("compress", [bz2.compress, gzip.compress])
def test_decompression_bombs_stop_at_the_cap(tmp_path: Path, monkeypatch, compress) -> None:
    monkeypatch.setattr(safe_pickle, "MAX_BYTES", 1 << 20)
    path = tmp_path / "bomb.pkl"
    path.write_bytes(compress(pickle.dumps({"a": np.zeros(4 << 20, dtype=np.uint8)}, protocol=4)))
    assert path.stat().st_size < 64 << 10
    with pytest.raises(UnsafePickleError, match=r"decompresses to more than 1048576 bytes"):
        safe_load(path)


def test_a_flood_of_tiny_opcodes_is_cut_off(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(safe_pickle, "MAX_OPCODES", 10_000)
    path = tmp_path / "flood.pkl"
    path.write_bytes(P2 + b"N" * 20_000 + b".")  # 8 bytes of stack per byte of file, if let run
    with pytest.raises(UnsafePickleError, match="more than 10000 pickle instructions"):
        safe_load(path)


def test_a_shared_array_reference_gets_the_built_array(tmp_path: Path) -> None:
    a = np.arange(6.0).reshape(2, 3)
    path = tmp_path / "shared.pkl"
    path.write_bytes(pickle.dumps({"x": a, "y": [a, a]}, protocol=2))  # memo references to one array
    out = safe_load(path)
    np.testing.assert_array_equal(out["y"][1], a)
    assert out["y"][0] is out["x"]


# --- item 14: dynamics profile YAML --------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kp_scale: 0.5\nkp_scale: 2.0\n", r"key 'kp_scale' appears twice \(lines 1 and 2\)"),
        ("kd_scale:\n  '.*ankle.*': 0.5\n  '.*ankle.*': 3.0\n", r"key '\.\*ankle\.\*' appears twice"),
        ("description: !!python/object:os.system {}\n", "not a plain YAML mapping of profile keys"),
        ("description: !!python/name:os.system ''\n", "not a plain YAML mapping of profile keys"),
        ("kp_scale: [1.0\n", "not a plain YAML mapping of profile keys"),
    ],
)
def test_profile_yaml_with_duplicates_or_python_tags_is_refused(tmp_path: Path, text: str,
                                                                 message: str) -> None:
    path = tmp_path / "gap.yaml"
    path.write_text(text)
    with pytest.raises(ProfileError, match=rf"gap\.yaml: {message}"):
        load_profile(path)
