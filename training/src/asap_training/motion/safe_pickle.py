"""A data-only unpickler for motion files: numeric numpy arrays and plain containers, nothing else.

ASAP/PHC motion ``.pkl`` files are joblib pickles. A pickle is a program: loading an untrusted one with
``pickle``/``joblib.load`` runs whatever it names (``os.system``...). This loader is not an allow-list of
callables handed to the pickle machine; it interprets the few things numpy and joblib pickles do, as data:

- ``numpy.ndarray`` is a name, never called (so no strides, offsets or buffers of the file's choosing);
- an array is made only from bytes the file holds (``bytes``/``bytearray``), whose length must equal its
  shape times its item size: protocol-2/3/4 arrays (``_reconstruct`` + BUILD), protocol-5 arrays
  (``_frombuffer``), joblib arrays (the wrapper's BUILD, then the raw bytes in the stream);
- dtypes are plain numeric (bool, int, uint, float, complex), never structured, object or sub-array, and
  are made here from their name and byte order (numpy's dtype ``__setstate__`` never runs);
- BUILD applies only to the placeholders this loader itself created (a dtype, an array awaiting its data,
  a joblib wrapper); a placeholder left without its data, or referenced before it got it, is refused;
- the result may hold only dict, list, tuple, set, str, bytes, numbers, bool, None, arrays and numpy
  scalars;
- compressed files (gzip, bz2, xz, zlib: joblib's ``compress=``) and the pickle stream are capped at
  :data:`MAX_BYTES`; every array's bytes come out of that stream, so memory stays proportional to it.

Every failure, whatever the cause, is an :class:`UnsafePickleError` naming the file; nothing of the file
runs.
"""

from __future__ import annotations

import bz2
import io
import lzma
import math
import os
import pickle
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, cast

import numpy as np

MAX_BYTES = 256 << 20
"""Largest motion pickle accepted, compressed and after decompression (bytes; an ASAP clip is ~0.1 MB)."""
MAX_OPCODES = 2_000_000
"""Most pickle instructions one file may run (an ASAP clip runs ~100; each makes at most a few objects)."""
_NUMERIC_KINDS = "biufc"


class UnsafePickleError(pickle.UnpicklingError):
    """The file is not a data-only motion pickle (nothing of it was executed)."""


# --- placeholders: what the loader creates before the data arrives ---------------------------------
class _NdarrayName:
    """What ``numpy.ndarray`` resolves to: a name the reconstructors accept, not a callable."""

    def __call__(self, *args: Any) -> None:
        raise UnsafePickleError("refusing to call numpy.ndarray directly (only numpy's own reconstructors)")


_NDARRAY = _NdarrayName()


class _Dtype:
    """A plain numeric dtype by name; its byte order arrives by BUILD."""

    def __init__(self, name: Any, align: Any = False, copy: Any = False) -> None:
        if not isinstance(name, str) or len(name) > 8:
            raise UnsafePickleError(f"refusing dtype {name!r}: motion files hold plain numeric arrays only")
        dtype = np.dtype(name)
        if dtype.hasobject:
            raise UnsafePickleError(f"refusing an object dtype {dtype!r} in a motion file")
        if dtype.kind not in _NUMERIC_KINDS or dtype.names is not None or dtype.subdtype is not None:
            raise UnsafePickleError(f"refusing dtype {dtype!r}: motion files hold plain numeric arrays only")
        self.dtype = dtype

    def build(self, state: Any) -> None:
        # numpy's dtype state: (version, byte order, subarray, names, fields, elsize, alignment, flags)
        if not isinstance(state, tuple) or len(state) < 5 or any(x is not None for x in state[2:5]):
            raise UnsafePickleError(f"refusing dtype state {state!r}: not a plain numeric dtype")
        if state[1] not in ("<", ">", "=", "|"):
            raise UnsafePickleError(f"refusing dtype byte order {state[1]!r}")
        if state[1] in "<>":
            self.dtype = self.dtype.newbyteorder(state[1])


