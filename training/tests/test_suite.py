"""The multi-gap summary: numbers per gap, mean and spread, and who won, from hand-made reports."""

from __future__ import annotations

import json

import pytest

from asap_training.eval.suite import (
    ASAP,
    OPEN_LOOP_DELTA,
    OPEN_LOOP_FLOOR,
    OPEN_LOOP_NONE,
    ORACLE,
    SYSID,
    VANILLA,
    suite_summary,
    suite_table,
    write_suite,
)


def _report(vanilla: tuple[float, float], asap: tuple[float, float], sysid: tuple[float, float],
            open_loop: tuple[float, float], floor: float | None = None) -> dict:
    def row(success: float, err: float) -> dict:
        return {"success_rate": success, "e_g_mpjpe_mm": err, "runs": 3}

    def ol(err: float) -> dict:
        return {"0.5": {"e_g_mpjpe_mm": 2 * err}, "1": {"e_g_mpjpe_mm": err}}

    rows = {OPEN_LOOP_NONE: ol(open_loop[0]), OPEN_LOOP_DELTA: ol(open_loop[1])}
    if floor is not None:
        rows[OPEN_LOOP_FLOOR] = ol(floor)
    return {"closed_loop": {VANILLA: row(*vanilla), ASAP: row(*asap), SYSID: row(*sysid)}, "open_loop": rows}


def test_summary_numbers_and_verdicts(tmp_path) -> None:
    reports = {
        "a": _report((0.0, 150.0), (1.0, 50.0), (1.0, 60.0), (100.0, 40.0), floor=20.0),
        "b": _report((1.0, 80.0), (2 / 3, 90.0), (1.0, 70.0), (50.0, 45.0)),
        "c": _report((1.0, 80.0), (1.0, 80.0), (1.0, 70.0), (50.0, 60.0)) | {"asap_kept_policy": "worse"},
        # πΔ gained nothing on SysID's simulator: ASAP fine-tuned there without it, SysID's own policy
        "d": _report((1.0, 80.0), (1.0, 70.0), (1.0, 70.0), (50.0, 50.0)) | {"asap_without_delta": "none"},
    }
    twin = {"success_rate": 0.9, "e_g_mpjpe_mm": 52.25, "e_g_mpjpe_mm_std": 1.5, "runs": 10}
    reports["a"]["closed_loop_twin"] = {ASAP: twin}  # b and c ran without the twin-core cross-check
    reports["b"]["config"] = {"delta_base": "sysid"}  # πΔ corrected SysID's simulator there
    # a alone ran the oracle (fine-tuned in the gap itself): lower than ASAP, yet not a method to beat
    reports["a"]["closed_loop"][ORACLE] = {"success_rate": 1.0, "e_g_mpjpe_mm": 40.0, "runs": 3}
    s = suite_summary(reports)
    a, b = s["runs"]["a"], s["runs"]["b"]
    assert a["open_loop_change"] == pytest.approx(-0.6)  # the longest horizon ("1"), not "0.5"
    assert a["open_loop_closed_share"] == pytest.approx(60 / 80)  # of the 80 mm above the 20 mm floor
    assert b["open_loop_floor_mm"] is None and b["open_loop_closed_share"] is None
    assert a["asap_below_vanilla"] and a["asap_success_at_least_vanilla"] and a["asap_lowest_fine_tuned"]
    assert not b["asap_below_vanilla"] and not b["asap_success_at_least_vanilla"]
    assert not b["asap_lowest_fine_tuned"]
    # of the oracle's 110 mm gain over Vanilla (150 -> 40), ASAP kept 100 and SysID 90
    assert a["share_of_oracle"] == pytest.approx({ASAP: 100 / 110, SYSID: 90 / 110})
    assert b["share_of_oracle"] == {}
    assert s["runs"]["c"]["asap_kept_policy"] and not a["asap_kept_policy"] and not b["asap_kept_policy"]
    d = s["runs"]["d"]
    assert d["asap_without_delta"] and not a["asap_without_delta"] and not d["asap_kept_policy"]
    assert d["asap_below_vanilla"] and not d["asap_lowest_fine_tuned"]  # a tie with SysID is no win
    asap = s["overall"][ASAP]
    mean, std = asap["e_g_mpjpe_mm_mean"], asap["e_g_mpjpe_mm_std"]
    assert (mean, std) == pytest.approx((72.5, 218.75**0.5))  # of 50, 90, 80, 70 (population std)
    assert asap["success_rate_mean"] == pytest.approx(11 / 12) and asap["episodes_per_gap"] == [3]
    table = suite_table(s)
    row_a = "| a | 0% / 150.0 | 100% / 50.0 | 100% / 60.0 | 100% / 40.0 | 100.0 → 40.0 (-60%) | 20.0, 75% |"
    assert row_a in table
    assert "| b | 100% / 80.0 | 67% / 90.0 | 100% / 70.0 |  | 50.0 → 45.0 (-10%) on SysID |  |" in table
    assert "| c | 100% / 80.0 | 100% / 80.0 (kept) | 100% / 70.0 |  | 50.0 → 60.0 (+20%) |  |" in table
    assert "(Vanilla − Oracle) in E_g-mpjpe: a: ASAP 91%, SysID 82%." in table
    assert "| d | 100% / 80.0 | 100% / 70.0 (no πΔ) | 100% / 70.0 |" in table
    assert "lowest of the fine-tuned methods on 1/4" in table and "below Vanilla on 2/4" in table
    assert "shipped policy was kept (1/4 gaps)" in table and "without πΔ (1/4 gaps)" in table
    assert "| Gap, twin core | " in table and "| a |  | 90% / 52.2 ± 1.5 |  |" in table
    assert "twin core, [10] noise seeds each" in table
    assert "| b |  |" not in table  # no twin-core row for a run without one
    md = write_suite(tmp_path, reports)
    assert json.loads((tmp_path / "suite.json").read_text())["runs"]["b"]["open_loop_with_mm"] == 45.0
    assert (tmp_path / "suite.png").stat().st_size > 0 and "![suite]" in md.read_text()
