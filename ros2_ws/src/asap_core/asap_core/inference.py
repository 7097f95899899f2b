"""ONNX Runtime inference for a loaded policy artifact: one observation in, one action out."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort

from asap_core.artifact import PolicyArtifact


class PolicyOutputError(ValueError):
    """The graph returned a tensor of another shape than the metadata declares."""


class OnnxPolicy:
    """A warm, single-threaded inference session with a preallocated float32 input buffer."""

    def __init__(self, artifact: PolicyArtifact, threads: int = 1, warmup: int = 10) -> None:
        meta = artifact.metadata
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.artifact = artifact
        self._session = ort.InferenceSession(artifact.model_bytes, opts,
                                             providers=["CPUExecutionProvider"])
        self._input_name, self._outputs = meta.onnx_input, [meta.onnx_output]
        self._output_shape = (1, meta.num_joints)
        self._obs = np.zeros((1, meta.observation.dim), dtype=np.float32)
        for _ in range(warmup):
            self(self._obs[0])

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """The raw network output [num_joints] (float64) for one observation [obs_dim].

        Raises :class:`PolicyOutputError` when the real output is not [1, num_joints]: the graph's
        declared shape is only a claim (a symbolic or wrong dimension passes validation)."""
        self._obs[0] = obs
        outputs: list[np.ndarray] = self._session.run(self._outputs, {self._input_name: self._obs})
        (action,) = outputs
        if action.shape != self._output_shape:
            raise PolicyOutputError(f"policy output shape {list(action.shape)}, expected "
                                    f"{list(self._output_shape)} (batch 1, one value per joint)")
        return action.reshape(-1).astype(np.float64)  # = action[0], batch 1 checked above