class _PendingArray:
    """An array announced by ``_reconstruct``; its shape, dtype and bytes come with BUILD."""

    def __init__(self, subtype: Any, shape: Any, dtype: Any) -> None:  # shape, dtype: placeholders
        if subtype is not _NDARRAY:
            raise UnsafePickleError(f"refusing ndarray subclass {subtype!r}")


class _JoblibArray:
    """Stand-in for ``joblib.numpy_pickle.NumpyArrayWrapper``: the array bytes follow BUILD in the stream."""


def _dtype(value: Any) -> np.dtype:
    if not isinstance(value, _Dtype):
        raise UnsafePickleError(f"expected a numpy dtype, got {type(value).__name__}")
    return value.dtype


def _shape(value: Any) -> tuple[int, ...]:
    if not isinstance(value, tuple) or len(value) > 32 or not all(
            type(n) is int and n >= 0 for n in value):
        raise UnsafePickleError(f"refusing array shape {value!r}")
    return value


def _array(data: Any, dtype: np.dtype, shape: tuple[int, ...], fortran: bool) -> np.ndarray:
    """An array that owns a copy of ``data``, whose length must be exactly what shape and dtype need."""
    if not isinstance(data, bytes | bytearray):
        raise UnsafePickleError(f"array data must be bytes, got {type(data).__name__}")
    if len(data) != math.prod(shape) * dtype.itemsize:
        raise UnsafePickleError(f"array of shape {shape} {dtype} needs {math.prod(shape) * dtype.itemsize} "
                                f"bytes, the file gives {len(data)}")
    return np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C").copy()


# --- the callables a file may name (each checks its arguments and makes data) ----------------------
def _frombuffer(buf: Any, dtype: Any, shape: Any, order: Any) -> np.ndarray:
    # protocol-5 pickles of arrays: raw bytes + dtype + shape + order
    if order not in ("C", "F"):
        raise UnsafePickleError(f"refusing array order {order!r}")
    return _array(buf, _dtype(dtype), _shape(shape), order == "F")


def _scalar(dtype: Any, data: Any = b"") -> np.generic:
    return cast(np.generic, _array(data, _dtype(dtype), (), False)[()])  # [()] of a 0-d array: its scalar


def _latin1_bytes(text: Any, encoding: Any = "latin1") -> bytes:
    # protocol-2 pickles spell bytes as _codecs.encode(str, "latin1"); nothing else is accepted
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise UnsafePickleError(f"refusing _codecs.encode({type(text).__name__}, {encoding!r})")
    return text.encode("latin1")


def _ordered_dict(*args: Any) -> dict:
    if args and not isinstance(args[0], list | tuple):
        raise UnsafePickleError(f"refusing OrderedDict({type(args[0]).__name__})")
    return dict(*args)


_GLOBALS: dict[tuple[str, str], Any] = {
    ("numpy", "ndarray"): _NDARRAY,
    ("numpy", "dtype"): _Dtype,
    ("numpy.core.multiarray", "_reconstruct"): _PendingArray,
    ("numpy._core.multiarray", "_reconstruct"): _PendingArray,
    ("numpy.core.multiarray", "scalar"): _scalar,
    ("numpy._core.multiarray", "scalar"): _scalar,
    ("numpy.core.numeric", "_frombuffer"): _frombuffer,
    ("numpy._core.numeric", "_frombuffer"): _frombuffer,
    ("joblib.numpy_pickle", "NumpyArrayWrapper"): _JoblibArray,
    ("_codecs", "encode"): _latin1_bytes,
    ("collections", "OrderedDict"): _ordered_dict,
}
_CALLABLE = (_Dtype, _PendingArray, _scalar, _frombuffer, _latin1_bytes, _ordered_dict)
_DATA = (dict, list, tuple, set, frozenset, str, bytes, bytearray, int, float, complex, bool, type(None),
         np.ndarray, np.generic)


