"""The restricted unpickler loads numpy/containers and refuses everything else without running it."""

from __future__ import annotations

import os
import pickle

import joblib
import numpy as np
import pytest

from asap_training.motion.safe_pickle import UnsafePickleError, safe_load


class _RunsCode:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):  # what a malicious motion file does
        return (os.system, (f"touch {self.marker}",))


def test_malicious_pickle_is_refused_and_not_executed(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pkl"
    path.write_bytes(pickle.dumps({"clip": {"pose_aa": _RunsCode(str(marker))}}))
    with pytest.raises(UnsafePickleError, match="system"):
        safe_load(path)
    assert not marker.exists()


def test_malicious_joblib_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pkl"
    joblib.dump({"a": np.zeros(3), "b": _RunsCode(str(marker))}, path)
    with pytest.raises(UnsafePickleError):
        safe_load(path)
    assert not marker.exists()


@pytest.mark.parametrize(
    "payload",
    [
        (eval, ("1+1",)),
        (getattr, (object, "__class__")),
        (__import__, ("os",)),
    ],
)
def test_builtins_are_refused(tmp_path, payload):
    class Evil:
        def __reduce__(self):
            return payload

    path = tmp_path / "evil.pkl"
    path.write_bytes(pickle.dumps(Evil()))
    with pytest.raises(UnsafePickleError, match="refusing"):
        safe_load(path)


def test_object_arrays_are_refused(tmp_path):
    path = tmp_path / "obj.pkl"
    path.write_bytes(pickle.dumps({"a": np.array([1, "x"], dtype=object)}))
    with pytest.raises(UnsafePickleError, match="object dtype"):
        safe_load(path)


@pytest.mark.parametrize("compress", [0, 3, "gzip"])
def test_joblib_round_trip(tmp_path, compress):
    data = {
        "clip": {
            "pose_aa": np.random.default_rng(0).normal(size=(5, 27, 3)).astype(np.float32),
            "fortran": np.asfortranarray(np.arange(12.0).reshape(3, 4)),
            "fps": 30,
            "name": "x",
            "pair": (1, 2.5),
            "list": [np.int64(3)],
        }
    }
    path = tmp_path / "clip.pkl"
    joblib.dump(data, path, compress=compress)
    out = safe_load(path)
    assert out["clip"]["fps"] == 30 and out["clip"]["name"] == "x" and out["clip"]["pair"] == (1, 2.5)
    np.testing.assert_array_equal(out["clip"]["pose_aa"], data["clip"]["pose_aa"])
    np.testing.assert_array_equal(out["clip"]["fortran"], data["clip"]["fortran"])
    assert out["clip"]["list"][0] == 3


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_plain_numpy_pickles(tmp_path, protocol):
    path = tmp_path / "np.pkl"
    path.write_bytes(
        pickle.dumps({"a": np.arange(6.0).reshape(2, 3), "s": np.float32(2.5)}, protocol=protocol)
    )
    out = safe_load(path)
    np.testing.assert_array_equal(out["a"], np.arange(6.0).reshape(2, 3))
    assert out["s"] == np.float32(2.5)


def test_all_shared_clips_load_like_joblib(asap_data):
    for path in sorted((asap_data / "motions").glob("*.pkl")):
        ours, theirs = safe_load(path), joblib.load(path)
        for key, clip in theirs.items():
            for field, value in clip.items():
                np.testing.assert_array_equal(np.asarray(ours[key][field]), np.asarray(value))
