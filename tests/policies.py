"""Tiny real ONNX policies for tests and benchmarks, exported through the artifact writer.

Each is a torch module whose output is known in closed form, so tests can assert on commands:
``constant`` (every action = c; 0 holds the default pose), ``nan_after`` (finite until the motion
phase passes a threshold, then NaN), ``sine`` (a gentle sine of the phase on every joint), and
``mlp`` (random weights, ASAP's 512-256-128 ELU size by default, for latency measurements).
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from asap_core.artifact import Motion, PolicyMetadata, asap_g1_metadata, export_torch_policy


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
