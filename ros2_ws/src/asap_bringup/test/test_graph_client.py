"""The graph client against the real sim2sim graph: two recorded episodes, then asap-push.

The graph comes from the runner as users start it, in its lock-step variant (``sim2sim_lockstep``:
the twin waits for each policy command, the policy node ticks on the twin's clock), with the shipped
arm_swing policy and the nominal profile. The realtime ``sim2sim`` graph is the same nodes on wall-clock
deadlines; on a 2-core machine shared with other work its 500 Hz twin misses deadlines and the policy
node rightly trips on stale states, so a test of the client would test the machine's load instead.

The shipped policy is interim and falls on the twin after ~3 s: a fall (DAMPING) is a finished,
shorter episode, so the checks hold for either ending.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rclpy")
from asap_msgs.srv import SetMode
from std_srvs.srv import Trigger

from asap_bringup.graph_client import EpisodeEnd, GraphClient, GraphClientCfg
from asap_core.artifact import load_artifact
from asap_core.modes import Event, Mode
from asap_core.testing import policies
from asap_logger.reader import open_episode
from asap_testing.dds import runner_graph

REPO = Path(__file__).resolve().parents[4]
POLICY = REPO / "training" / "policies" / "arm_swing" / "policy.onnx"
CONTROL_DT = 0.02


def test_push_help_says_what_it_sends_and_what_the_exit_status_means() -> None:
    out = subprocess.run([sys.executable, "-m", "asap_bringup.push", "--help"], capture_output=True,
                         text=True, check=True, timeout=60).stdout
    assert "--blend-ticks" in out and "Exit status" in out


def _push(path: Path, timeout_s: float = 20.0) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "asap_bringup.push", str(path), "--timeout", str(timeout_s)],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def sim2sim(tmp_path: Path):
    """The lock-step sim2sim graph from the runner, with the shipped policy and the nominal profile."""
    episodes = tmp_path / "episodes"
    with runner_graph("sim2sim_lockstep", f"policy:={POLICY}", "dynamics_profile:=nominal",
                      f"episodes_dir:={episodes}", log=tmp_path / "runner.log"):
        yield episodes


def _policy_run(bag: Path) -> tuple[np.ndarray, np.ndarray, float]:
    """Ticks and phases of the bag's POLICY records, and the pelvis height at the first of them."""
    ep = open_episode(bag)
    assert ep.counts.get("/lowstate", 0) > 0 and ep.counts.get("/odometry", 0) > 0, ep.counts
    records = ep.policy()
    run = records.mode == Mode.POLICY
    odometry = ep.odometry()
    at_start = np.argmin(np.abs(odometry.t_ns - records.t_ns[run][0]))  # received together, at 500 Hz
    return records.tick[run], records.phase[run], float(odometry.pos[at_start, 2])


