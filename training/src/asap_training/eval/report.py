"""Stage-2 results as the paper prints them: Table III (open loop) and Table IV (closed loop) in Markdown,
the same numbers as JSON, and plots.

``open_loop``: method → horizon ("0.25") → metrics (``openloop.open_loop_errors``);
``closed_loop``: method → ``closed_loop.mean_metrics`` row.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

METRIC_COLUMNS = (
    ("e_g_mpjpe_mm", "E_g-mpjpe"),
    ("e_mpjpe_mm", "E_mpjpe"),
    ("e_acc_mm", "E_acc"),
    ("e_vel_mm", "E_vel"),
)


def open_loop_table(open_loop: dict[str, dict[str, dict[str, float]]]) -> str:
    """Table III: one row per horizon and method (mm, mm/frame², mm/frame)."""
    head = "| Horizon | Method | " + " | ".join(name for _, name in METRIC_COLUMNS) + " |"
    lines = [head, "|" + "---|" * (2 + len(METRIC_COLUMNS))]
    horizons = sorted({h for rows in open_loop.values() for h in rows}, key=float)
    for h in horizons:
        for i, (method, rows) in enumerate(open_loop.items()):
            cells = " | ".join(f"{rows[h][k]:.1f}" for k, _ in METRIC_COLUMNS)
            lines.append(f"| {h + ' s' if i == 0 else ''} | {method} | {cells} |")
    return "\n".join(lines)


def closed_loop_table(closed_loop: dict[str, dict[str, float]]) -> str:
    """Table IV: one row per method; the lowest E_g-mpjpe in bold."""
    head = "| Method | Success | " + " | ".join(name for _, name in METRIC_COLUMNS) + " | Runs |"
    lines = [head, "|" + "---|" * (3 + len(METRIC_COLUMNS))]
    best = min(row["e_g_mpjpe_mm"] for row in closed_loop.values())
    for method, row in closed_loop.items():
        cells = []
        for key, _ in METRIC_COLUMNS:
            text = f"{row[key]:.1f}"
            cells.append(f"**{text}**" if key == "e_g_mpjpe_mm" and row[key] == best else text)
        lines.append(
            f"| {method} | {row['success_rate'] * 100:.0f}% | " + " | ".join(cells) + f" | {row['runs']} |"
        )
    return "\n".join(lines)


def plot_results(
    open_loop: dict[str, dict[str, dict[str, float]]],
    closed_loop: dict[str, dict[str, float]],
    curves: dict[str, np.ndarray],
    control_dt: float,
    path: Path,
) -> None:
    """Open-loop error vs horizon, closed-loop E_g-mpjpe per method, per-frame error of one run each."""
    import matplotlib  # only to plot: matplotlib takes seconds to import, nothing else here needs it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after choosing the file-only backend

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for method, rows in open_loop.items():
        hs = sorted(rows, key=float)
        axes[0].plot([float(h) for h in hs], [rows[h]["e_g_mpjpe_mm"] for h in hs], "o-", label=method)
    axes[0].set(xlabel="replay horizon (s)", ylabel="E_g-mpjpe (mm)", title="open loop (Table III)")
    axes[0].legend()
    names = list(closed_loop)
    axes[1].bar(names, [closed_loop[n]["e_g_mpjpe_mm"] for n in names], color="tab:blue")
    for i, n in enumerate(names):
        axes[1].text(
            i,
            closed_loop[n]["e_g_mpjpe_mm"],
            f"{closed_loop[n]['success_rate'] * 100:.0f}%",
            ha="center",
            va="bottom",
        )
    axes[1].set(ylabel="E_g-mpjpe (mm)", title="closed loop on the gap (Table IV; success above)")
    axes[1].tick_params(axis="x", rotation=20)
    for method, err in curves.items():
        axes[2].plot(np.arange(len(err)) * control_dt, err * 1e3, label=method)
    axes[2].set(xlabel="time (s)", ylabel="mean point error (mm)", title="closed loop, one run each")
    axes[2].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_report(out_dir: Path, title: str, sections: dict[str, str], data: dict) -> Path:
    """``report.md`` (title, then each section heading with its Markdown) and ``report.json``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    text = [f"# {title}", ""]
    for heading, body in sections.items():
        text += [f"## {heading}", "", body, ""]
    (out_dir / "report.md").write_text("\n".join(text))
    (out_dir / "report.json").write_text(json.dumps(data, indent=2, default=str) + "\n")
    return out_dir / "report.md"
