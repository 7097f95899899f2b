"""``asap-demo`` end to end on a tiny budget: two ASAP rounds on a random gap, through the real graph,
πΔ correcting the simulator SysID identified from the first round's data (the default ``--delta-base``).

Every step runs for real (runner-started lock-step graphs over DDS, MCAP bags, ingest, πΔ warm start +
PPO, fine-tuning, LoadPolicy pushes, the report), with budgets far too small to learn anything: the test
proves the plumbing of ``--rounds``, the SysID base, the oracle baseline and ``--gap random:<seed>``, not
the method (README: demo results).
"""

from __future__ import annotations

import json

import pytest
import yaml

from asap_sim.profiles import random_profile_dict
from asap_training.cli.demo import main
from asap_training.data.dataset import RealDataset
from asap_training.envs.delta_model import DeltaModel
from asap_training.eval.suite import ORACLE
from asap_training.rl.train import read_params

pytestmark = [pytest.mark.graph, pytest.mark.slow]


def test_two_rounds_on_a_random_gap(tmp_path) -> None:
    out = tmp_path / "demo"
    main([
        "--out", str(out), "--gap", "random:3", "--rounds", "2", "--episodes", "1", "--eval-episodes", "1",
        "--twin-episodes", "2",
        "--delta-iterations", "1", "--finetune-iterations", "1", "--finetune-envs", "8",
        "--delta-joints", "auto", "--threads", "1",
        "--finetune-min-gain=-inf",  # whatever πΔ this budget fits: the test is of the rounds' plumbing
        "--delta-search-ticks", "1", "--delta-visited-rounds", "0",  # the quickest warm start
        "--sysid-evaluations", "3", "--baselines", "oracle",
    ])  # fmt: skip
    assert yaml.safe_load((out / "gap.yaml").read_text()) == random_profile_dict(3)
    first, merged = RealDataset.load(out / "dataset.npz"), RealDataset.load(out / "dataset_r2.npz")
    parts = merged.info["parts"]
    assert len(parts) == 2 and parts[0]["sha256"] == first.sha256
    assert parts[1]["policy_sha256"] != parts[0]["policy_sha256"]  # round 2 ran round 1's policy
    assert merged.num_steps > first.num_steps
    shares = DeltaModel(out / "delta_r2" / "delta.onnx").meta.joint_shares
    assert set(shares) == set(first.action_joints) and sum(shares.values()) == pytest.approx(1.0)
    report = json.loads((out / "report.json").read_text())
    assert report["config"]["rounds"] == 2
    assert any("round 2" in row for row in report["open_loop"])
    twin = report["closed_loop_twin"]  # the same policies on the twin core, 2 noise seeds each
    assert set(twin) == set(report["closed_loop"]) and {row["runs"] for row in twin.values()} == {2}
    assert all(row["e_g_mpjpe_mm"] > 0.0 and row["e_g_mpjpe_mm_std"] >= 0.0 for row in twin.values())
    assert "twin core (2 noise seeds per policy)" in (out / "report.md").read_text()
    assert (out / "policy_asap_r2.onnx").is_file() and (out / "finetune_asap" / "policy.onnx").is_file()
    # both rounds' πΔ correct the identified simulator, and each fine-tuning ran in it
    identified = str(out / "sysid" / "identified.yaml")
    assert "SysID" in report["open_loop"] and (out / "sysid" / "identified.json").is_file()
    for tag in ("", "_r2"):
        assert DeltaModel(out / f"delta{tag}" / "delta.onnx").meta.profile == identified
        assert read_params(out / f"finetune_asap{tag}")[0].profile == identified
    # the oracle fine-tuned in the twin's gap itself, a row of its own that ASAP is not ranked against
    assert read_params(out / "finetune_oracle")[0].profile == "random:3"
    assert ORACLE in report["closed_loop"] and ORACLE in twin
    assert (out / "policy_oracle.onnx").is_file()
    # each fine-tuning scored its parent and its one update, and exported the better one
    for run in ("finetune_asap", "finetune_asap_r2"):
        selection = json.loads((out / run / "selection.json").read_text())
        assert selection["chosen_iterate"] in (0, 1) and sorted(selection["scores"]) == ["0", "1"]
