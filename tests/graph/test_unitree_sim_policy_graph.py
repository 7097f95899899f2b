"""The policy for Unitree's simulator (``arm_swing_unitree_sim``) through the ROS graph on that simulator's
drive: the lock-step sim2sim graph from the runner with the twin on the held drive at 5 ms (the README's
"Talking to a G1" settings), one episode recorded by the graph client and scored from its bag."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("rclpy")
from asap_bringup.graph_client import EpisodeEnd, GraphClient, GraphClientCfg
from asap_testing.dds import runner_graph
from asap_training.cli.demo import closed_loop_from_bags

pytestmark = pytest.mark.graph
POLICIES = Path(__file__).resolve().parents[2] / "training" / "policies"
POLICY = POLICIES / "arm_swing_unitree_sim" / "policy.onnx"
HELD_5MS = ("twin_drive:=held", "twin_physics_dt:=0.005", "twin_state_rate_hz:=200.0", "twin_sync_every:=4")


def test_the_unitree_sim_policy_completes_an_episode_on_the_held_drive_at_5_ms(tmp_path: Path) -> None:
    graph = runner_graph("sim2sim_lockstep", f"policy:={POLICY}", "dynamics_profile:=nominal",
                         f"episodes_dir:={tmp_path / 'episodes'}", *HELD_5MS, log=tmp_path / "runner.log")
    with graph, GraphClient(GraphClientCfg(ramp_timeout_s=300.0, recorder_timeout_s=60.0)) as client:
        client.wait_ready(120.0)
        outcome = client.record_episode(timeout_s=400.0)
    assert outcome.end is EpisodeEnd.COMPLETE, outcome  # shipped arm_swing: POLICY refused, HOLD cannot hold
    metrics, _ = closed_loop_from_bags([outcome.bag], POLICY)
    assert metrics["success_rate"] == 1.0 and metrics["e_g_mpjpe_mm"] < 100.0, metrics  # measured 62.5
