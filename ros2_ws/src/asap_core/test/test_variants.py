"""mode_machine / mode_pr semantics."""

from __future__ import annotations

import pytest

from asap_core import variants


def test_known_values() -> None:
    assert variants.variant(5).body_dof == 29
    assert variants.variant(4).body_dof == 23
    assert variants.variant(6).waist_locked
    assert variants.variant(9).body_dof == 14
    assert variants.supports_full_body(5) and not variants.supports_full_body(6)
    assert not variants.supports_full_body(1)
    assert variants.variant(variants.SIM_MODE_MACHINE).name == "g1_29dof_rev_1_0"
    assert variants.ModePr.PR == 0 and variants.ModePr.AB == 1


def test_unknown_value_lists_known_ones() -> None:
    with pytest.raises(variants.UnknownVariantError, match="5=g1_29dof_rev_1_0"):
        variants.variant(42)
