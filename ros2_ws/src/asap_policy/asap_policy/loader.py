"""Hot-swap loading for the policy node, ROS-free: one load at a time, bounded in time, and every
failure a refusal with its reason.

A LoadPolicy request reads, validates, builds and dry-runs an artifact before the control thread
may swap it in. That work runs on one dedicated loader thread, never on the threads that answer
SetMode, so an e-stop request never waits behind it. A second request while one is loading is
refused at once (busy); a load that outlives ``timeout_s`` is refused, keeps the loader busy until
it ends, and its result is discarded.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field

from asap_core.artifact import ArtifactError, SourceRules, load_artifact
from asap_core.control import LoadedPolicy, RobotState


class LoadRefusedError(Exception):
    """The artifact was not loaded; the message says why (and what was expected)."""


@dataclass(frozen=True, kw_only=True)
class LoaderCfg:
    """What a hot-swapped artifact must satisfy, and how long loading may take."""

    control_dt: float
    """The running loop's period: an artifact with another ``control_dt`` is refused."""
    rules: SourceRules = field(default_factory=SourceRules)
    timeout_s: float = 10.0
    inference_threads: int = 1


def prepare(path: str, cfg: LoaderCfg, state: RobotState, check_dt: bool = True) -> LoadedPolicy:
    """Read under ``cfg.rules``, validate, build and dry-run (on ``state``) an artifact, in the
    calling thread; raises :class:`LoadRefusedError`. ``check_dt``: refuse a ``control_dt`` other than
    ``cfg.control_dt`` (off for the artifact that sets the loop's period at start)."""
    try:
        artifact = load_artifact(path, cfg.rules)
        dt = artifact.metadata.control_dt
        if check_dt and abs(dt - cfg.control_dt) > 1e-9:
            raise LoadRefusedError(f"control_dt {dt} s differs from the running loop's {cfg.control_dt} s")
        policy = LoadedPolicy(artifact, threads=cfg.inference_threads)
        problem = policy.dry_run(state, budget_s=dt / 2)
        if problem:
            raise LoadRefusedError(problem)
        return policy
    except (ArtifactError, LoadRefusedError) as e:
        raise LoadRefusedError(str(e)) from None
    except Exception as e:  # onnxruntime's errors have no common base; MemoryError too
        raise LoadRefusedError(f"cannot run it: {type(e).__name__}: {e}") from None


class PolicyLoader:
    """Loads artifacts on its own thread, one at a time (see the module docstring)."""

    def __init__(self, cfg: LoaderCfg, current_state: Callable[[], RobotState]) -> None:
        self.cfg = cfg
        self._current_state = current_state
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="policy_loader")
        self._slot = threading.Lock()  # held from the request until the loader thread finishes
        self._loading = ""

    def load(self, path: str) -> LoadedPolicy:
        """A ready policy (warm session, dry run passed); raises :class:`LoadRefusedError`."""
        if not self._slot.acquire(blocking=False):
            raise LoadRefusedError(f"busy: still loading {self._loading} (one load at a time); "
                              "send it again once that one is answered")
        self._loading = path
        try:
            future = self._pool.submit(self._prepare, path)
        except RuntimeError:  # the pool is shut down: the node is stopping
            self._slot.release()
            raise LoadRefusedError("the node is shutting down") from None
        try:
            return future.result(timeout=self.cfg.timeout_s)
        except FutureTimeout:
            raise LoadRefusedError(f"loading took longer than {self.cfg.timeout_s:g} s (load_timeout_s); it "
                              "is discarded when it ends, and further loads are refused until then") from None

    def _prepare(self, path: str) -> LoadedPolicy:
        try:
            return prepare(path, self.cfg, self._current_state())
        finally:
            self._slot.release()

    def close(self) -> None:
        """Stop taking loads; a running one is not waited for."""
        self._pool.shutdown(wait=False, cancel_futures=True)