@pytest.mark.graph
# Rerun: in one loaded fresh-clone CI run the node was still in POLICY 10 s after its HOLD (lock-step
# clock starved); the lock-step stall after /sim/reset is an open problem (issue 8 note).
@pytest.mark.flaky(reruns=2)
def test_two_episodes_then_push(sim2sim: Path, tmp_path: Path) -> None:
    t0 = time.monotonic()
    progress = []
    slow_ok = GraphClientCfg(ramp_timeout_s=300.0, recorder_timeout_s=60.0)  # lock-step on a busy machine
    with GraphClient(slow_ok, progress=progress.append) as client:
        client.wait_ready(120.0)
        ready_s = time.monotonic() - t0
        outcomes, walls = [], []
        for _ in range(2):
            start = time.monotonic()
            outcomes.append(client.record_episode(timeout_s=300.0))
            walls.append(time.monotonic() - start)
        assert client.status().mode in (Mode.HOLD, Mode.DAMPING)

        tick_phase = CONTROL_DT / load_artifact(POLICY).metadata.motion.length_s
        first_heights, coverage = [], []
        for outcome in outcomes:
            assert outcome.end in (EpisodeEnd.COMPLETE, EpisodeEnd.FAULT), outcome
            assert outcome.bag.parent == sim2sim and outcome.bag.is_dir()
            ticks, phase, height = _policy_run(outcome.bag)
            # most of the run in the bag, without a hole: the recorder opens and closes the episode on
            # the status that enters and leaves POLICY, so ticks the records of which beat that status
            # to the recorder fall outside (a few; more when a lock-step twin runs fast)
            run_ticks = round(outcome.final_phase / tick_phase) + 1
            assert np.all(np.diff(ticks) == 1), "policy ticks missing from the bag"
            assert len(ticks) >= 0.8 * run_ticks, f"{len(ticks)} of {run_ticks} POLICY ticks recorded"
            assert phase[-1] <= outcome.final_phase + 1e-6
            coverage.append((len(ticks), run_ticks, round(float(phase[0]), 3), round(float(phase[-1]), 3)))
            if outcome.end is EpisodeEnd.COMPLETE:
                assert outcome.final_phase == pytest.approx(1.0)
            else:
                assert outcome.reason, "a fault without its reason"
            first_heights.append(height)
        assert outcomes[0].bag != outcomes[1].bag
        assert abs(first_heights[1] - first_heights[0]) < 0.02, f"second episode began at {first_heights}"
        assert {p.stage for p in progress} >= {"prepare", "ramp", "policy", "done"}

        corrupt = tmp_path / "corrupt.onnx"
        corrupt.write_bytes(b"not an onnx model")
        refused = _push(corrupt)
        assert refused.returncode == 1, refused
        assert "refused" in refused.stderr and str(corrupt) in refused.stderr

        other = policies.write(tmp_path / "other.onnx", policies.constant(23, 0.0), name="other")
        accepted = _push(other)
        assert accepted.returncode == 0, accepted
        sha = accepted.stdout.split("sha256 ")[1].split()[0]
        deadline = time.monotonic() + 10.0
        while client.status().policy_sha256 != sha and time.monotonic() < deadline:
            time.sleep(0.1)
        assert client.status().policy_sha256 == sha and client.status().policy_name == "other"
    print(
        f"graph ready {ready_s:.1f} s; episodes {[f'{w:.1f} s' for w in walls]} "
        f"{[(o.end.value, round(o.final_phase, 2)) for o in outcomes]}; recorded (ticks, of, first phase, "
        f"last phase) {coverage}; test {time.monotonic() - t0:.1f} s"
    )


@pytest.mark.graph
def test_push_without_a_node_exits_2_and_says_how_to_start_one(tmp_path: Path) -> None:
    result = _push(POLICY, timeout_s=1.0)
    assert result.returncode == 2, result
    assert "python -m asap_bringup.runner sim2sim" in result.stderr


def test_ramp_is_requested_two_node_ticks_after_the_twin_reset(monkeypatch: pytest.MonkeyPatch) -> None:
    """RAMP interpolates from the state of its first tick, and that state may predate the twin's reset (a
    lock-step twin reset while it waited at a sync state had published that state already): ramped from
    the limp pose, the reset robot's feet scuffed in the band and the episode fell. Each SetMode reply
    comes after the tick that applied it, so two requests between the reset and RAMP put RAMP on a
    state from after the reset. The race depends on timing, so the client's real request sequence is
    checked here, with the graph's answers stood in for its service calls."""
    calls: list[object] = []

    def answer(service: str, request: object, answer_s: float | None = None) -> object:
        if isinstance(request, SetMode.Request):
            calls.append(Event(request.request))
            mode = Mode.RAMP if request.request == Event.REQUEST_RAMP.value else Mode.ZERO_TORQUE
            return SetMode.Response(accepted=True, mode=int(mode), message="")
        calls.append(service)
        return Trigger.Response(success=True, message="twin reset")

    with GraphClient() as client:
        monkeypatch.setattr(client, "_call", answer)
        monkeypatch.setattr(client, "_wait", lambda predicate, timeout_s: True)  # HOLD reached
        assert client._reset_and_ramp() == ""
    assert calls == [client.cfg.names.twin_reset, Event.REQUEST_ZERO_TORQUE, Event.REQUEST_ZERO_TORQUE,
                     Event.REQUEST_RAMP]