def _counted(run: Callable[[Any], None]) -> Callable[[Any], None]:
    """An opcode handler that first counts itself against MAX_OPCODES (a stream of tiny opcodes can
    otherwise make eight bytes of objects per byte of file, for minutes)."""

    def counted(self: Any) -> None:
        self.opcodes += 1
        if self.opcodes > MAX_OPCODES:
            raise UnsafePickleError(f"more than {MAX_OPCODES} pickle instructions (asap_training.motion."
                                    "safe_pickle.MAX_OPCODES)")
        run(self)

    return counted


class _Memo(dict):
    """The unpickler's memo, knowing where each placeholder is stored (to swap in the finished array)."""

    def __init__(self) -> None:
        super().__init__()
        self.placeholders: dict[int, list[Any]] = {}

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        if isinstance(value, _PendingArray | _JoblibArray):
            self.placeholders.setdefault(id(value), []).append(key)


class _DataUnpickler(pickle._Unpickler):  # the pure-Python unpickler lets us own REDUCE, NEWOBJ, BUILD
    dispatch: ClassVar[dict[int, Callable[[Any], None]]] = dict(pickle._Unpickler.dispatch)
    # its working state, which the type stubs (public API only) do not declare
    stack: list[Any]
    append: Callable[[Any], None]
    read: Callable[[int], bytes]

    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file)
        self.memo = _Memo()
        self.opcodes = 0

    def find_class(self, module: str, name: str) -> Any:
        try:
            return _GLOBALS[(module, name)]
        except KeyError:
            raise UnsafePickleError(
                f"refusing to load global {module}.{name}: motion files may contain only numpy arrays "
                "and plain containers (dict, list, tuple, str, numbers)"
            ) from None

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickleError("refusing a persistent id")

    def _call(self, func: Any, args: Any) -> Any:
        if func is _NDARRAY:
            _NDARRAY()
        if not any(func is f for f in _CALLABLE) or not isinstance(args, tuple):
            raise UnsafePickleError(f"refusing to call {func!r}")
        return func(*args)

    def load_reduce(self) -> None:
        args = self.stack.pop()
        self.stack[-1] = self._call(self.stack[-1], args)

    def load_newobj(self) -> None:
        args = self.stack.pop()
        cls = self.stack.pop()
        if cls is not _JoblibArray or args:
            raise UnsafePickleError(f"refusing to instantiate {cls!r}")
        self.append(_JoblibArray())

    def load_newobj_ex(self) -> None:
        if self.stack.pop():
            raise UnsafePickleError("refusing keyword arguments to a constructor")
        self.load_newobj()

    def _instantiate(self, klass: Any, args: list) -> None:  # INST and OBJ (protocols 0 and 1)
        self.append(_JoblibArray() if klass is _JoblibArray and not args else self._call(klass, tuple(args)))

    def load_build(self) -> None:
        state = self.stack.pop()
        obj = self.stack[-1]
        if isinstance(obj, _Dtype):
            obj.build(state)
        elif isinstance(obj, _PendingArray):
            if not isinstance(state, tuple) or len(state) != 5:
                raise UnsafePickleError("refusing an array state that is not (version, shape, dtype, "
                                        "fortran, data)")
            _, shape, dtype, fortran, data = state
            self._built(obj, _array(data, _dtype(dtype), _shape(shape), bool(fortran)))
        elif isinstance(obj, _JoblibArray):
            self._built(obj, self._read_joblib_array(state))
        else:
            raise UnsafePickleError(f"refusing BUILD on {type(obj).__name__}: only on what this loader made")

    def _built(self, placeholder: object, array: np.ndarray) -> None:
        """Put the finished array wherever the placeholder stands: the stack top and its memo entries."""
        self.stack[-1] = array
        for key in self.memo.placeholders.pop(id(placeholder), []):
            dict.__setitem__(self.memo, key, array)

    def _read_joblib_array(self, state: Any) -> np.ndarray:
        if not isinstance(state, dict) or state.get("subclass") is not _NDARRAY:
            raise UnsafePickleError("refusing a joblib array that is not a plain numpy.ndarray")
        dtype, shape = _dtype(state.get("dtype")), _shape(state.get("shape"))
        if state.get("numpy_array_alignment_bytes") is not None:
            pad = self.read(1)  # joblib aligns array data: one length byte, then padding
            if len(pad) != 1 or len(self.read(pad[0])) != pad[0]:
                raise UnsafePickleError("motion file truncated inside array padding")
        data = self.read(math.prod(shape) * dtype.itemsize)  # never more than the stream holds
        return _array(data, dtype, shape, state.get("order") == "F")

    dispatch[pickle.REDUCE[0]] = load_reduce
    dispatch[pickle.NEWOBJ[0]] = load_newobj
    dispatch[pickle.NEWOBJ_EX[0]] = load_newobj_ex
    dispatch[pickle.BUILD[0]] = load_build
    dispatch = {opcode: _counted(run) for opcode, run in dispatch.items()}


