"""The torch exporter: the artifact computes what the torch module computes, for any batch size."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import torch

from asap_core.artifact import Motion, asap_g1_metadata, load_artifact
from asap_core.inference import OnnxPolicy
from asap_training.rl.export import export_torch_policy


def test_the_exported_artifact_computes_what_the_torch_module_computes(tmp_path) -> None:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(380, 32), torch.nn.ELU(), torch.nn.Linear(32, 23))
    meta = asap_g1_metadata(motion=Motion(name="test_motion", length_s=2.0))
    sha = export_torch_policy(tmp_path / "policy.onnx", net, meta)
    loaded = load_artifact(tmp_path / "policy.onnx")
    assert loaded.sha256 == sha and loaded.metadata == meta
    obs = np.random.default_rng(0).normal(size=(4, 380)).astype(np.float32)
    with torch.no_grad():
        expected = net(torch.from_numpy(obs)).numpy()
    session = ort.InferenceSession(loaded.model_bytes, providers=["CPUExecutionProvider"])
    (batch,) = session.run([meta.onnx_output], {meta.onnx_input: obs})  # the batch axis is symbolic
    np.testing.assert_allclose(batch, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(OnnxPolicy(loaded)(obs[0]), expected[0], rtol=1e-5, atol=1e-5)
