"""Tiny real ONNX policies for tests and benchmarks, written through the artifact writer.

Each is an ONNX graph (``actor_obs`` [batch, obs_dim] -> ``action`` [batch, n]) built node by node, no
torch, so the tests that use them also run where only numpy, onnx and ONNX Runtime are installed (the robot
image). Outputs known in closed form, so tests can assert on commands: :func:`constant` (every action = c;
0 holds the default pose), :func:`nan_after` (finite until the motion phase passes a threshold, then NaN),
:func:`sine` (a gentle sine of the phase on every joint), and :func:`mlp` (random weights, ASAP's
512-256-128 ELU size by default, for latency measurements). For fault tests: :func:`slow` (a large matrix
product per inference) and :func:`output_grows_after` (a graph whose real output shape changes mid-motion).
The phase is the last observation entry in ASAP's layout; every output depends on it, so a NaN phase gives
NaN actions.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from asap_core.artifact import Motion, asap_g1_metadata, write_artifact

OBS_DIM = 380
"""ASAP's actor observation (``asap_core.observation.asap_actor_spec``)."""
OPSET = 17


def _model(nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto], n: int, obs_dim: int, name: str,
           io_names: tuple[str, str] = ("actor_obs", "action")) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(io_names[0], TensorProto.FLOAT, ["batch", obs_dim])],
        [helper.make_tensor_value_info(io_names[1], TensorProto.FLOAT, ["batch", n])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


def _scalar(name: str, value: float) -> onnx.TensorProto:
    return helper.make_tensor(name, TensorProto.FLOAT, [], [value])


def _phase_nodes(obs_dim: int) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    """Nodes computing ``phase`` [batch, 1], the last observation entry."""
    nodes = [helper.make_node("Slice", ["actor_obs", "last", "end", "axis1"], ["phase"])]
    inits = [helper.make_tensor("last", TensorProto.INT64, [1], [obs_dim - 1]),
             helper.make_tensor("end", TensorProto.INT64, [1], [obs_dim]),
             helper.make_tensor("axis1", TensorProto.INT64, [1], [1])]
    return nodes, inits


def _of_phase(n: int, obs_dim: int, name: str, body: list[onnx.NodeProto],
              inits: list[onnx.TensorProto]) -> onnx.ModelProto:
    """``action`` = ``per_joint`` (a [batch, 1] value computed by ``body`` from ``phase``) on all n joints."""
    phase_nodes, phase_inits = _phase_nodes(obs_dim)
    expand = helper.make_node("Expand", ["per_joint", "joints_shape"], ["action"])
    shape = helper.make_tensor("joints_shape", TensorProto.INT64, [2], [1, n])
    return _model([*phase_nodes, *body, expand], [*phase_inits, *inits, shape], n, obs_dim, name)


def constant(n: int, value: float, obs_dim: int = OBS_DIM) -> onnx.ModelProto:
    """Every action = ``value`` (``0 * phase + value``)."""
    body = [helper.make_node("Mul", ["phase", "zero"], ["zeroed"]),
            helper.make_node("Add", ["zeroed", "value"], ["per_joint"])]
    return _of_phase(n, obs_dim, "constant", body, [_scalar("zero", 0.0), _scalar("value", value)])


def nan_after(n: int, phase: float, obs_dim: int = OBS_DIM) -> onnx.ModelProto:
    """0 while the phase is <= ``phase``, NaN after (``0 * sqrt(phase_threshold - phase)``)."""
    body = [helper.make_node("Sub", ["threshold", "phase"], ["left"]),
            helper.make_node("Sqrt", ["left"], ["root"]),
            helper.make_node("Mul", ["root", "zero"], ["per_joint"])]
    return _of_phase(n, obs_dim, "nan_after", body, [_scalar("threshold", phase), _scalar("zero", 0.0)])


def sine(n: int, amplitude: float, obs_dim: int = OBS_DIM) -> onnx.ModelProto:
    """``amplitude * sin(2 pi phase)`` on every joint."""
    body = [helper.make_node("Mul", ["phase", "two_pi"], ["angle"]),
            helper.make_node("Sin", ["angle"], ["wave"]),
            helper.make_node("Mul", ["wave", "amplitude"], ["per_joint"])]
    return _of_phase(n, obs_dim, "sine", body, [_scalar("two_pi", 2.0 * math.pi),
                                                _scalar("amplitude", amplitude)])


def slow(n: int, size: int = 2000, obs_dim: int = OBS_DIM) -> onnx.ModelProto:
    """0 on every joint after squaring a ``size`` x ``size`` matrix built from the input: ~0.1-1 s per call
    on one thread (a graph too slow for a 50 Hz loop, and a load that takes seconds)."""
    body = [
        helper.make_node("Slice", ["actor_obs", "first", "one_i", "axis1"], ["first_col"]),
        helper.make_node("Slice", ["first_col", "first", "one_i", "axis0"], ["corner"]),
        helper.make_node("Add", ["corner", "one"], ["corner1"]),
        helper.make_node("Expand", ["corner1", "square"], ["matrix"]),
        helper.make_node("MatMul", ["matrix", "matrix"], ["product"]),
        helper.make_node("ReduceMean", ["product"], ["mean"], keepdims=0),
        helper.make_node("Mul", ["mean", "zero"], ["zero_mean"]),
        helper.make_node("Mul", ["phase", "zero"], ["zero_phase"]),
        helper.make_node("Add", ["zero_phase", "zero_mean"], ["per_joint"]),
    ]
    inits = [helper.make_tensor("first", TensorProto.INT64, [1], [0]),
             helper.make_tensor("one_i", TensorProto.INT64, [1], [1]),
             helper.make_tensor("axis0", TensorProto.INT64, [1], [0]),
             helper.make_tensor("square", TensorProto.INT64, [2], [size, size]),
             _scalar("one", 1.0), _scalar("zero", 0.0)]
    return _of_phase(n, obs_dim, "slow", body, inits)


def mlp(obs_dim: int, n: int, hidden: Sequence[int] = (512, 256, 128), seed: int = 0,
        output_gain: float = 1.0, io_names: tuple[str, str] = ("actor_obs", "action")) -> onnx.ModelProto:
    """Linear + ELU layers with random weights (uniform in ±1/sqrt(fan_in), as torch initializes them);
    the output layer scaled by ``output_gain`` (0.01: an ASAP-size network whose actions stay gentle)."""
    rng = np.random.default_rng(seed)
    widths = [obs_dim, *hidden, n]
    nodes, inits, x = [], [], io_names[0]
    for k, (fan_in, fan_out) in enumerate(itertools.pairwise(widths)):
        last = k == len(hidden)
        bound, gain = 1.0 / math.sqrt(fan_in), output_gain if last else 1.0
        weight = rng.uniform(-bound, bound, (fan_out, fan_in)) * gain
        bias = rng.uniform(-bound, bound, fan_out) * gain
        inits += [numpy_helper.from_array(weight.astype(np.float32), f"w{k}"),
                  numpy_helper.from_array(bias.astype(np.float32), f"b{k}")]
        linear = io_names[1] if last else f"z{k}"
        nodes.append(helper.make_node("Gemm", [x, f"w{k}", f"b{k}"], [linear], transB=1))
        if not last:
            x = f"h{k}"
            nodes.append(helper.make_node("Elu", [linear], [x]))
    return _model(nodes, inits, n, obs_dim, "mlp", io_names)


def output_grows_after(n: int, phase: float, obs_dim: int = OBS_DIM) -> onnx.ModelProto:
    """A graph declaring output [batch, n] whose real output is [1, n] while the phase is <= ``phase`` and
    [1, 2n] after: a shape only a run-time check sees."""
    phase_nodes, phase_inits = _phase_nodes(obs_dim)
    nodes = [
        *phase_nodes,
        helper.make_node("Greater", ["phase", "threshold"], ["late"]),
        helper.make_node("Cast", ["late"], ["late_i"], to=TensorProto.INT64),
        helper.make_node("Reshape", ["late_i", "one_dim"], ["late_1"]),
        helper.make_node("Add", ["late_1", "one"], ["copies"]),
        helper.make_node("Concat", ["one", "copies"], ["repeats"], axis=0),
        helper.make_node("Tile", ["zeros", "repeats"], ["action"]),
    ]
    inits = [
        *phase_inits,
        _scalar("threshold", phase),
        helper.make_tensor("one_dim", TensorProto.INT64, [1], [1]),
        helper.make_tensor("one", TensorProto.INT64, [1], [1]),
        helper.make_tensor("zeros", TensorProto.FLOAT, [1, n], [0.0] * n),
    ]
    return _model(nodes, inits, n, obs_dim, "output_grows")


def write(path: Path, model: onnx.ModelProto, motion_s: float = 2.0, name: str = "test",
          **overrides: Any) -> Path:
    """Write ``model`` as an ASAP 23-DoF artifact (``overrides`` replace metadata fields); the path."""
    meta = asap_g1_metadata(motion=Motion(name=f"{name}_motion", length_s=motion_s), name=name, **overrides)
    write_artifact(path, model, meta)
    return path


def with_metadata_text(src: Path, dst: Path, edit: Callable[[str], str]) -> Path:
    """A copy of an artifact with its metadata JSON text edited behind the writer's back."""
    model = onnx.load(str(src))
    for p in model.metadata_props:
        if p.key == "asap_policy":
            p.value = edit(p.value)
    dst.write_bytes(model.SerializeToString())
    return dst


def with_metadata(src: Path, dst: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    """A copy of an artifact with its decoded metadata edited in place by ``edit``."""
    def rewrite(text: str) -> str:
        data = json.loads(text)
        edit(data)
        return json.dumps(data)

    return with_metadata_text(src, dst, rewrite)
