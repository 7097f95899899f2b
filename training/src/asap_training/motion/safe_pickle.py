"""A restricted unpickler for motion files: numpy arrays and plain containers, nothing else.

ASAP/PHC motion ``.pkl`` files are joblib pickles. A pickle is a program: loading an untrusted one with
``pickle``/``joblib.load`` runs whatever it names (``os.system``...). This loader resolves only an allow-list
of globals (numpy's array/dtype reconstructors and joblib's array wrapper, re-implemented here), so a file
that names anything else is refused with :class:`UnsafePickleError` before any of it runs.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import pickle
import zlib
from pathlib import Path
from typing import Any

import numpy as np


class UnsafePickleError(pickle.UnpicklingError):
    """The pickle asked for something outside the allow-list (it was not executed)."""


def _safe_dtype(*args: Any) -> np.dtype:
    dtype = np.dtype(*args)
    if dtype.hasobject:
        # object arrays carry nested pickles; motion data never needs them
        raise UnsafePickleError(f"refusing an object dtype {dtype!r} in a motion file")
    return dtype


def _safe_reconstruct(subtype: type, shape: Any, dtype: Any) -> np.ndarray:
    if subtype is not np.ndarray:
        raise UnsafePickleError(f"refusing ndarray subclass {subtype!r}")
    return np.ndarray.__new__(np.ndarray, shape, _safe_dtype(dtype))


def _safe_scalar(dtype: np.dtype, data: bytes = b"") -> np.generic:
    return np.frombuffer(data, dtype=_safe_dtype(dtype), count=1)[0]


def _safe_frombuffer(buf: Any, dtype: Any, shape: Any, order: str) -> np.ndarray:
    # protocol-5 pickles of arrays: raw bytes + dtype + shape
    array = np.frombuffer(bytes(buf), dtype=_safe_dtype(dtype))
    return array.reshape(shape, order=order).copy()


def _latin1_bytes(text: str, encoding: str = "latin1") -> bytes:
    # protocol-2 pickles spell bytes as _codecs.encode(str, "latin1"); nothing else is accepted
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise UnsafePickleError(f"refusing _codecs.encode({type(text).__name__}, {encoding!r})")
    return text.encode("latin1")


class _JoblibArray:
    """Stand-in for ``joblib.numpy_pickle.NumpyArrayWrapper``: the array bytes follow BUILD in the stream."""


_ALLOWED: dict[tuple[str, str], Any] = {
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): _safe_dtype,
    ("numpy.core.multiarray", "_reconstruct"): _safe_reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): _safe_reconstruct,
    ("numpy.core.multiarray", "scalar"): _safe_scalar,
    ("numpy._core.multiarray", "scalar"): _safe_scalar,
    ("joblib.numpy_pickle", "NumpyArrayWrapper"): _JoblibArray,
    ("numpy.core.numeric", "_frombuffer"): _safe_frombuffer,
    ("numpy._core.numeric", "_frombuffer"): _safe_frombuffer,
    ("_codecs", "encode"): _latin1_bytes,
    ("collections", "OrderedDict"): dict,
}


class _RestrictedUnpickler(pickle._Unpickler):  # the pure-Python unpickler lets us hook BUILD
    dispatch = pickle._Unpickler.dispatch.copy()

    def find_class(self, module: str, name: str) -> Any:
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise UnsafePickleError(
                f"refusing to load global {module}.{name}: motion files may contain only numpy arrays "
                "and plain containers (dict, list, tuple, str, numbers)"
            ) from None

    def load_build(self) -> None:
        state = self.stack[-1]
        obj = self.stack[-2]
        if isinstance(obj, _JoblibArray):
            self.stack.pop()
            self.stack[-1] = self._read_joblib_array(state)
            return
        if isinstance(obj, np.ndarray) and isinstance(state, tuple) and len(state) >= 3:
            _safe_dtype(state[2])
        super().load_build()

    dispatch[pickle.BUILD[0]] = load_build

    def _read_joblib_array(self, state: dict) -> np.ndarray:
        if state.get("subclass") is not np.ndarray:
            raise UnsafePickleError(f"refusing joblib array of class {state.get('subclass')!r}")
        dtype = _safe_dtype(state["dtype"])
        shape = tuple(int(s) for s in state["shape"])
        if state.get("numpy_array_alignment_bytes") is not None:
            pad = self.read(1)[0]  # joblib aligns array data: one length byte, then padding
            self.read(pad)
        count = int(np.prod(shape, dtype=np.int64))
        data = self.read(count * dtype.itemsize)
        if len(data) != count * dtype.itemsize:
            raise pickle.UnpicklingError("motion file truncated inside array data")
        array = np.frombuffer(data, dtype=dtype, count=count).copy()
        if state.get("order") == "F":
            return array.reshape(shape[::-1]).T
        return array.reshape(shape)


def _decompress(raw: bytes) -> bytes:
    if raw[:2] == b"\x1f\x8b":
        return gzip.decompress(raw)
    if raw[:3] == b"BZh":
        return bz2.decompress(raw)
    if raw[:6] == b"\xfd7zXZ\x00":
        return lzma.decompress(raw)
    if raw[:1] == b"\x78":  # zlib header (joblib compress=True)
        return zlib.decompress(raw)
    return raw


def safe_load(path: str | Path) -> Any:
    """Load a (joblib) pickle allowing only numpy arrays, numpy scalars and plain containers.

    Raises:
        UnsafePickleError: the file names a global outside the allow-list; nothing of it was executed.
    """
    raw = _decompress(Path(path).read_bytes())
    return _RestrictedUnpickler(io.BytesIO(raw)).load()
