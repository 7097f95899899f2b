"""Several demo runs (gaps × seeds) summarised like the paper: every Table III/IV number per gap, then the
mean and spread over gaps, with the episodes behind each cell and who won where.

Input: the ``report.json`` of each run (``asap_training.cli.demo``), keyed by the run's label.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np

VANILLA = "Vanilla (shipped policy)"
ASAP = "ASAP (fine-tuned with πΔ)"
SYSID = "SysID (fine-tuned)"
DR = "DR (Table VI, fine-tuned)"
DELTADYN = "DeltaDynamics (fine-tuned)"
FINE_TUNED = (ASAP, SYSID, DR, DELTADYN)
"""The corrections the paper compares (§4.7); Vanilla is the policy before any. The demo's report rows
carry these names, so the suite reads what the demo wrote."""
ORACLE = "Oracle (fine-tuned in the gap itself)"
"""Sim-to-sim only: the policy fine-tuned in the twin's own gap with the others' budget, what a
perfect correction would give in closed loop (the counterpart of :data:`OPEN_LOOP_FLOOR`). Not a method (on
a robot the gap is what nobody knows), so not among :data:`FINE_TUNED`: a reference for how much of the
reachable gain each correction kept."""
OPEN_LOOP_NONE = "Vanilla (no correction)"
OPEN_LOOP_DELTA = "ASAP (πΔ)"
"""Open-loop rows of a demo report: replays without and with πΔ."""
OPEN_LOOP_FLOOR = "Floor (the gap's own simulator)"
"""Open-loop row of a twin demo: the data replayed in a simulator with the twin's gap itself, what a
perfect correction would reach. The rest is the replay's own error (sensor noise in the recorded start
states, grown by the contacts), which no correction removes."""


def _open_loop_reduction(report: Mapping) -> tuple[float, float, float, float | None]:
    """(without πΔ, with πΔ, relative change, floor or None) of E_g-mpjpe at the longest replay horizon."""
    rows = report["open_loop"]
    horizon = max(rows[OPEN_LOOP_NONE], key=float)
    without = rows[OPEN_LOOP_NONE][horizon]["e_g_mpjpe_mm"]
    with_delta = rows[OPEN_LOOP_DELTA][horizon]["e_g_mpjpe_mm"]
    floor = rows[OPEN_LOOP_FLOOR][horizon]["e_g_mpjpe_mm"] if OPEN_LOOP_FLOOR in rows else None
    return without, with_delta, with_delta / without - 1.0, floor


def closable_share(without: float, with_correction: float, reference: float | None) -> float | None:
    """The share of the error above a reference (without − reference) that a correction removed; None
    without a reference or where nothing lies above it. Open loop: πΔ's share of the error above the
    floor; closed loop: a method's share of the oracle's gain over Vanilla."""
    if reference is None or without - reference <= 0.0:
        return None
    return (without - with_correction) / (without - reference)


def suite_summary(reports: Mapping[str, Mapping]) -> dict:
    """Per run and overall: closed-loop success and E_g-mpjpe of every method, open-loop change with πΔ,
    whether ASAP beat Vanilla and was the lowest of the fine-tuned methods."""
    runs = {}
    for label, report in reports.items():
        closed = report["closed_loop"]
        without, with_delta, change, floor = _open_loop_reduction(report)
        tuned = {m: closed[m]["e_g_mpjpe_mm"] for m in FINE_TUNED if m in closed}
        vanilla = closed[VANILLA]["e_g_mpjpe_mm"]
        oracle = closed[ORACLE]["e_g_mpjpe_mm"] if ORACLE in closed else None
        runs[label] = {
            "closed_loop": {m: {k: row[k] for k in ("success_rate", "e_g_mpjpe_mm", "runs")}
                            for m, row in closed.items()},
            "open_loop_without_mm": without,
            "open_loop_with_mm": with_delta,
            "open_loop_change": change,
            # the simulator πΔ corrects: with SysID's, the change includes SysID's share
            "delta_base": report.get("config", {}).get("delta_base", "nominal"),
            "open_loop_floor_mm": floor,
            "open_loop_closed_share": closable_share(without, with_delta, floor),
            "asap_below_vanilla": tuned[ASAP] < vanilla,
            "asap_success_at_least_vanilla": closed[ASAP]["success_rate"] >= closed[VANILLA]["success_rate"],
            # strictly: ASAP fine-tuned without πΔ is SysID's policy, and a tie is no win
            "asap_lowest_fine_tuned": len(tuned) > 1
            and all(tuned[ASAP] < e for m, e in tuned.items() if m != ASAP),
            "share_of_oracle": {} if oracle is None else {m: closable_share(vanilla, e, oracle)
                                                          for m, e in tuned.items()},
            "asap_kept_policy": bool(report.get("asap_kept_policy")),
            "asap_without_delta": bool(report.get("asap_without_delta")),
            # the same policies on the twin core over more noise seeds (reports that have them)
            "closed_loop_twin": report.get("closed_loop_twin", {}),
        }
    methods = list(dict.fromkeys(m for r in runs.values() for m in r["closed_loop"]))
    overall = {}
    for m in methods:
        cells = [r["closed_loop"][m] for r in runs.values() if m in r["closed_loop"]]
        overall[m] = {
            f"{key}_{stat}": float(fn([c[key] for c in cells]))
            for key in ("success_rate", "e_g_mpjpe_mm")
            for stat, fn in (("mean", np.mean), ("std", np.std))
        } | {"gaps": len(cells), "episodes_per_gap": sorted({c["runs"] for c in cells})}
    return {"runs": runs, "overall": overall}


def suite_table(summary: Mapping) -> str:
    """Markdown: one row per run (success % / E_g-mpjpe mm of every method, open loop without → with
    πΔ), then mean ± std over the runs."""
    runs, overall = summary["runs"], summary["overall"]
    methods = list(overall)
    open_loop = "open loop, uncorrected → ASAP's simulator (mm)"
    head = "| Gap | " + " | ".join(methods) + f" | {open_loop} | floor (mm), share closed |"
    lines = [head, "|" + "---|" * (len(methods) + 3)]
    for label, r in runs.items():
        cells = []
        for m in methods:
            c = r["closed_loop"].get(m)
            mark = ""
            if m == ASAP and (r["asap_kept_policy"] or r["asap_without_delta"]):
                mark = " (kept)" if r["asap_kept_policy"] else " (no πΔ)"
            cells.append(f"{c['success_rate']:.0%} / {c['e_g_mpjpe_mm']:.1f}{mark}" if c else "")
        without, with_delta = r["open_loop_without_mm"], r["open_loop_with_mm"]
        on = " on SysID" if r["delta_base"] == "sysid" else ""
        change = f"{without:.1f} → {with_delta:.1f} ({r['open_loop_change']:+.0%}){on}"
        floor, share = r["open_loop_floor_mm"], r["open_loop_closed_share"]
        parts = ([] if floor is None else [f"{floor:.1f}"]) + ([] if share is None else [f"{share:.0%}"])
        closed = ", ".join(parts)
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {change} | {closed} |")
    means = [
        f"{o['success_rate_mean']:.0%} ± {o['success_rate_std']:.0%} / "
        f"{o['e_g_mpjpe_mm_mean']:.1f} ± {o['e_g_mpjpe_mm_std']:.1f}"
        for o in overall.values()
    ]
    changes = [r["open_loop_change"] for r in runs.values()]
    spread = f"{np.mean(changes):+.0%} ± {np.std(changes):.0%}"
    shares = [r["open_loop_closed_share"] for r in runs.values() if r["open_loop_closed_share"] is not None]
    closed_spread = f"{np.mean(shares):.0%} ± {np.std(shares):.0%}" if shares else ""
    lines.append("| mean ± std | " + " | ".join(means) + f" | {spread} | {closed_spread} |")
    episodes = {m: o["episodes_per_gap"] for m, o in overall.items()}
    wins = sum(r["asap_lowest_fine_tuned"] for r in runs.values())
    below = sum(r["asap_below_vanilla"] for r in runs.values())
    kept = sum(r["asap_kept_policy"] for r in runs.values())
    without = sum(r["asap_without_delta"] for r in runs.values())
    lines += [
        "",
        f"Cells: closed-loop success / E_g-mpjpe (mm); episodes per cell: {episodes}. ASAP below Vanilla on "
        f"{below}/{len(runs)} gaps, lowest of the fine-tuned methods on {wins}/{len(runs)}; (kept): πΔ "
        f"replayed no better than no correction, the shipped policy was kept ({kept}/{len(runs)} gaps); "
        f"(no πΔ): the same on SysID's simulator, fine-tuned there without πΔ ({without}/{len(runs)} gaps). "
        "ASAP's simulator: πΔ on the nominal one, or (on SysID) on the one SysID identified from the run's "
        "data, where the change includes SysID's share.",
    ]
    return "\n".join(lines + _oracle_lines(runs) + _twin_lines(runs, methods))


def _oracle_lines(runs: Mapping) -> list[str]:
    """Each correction's share of the oracle's closed-loop gain, for the runs with an oracle row that
    gained over Vanilla."""
    per_run = []
    for label, r in runs.items():
        shares = [f"{m.split(' (')[0]} {v:.0%}" for m, v in r["share_of_oracle"].items() if v is not None]
        if shares:
            per_run.append(f"{label}: {', '.join(shares)}")
    if not per_run:
        return []
    return ["", "Share of the oracle's gain over Vanilla, (Vanilla − method) / (Vanilla − Oracle) in "
                f"E_g-mpjpe: {'; '.join(per_run)}."]  # fmt: skip


def _twin_lines(runs: Mapping, methods: list[str]) -> list[str]:
    """Rows of the twin-core cross-check (success / E_g-mpjpe ± its spread over the seeds; the seeds per
    cell are the report's ``twin_episodes``), where the runs have one."""
    twin = {label: r["closed_loop_twin"] for label, r in runs.items() if r.get("closed_loop_twin")}
    if not twin:
        return []
    seeds = sorted({row["runs"] for rows in twin.values() for row in rows.values()})
    lines = ["", f"The same policies on the twin core, {seeds} noise seeds each (success / E_g-mpjpe ± its "
             "standard deviation over the seeds, mm):", "",
             "| Gap, twin core | " + " | ".join(methods) + " |", "|" + "---|" * (len(methods) + 1)]

    def cell(c: Mapping | None) -> str:
        return f"{c['success_rate']:.0%} / {c['e_g_mpjpe_mm']:.1f} ± {c['e_g_mpjpe_mm_std']:.1f}" if c else ""

    for label, rows in twin.items():
        lines.append(f"| {label} | " + " | ".join(cell(rows.get(m)) for m in methods) + " |")
    return lines


def plot_suite(summary: Mapping, path: Path) -> None:
    """Closed-loop E_g-mpjpe per gap and method (grouped bars, success rate on top)."""
    import matplotlib  # only to plot: matplotlib takes seconds to import, nothing else here needs it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after choosing the file-only backend

    runs, methods = summary["runs"], list(summary["overall"])
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(runs) * max(1, len(methods)) / 3), 4.2))
    width = 0.8 / len(methods)
    for k, m in enumerate(methods):
        xs, ys, labels = [], [], []
        for i, r in enumerate(runs.values()):
            if m in r["closed_loop"]:
                xs.append(i + (k - (len(methods) - 1) / 2) * width)
                ys.append(r["closed_loop"][m]["e_g_mpjpe_mm"])
                labels.append(f"{r['closed_loop'][m]['success_rate']:.0%}")
        bars = ax.bar(xs, ys, width, label=m)
        ax.bar_label(bars, labels, fontsize=7)
    ax.set_xticks(range(len(runs)), list(runs), rotation=20)
    ax.set(ylabel="closed-loop E_g-mpjpe (mm)", title="every gap: error per method (success rate on top)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_suite(out: Path, reports: Mapping[str, Mapping]) -> Path:
    """``suite.md``, ``suite.json`` and ``suite.png`` in ``out``; returns the Markdown path."""
    summary = suite_summary(reports)
    out.mkdir(parents=True, exist_ok=True)
    (out / "suite.json").write_text(json.dumps(summary, indent=2) + "\n")
    plot_suite(summary, out / "suite.png")
    path = out / "suite.md"
    path.write_text(f"# ASAP on {len(reports)} gaps\n\n{suite_table(summary)}\n\n![suite](suite.png)\n")
    return path
