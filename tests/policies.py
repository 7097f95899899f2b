"""Tiny real ONNX policies for tests and benchmarks, exported through the artifact writer.

Each is a torch module whose output is known in closed form, so tests can assert on commands:
``constant`` (every action = c; 0 holds the default pose), ``nan_after`` (finite until the motion
phase passes a threshold, then NaN), ``sine`` (a gentle sine of the phase on every joint), and
``mlp`` (random weights, ASAP's 512-256-128 ELU size by default, for latency measurements). For
fault tests: ``slow`` (seconds per inference) and ``output_grows_after`` (a hand-built graph whose
real output shape changes mid-motion).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import onnx
import torch

from asap_core.artifact import Motion, PolicyMetadata, asap_g1_metadata, export_torch_policy, write_artifact


class _Phase(torch.nn.Module):
    """Base: reads the motion phase (the last observation entry in ASAP's layout)."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n

    def phase(self, obs: torch.Tensor) -> torch.Tensor:
        return obs[:, -1:].expand(-1, self.n)


class Constant(_Phase):
    def __init__(self, n: int, value: float) -> None:
        super().__init__(n)
        self.value = value

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return 0.0 * self.phase(obs) + self.value


class NanAfter(_Phase):
    def __init__(self, n: int, phase: float) -> None:
        super().__init__(n)
        self.threshold = phase

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return 0.0 * torch.sqrt(self.threshold - self.phase(obs))  # sqrt(<0) = NaN


class Sine(_Phase):
    def __init__(self, n: int, amplitude: float) -> None:
        super().__init__(n)
        self.amplitude = amplitude

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.amplitude * torch.sin(2.0 * math.pi * self.phase(obs))


def mlp(obs_dim: int, n: int, hidden: tuple[int, ...] = (512, 256, 128), seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    layers: list[torch.nn.Module] = []
    for width in hidden:
        layers += [torch.nn.Linear(obs_dim, width), torch.nn.ELU()]
        obs_dim = width
    return torch.nn.Sequential(*layers, torch.nn.Linear(obs_dim, n))


def write(path: Path, module: torch.nn.Module, motion_s: float = 2.0, name: str = "test",
          **overrides) -> Path:
    """Export ``module`` as an ASAP 23-DoF artifact (380-dim observation) and return the path."""
    meta: PolicyMetadata = asap_g1_metadata(motion=Motion(name=f"{name}_motion", length_s=motion_s),
                                            name=name, **overrides)
    export_torch_policy(path, module, meta)
    return path


class Slow(_Phase):
    """Constant 0 after squaring a size x size matrix built from the input: ~0.1-1 s per call on
    one thread (a graph too slow for a 50 Hz loop, and a load that takes seconds)."""

    def __init__(self, n: int, size: int = 2000) -> None:
        super().__init__(n)
        self.size = size

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs[:1, :1].expand(self.size, self.size) + 1.0
        return 0.0 * self.phase(obs) + 0.0 * (x @ x).mean()


def write_graph(path: Path, model, motion_s: float = 2.0, name: str = "test", **overrides) -> Path:
    """Write a hand-built ONNX ``model`` (input ``actor_obs``, output ``action``) as an ASAP artifact."""
    meta = asap_g1_metadata(motion=Motion(name=f"{name}_motion", length_s=motion_s), name=name, **overrides)
    write_artifact(path, model, meta)
    return path


def output_grows_after(n: int, phase: float, obs_dim: int = 380):
    """An ONNX graph declaring output [batch, n] whose real output is [1, n] while the phase (the
    last observation entry) is <= ``phase`` and [1, 2n] after: a shape only a run-time check sees."""
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node("Slice", ["actor_obs", "last", "end", "axis1"], ["phase"]),
        helper.make_node("Greater", ["phase", "threshold"], ["late"]),
        helper.make_node("Cast", ["late"], ["late_i"], to=TensorProto.INT64),
        helper.make_node("Reshape", ["late_i", "one_dim"], ["late_1"]),
        helper.make_node("Add", ["late_1", "one"], ["copies"]),
        helper.make_node("Concat", ["one", "copies"], ["repeats"], axis=0),
        helper.make_node("Tile", ["zeros", "repeats"], ["action"]),
    ]
    inits = [
        helper.make_tensor("last", TensorProto.INT64, [1], [obs_dim - 1]),
        helper.make_tensor("end", TensorProto.INT64, [1], [obs_dim]),
        helper.make_tensor("axis1", TensorProto.INT64, [1], [1]),
        helper.make_tensor("threshold", TensorProto.FLOAT, [], [phase]),
        helper.make_tensor("one_dim", TensorProto.INT64, [1], [1]),
        helper.make_tensor("one", TensorProto.INT64, [1], [1]),
        helper.make_tensor("zeros", TensorProto.FLOAT, [1, n], [0.0] * n),
    ]
    graph = helper.make_graph(
        nodes, "output_grows",
        [helper.make_tensor_value_info("actor_obs", TensorProto.FLOAT, ["batch", obs_dim])],
        [helper.make_tensor_value_info("action", TensorProto.FLOAT, ["batch", n])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def with_metadata_text(src: Path, dst: Path, edit: Callable[[str], str]) -> Path:
    """A copy of an artifact with its metadata JSON text edited behind the writer's back."""
    model = onnx.load(str(src))
    for p in model.metadata_props:
        if p.key == "asap_policy":
            p.value = edit(p.value)
    dst.write_bytes(model.SerializeToString())
    return dst


def with_metadata(src: Path, dst: Path, edit: Callable[[dict], None]) -> Path:
    """A copy of an artifact with its decoded metadata edited in place by ``edit``."""
    def rewrite(text: str) -> str:
        data = json.loads(text)
        edit(data)
        return json.dumps(data)

    return with_metadata_text(src, dst, rewrite)
