"""The fine-tuning's pull toward a reference policy's actions (asap_training.rl.anchor) inside PPO."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch
import yaml

from asap_training.envs.tracking_env import TrackingEnv
from asap_training.rl.anchor import ActionAnchor
from asap_training.rl.finetune import FineTuneCfg, anchor_checkpoint, fine_tune
from asap_training.rl.train import TrackingRunner, latest_checkpoint, read_params
from asap_training.rl.vecenv import RslRlVecEnv

PARENT = Path(__file__).resolve().parents[1] / "policies" / "arm_swing"


def _parent_runner() -> TrackingRunner:
    env_cfg, ppo_cfg = read_params(PARENT)
    env = RslRlVecEnv(TrackingEnv(replace(env_cfg, num_envs=4, seed=3)))
    ppo = replace(ppo_cfg, num_steps_per_env=8).to_rsl_rl()
    runner = TrackingRunner(env, ppo, log_dir=None, progress=False)
    runner.load(str(latest_checkpoint(PARENT)))
    return runner


def _shifted(actor: torch.nn.Module, shift: torch.Tensor) -> dict[str, torch.Tensor]:
    """The actor's state with its output layer's bias moved by ``shift``: its actions move by exactly that."""
    state = {k: v.detach().clone() for k, v in actor.state_dict().items()}
    biases = [k for k in state if k.startswith("mlp.") and k.endswith(".bias")]
    last = max(biases, key=lambda k: int(k.split(".")[1]))
    state[last] += shift
    return state


class _Batch:
    def __init__(self, observations):
        self.observations = observations


def test_the_anchor_loss_is_the_squared_distance_to_the_reference_actions():
    runner = _parent_runner()
    actor, obs = runner.alg.actor, runner.env.get_observations()
    shift = torch.linspace(-0.2, 0.3, runner.env.num_actions)
    loss = ActionAnchor(1.0, _shifted(actor, shift)).compute_loss(actor, _Batch(obs), obs.batch_size[0])
    assert torch.isclose(loss, shift.pow(2).sum(), rtol=1e-4)  # hand-computed: every action off by shift
    same = ActionAnchor(1.0, _shifted(actor, torch.zeros_like(shift)))
    assert same.compute_loss(actor, _Batch(obs), obs.batch_size[0]).item() < 1e-10


def test_ppo_updates_move_the_policy_toward_the_anchor_and_not_without_it():
    def distance_after(anchor: float) -> tuple[float, float]:
        torch.manual_seed(0)
        runner = _parent_runner()
        actor, obs = runner.alg.actor, runner.env.get_observations()
        reference = _shifted(actor, torch.full((runner.env.num_actions,), 0.3))

        def distance() -> float:
            with torch.no_grad():
                target = torch.func.functional_call(actor, reference, (obs,))
                return (actor(obs) - target).norm(dim=-1).mean().item()

        before = distance()
        if anchor:
            runner.alg.symmetry = ActionAnchor(anchor, reference)
        runner.learn(3)
        return before, distance()

    before, anchored = distance_after(10.0)
    _, free = distance_after(0.0)
    assert anchored < 0.8 * before  # pulled toward the reference's actions
    assert free > 0.9 * before  # PPO alone does not move there


def test_the_anchor_pulls_toward_the_parent_or_the_named_run_and_refuses_what_is_unclear(tmp_path):
    parent = latest_checkpoint(PARENT)
    assert anchor_checkpoint(FineTuneCfg(), parent) is None
    assert anchor_checkpoint(FineTuneCfg(anchor=0.1), parent) == parent
    assert anchor_checkpoint(FineTuneCfg(anchor=0.1, anchor_run=PARENT), tmp_path / "x.pt") == parent
    with pytest.raises(ValueError, match="anchor >= 0"):
        anchor_checkpoint(FineTuneCfg(anchor=-0.1), parent)
    with pytest.raises(ValueError, match="only with anchor > 0"):
        anchor_checkpoint(FineTuneCfg(anchor_run=PARENT), parent)
    with pytest.raises(FileNotFoundError, match=r"no model_<it>\.pt"):
        anchor_checkpoint(FineTuneCfg(anchor=0.1, anchor_run=tmp_path), parent)


def test_fine_tune_installs_the_anchor_from_the_checkpoint_it_names(tmp_path, monkeypatch):
    installed = []
    original = ActionAnchor.from_checkpoint

    def record(weight, checkpoint, actor):
        installed.append((weight, checkpoint))
        return original(weight, checkpoint, actor)

    monkeypatch.setattr(ActionAnchor, "from_checkpoint", staticmethod(record))
    cfg = FineTuneCfg(iterations=1, num_envs=2, select_every=0, anchor=0.1, anchor_run=PARENT)
    fine_tune(PARENT, cfg, tmp_path / "run", tmp_path / "p.onnx", progress=False)
    assert installed == [(0.1, latest_checkpoint(PARENT))]
    options = yaml.safe_load((tmp_path / "run" / "params" / "finetune.yaml").read_text())
    assert options["anchor"] == 0.1 and options["anchor_checkpoint"] == str(latest_checkpoint(PARENT))
    assert options["delta_scale_range"] == [0.5, 1.5] and options["parent_checkpoint"].endswith(".pt")


def test_an_anchor_of_another_network_is_refused_with_its_name(tmp_path):
    runner = _parent_runner()
    state = torch.load(latest_checkpoint(PARENT), weights_only=False)
    state["actor_state_dict"]["mlp.0.weight"] = state["actor_state_dict"]["mlp.0.weight"][:64]
    other = tmp_path / "model_1.pt"
    torch.save(state, other)
    with pytest.raises(ValueError, match="not this policy's network"):
        ActionAnchor.from_checkpoint(0.1, other, runner.alg.actor)
    with pytest.raises(ValueError, match="expected > 0"):
        ActionAnchor(float("nan"), {})


REFUSED = [({"gain_set": "stiff"}, KeyError, "unknown gain set"),
           ({"held_drive_lag": 1.5}, ValueError, "lag")]


@pytest.mark.parametrize(("option", "error", "message"), REFUSED)
def test_fine_tune_refuses_a_gain_set_or_lag_before_writing_anything(tmp_path, option, error, message):
    cfg = FineTuneCfg(iterations=1, num_envs=2, **option)
    with pytest.raises(error, match=message):
        fine_tune(PARENT, cfg, tmp_path / "run", tmp_path / "p.onnx")
    assert not (tmp_path / "run").exists()