def _check_data(result: Any) -> None:
    """Refuse anything but plain data (a placeholder left unbuilt, a class, a dtype...)."""
    todo, seen = [result], set()
    while todo:
        value = todo.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if not isinstance(value, _DATA) or (isinstance(value, np.ndarray) and type(value) is not np.ndarray):
            raise UnsafePickleError(f"refusing {type(value).__name__} in a motion file (an array without "
                                    "its data, or not data at all)")
        if isinstance(value, dict):
            todo += [*value.keys(), *value.values()]
        elif isinstance(value, list | tuple | set | frozenset):
            todo += list(value)


# --- files -----------------------------------------------------------------------------------------
def _capped(make: Callable[[], Any], data: bytes, cap: int) -> bytes:
    """Decompress every stream in ``data``, refusing to produce more than ``cap`` bytes."""
    out = bytearray()
    while data:
        stream, pending = make(), data
        while not stream.eof:
            chunk = stream.decompress(pending, cap + 1 - len(out))
            pending = getattr(stream, "unconsumed_tail", b"")
            out += chunk  # out is at most cap + 1 bytes: a bomb stops here
            if len(out) > cap:
                raise UnsafePickleError(f"decompresses to more than {cap} bytes (asap_training.motion."
                                        "safe_pickle.MAX_BYTES)")
            if not chunk and not pending and getattr(stream, "needs_input", True):
                raise UnsafePickleError("compressed stream truncated")
        data = stream.unused_data
    return bytes(out)


_COMPRESSED: tuple[tuple[bytes, Callable[[], Any]], ...] = (
    (b"\x1f\x8b", lambda: zlib.decompressobj(wbits=31)),  # gzip
    (b"BZh", bz2.BZ2Decompressor),
    (b"\xfd7zXZ\x00", lzma.LZMADecompressor),
    (b"\x78", zlib.decompressobj),  # zlib (joblib compress=True)
)


def _read(path: Path) -> bytes:
    if not path.is_file():
        raise UnsafePickleError("not a regular file")
    with path.open("rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        raw = fh.read(min(size, MAX_BYTES) + 1)  # read(n) allocates n up front: never the cap itself
    if len(raw) > MAX_BYTES:
        raise UnsafePickleError(f"larger than {MAX_BYTES} bytes (asap_training.motion.safe_pickle.MAX_BYTES)")
    for magic, make in _COMPRESSED:
        if raw.startswith(magic):
            return _capped(make, raw, MAX_BYTES)
    return raw


def safe_load(path: str | Path) -> Any:
    """Load a (joblib) pickle of numeric numpy arrays, numpy scalars and plain containers.

    Raises:
        UnsafePickleError: for any file that is not such data (named in the message); nothing of it ran.
    """
    path = Path(path)
    try:
        result = _DataUnpickler(io.BytesIO(_read(path))).load()
        _check_data(result)
        return result
    except UnsafePickleError as exc:
        raise UnsafePickleError(f"{path}: {exc}") from None
    except Exception as exc:  # a malformed stream: EOFError, struct.error, MemoryError, ValueError...
        raise UnsafePickleError(
            f"{path}: not a loadable motion pickle ({type(exc).__name__}: {exc})"
        ) from None
