"""Fixtures of the training tests: the shared ASAP data (skipped when absent) and a small G1 model."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "asap_g1"
"""The ASAP clips and 23-DoF model, reached through ``../shared`` from the repository root (never copied)."""


@pytest.fixture(scope="session")
def asap_data() -> Path:
    """``../shared/data/asap_g1`` or skip."""
    if not (SHARED / "motions").is_dir():
        pytest.skip(f"ASAP data not present at {SHARED.resolve()}")
    return SHARED


@pytest.fixture(scope="session")
def g1_model():
    """The G1 as asap_sim builds it for training (200 Hz)."""
    from asap_sim.model import build_model

    return build_model(timestep=0.005)


@pytest.fixture(scope="session")
def kin(g1_model):
    """FK on that model."""
    from asap_sim.kinematics import G1Kinematics

    return G1Kinematics(g1_model)
