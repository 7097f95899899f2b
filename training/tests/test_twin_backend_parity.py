"""The twin backend of ``asap-eval`` (and of every twin-core rollout: SysID's and the stage-2 tests' data)
runs what a graph episode runs: one lock-step episode of the demo's own graph (runner, twin, policy node,
recorder over DDS) and the twin core's rollout of the same policy, profile and seed agree joint by joint.

They differ by the wire's float32 rounding and the ticks the node spends in HOLD before POLICY (the
client's request takes wall time while sim time runs on), far below what a different start makes: a
rollout released standing, as the twin core ran before it went through the band and the ramp, was 0.087
rad off at the first compared tick and 0.02-0.05 rad over the whole second.
"""

from __future__ import annotations

import numpy as np
import pytest

from asap_core.artifact import load_artifact
from asap_training.cli.demo import DemoCfg, record
from asap_training.data.ingest import ingest
from asap_training.envs.tracking_env import TrackingEnv
from asap_training.eval.evaluate import eval_env_cfg, rollout_twin

pytestmark = [pytest.mark.graph, pytest.mark.slow]
TICKS = 50  # the first second of the motion


def test_the_twin_core_rollout_reproduces_a_lockstep_graph_episode(tmp_path) -> None:
    cfg = DemoCfg(out=tmp_path, gap="nominal")
    policy = cfg.parent / "policy.onnx"
    (bag,) = record(cfg, policy, "parity", 1, first_seed=7)
    artifact = load_artifact(policy)
    graph = ingest([bag], artifact).trajectories[0]
    core = rollout_twin(artifact, TrackingEnv(eval_env_cfg(artifact)), "nominal", seed=7).trajectory
    assert graph is not None and core is not None
    start = int(np.searchsorted(core.phase, graph.phase[0] - 1e-9))  # ingest starts at a later tick
    n = min(TICKS, len(graph.phase), len(core.phase) - start)
    assert n == TICKS and start <= 3
    np.testing.assert_allclose(core.phase[start : start + n], graph.phase[:n], atol=1e-6)
    gap = np.abs(core.joint_pos[start : start + n] - graph.joint_pos[:n]).max(axis=1)
    assert gap.max() < 0.02, f"the twin core leaves the graph's run: {np.round(gap, 3).tolist()}"
    # the applied actions as joint targets (rad): the node's HOLD ticks before POLICY depend on wall time,
    # and they moved the targets by 0.003-0.017 rad over 10 runs here (the joints by 0.002-0.01)
    scale = artifact.metadata.array("action_scale")
    targets = np.abs(core.action[start : start + n] - graph.action[:n]) * scale
    assert targets.max() < 0.03, f"the applied joint targets differ by {targets.max():.3f} rad"
