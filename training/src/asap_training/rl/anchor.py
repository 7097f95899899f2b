"""A pull toward a reference policy's actions while fine-tuning (``FineTuneCfg.anchor``).

rsl_rl's PPO adds one extra loss per minibatch: its symmetry extension's mirror loss, ``coefficient ×
compute_loss(actor, batch, n)``, after ``augment_batch`` (which here adds no samples). :class:`ActionAnchor`
fills that slot with the squared distance between the policy's mean action and the reference policy's
at the batch's observations, so the update trades the return against staying near a policy known to
track well (its rollouts' own states, not the reference's).
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
from tensordict import TensorDict


class ActionAnchor:
    """The extra-loss object for ``PPO.symmetry`` (duck-typed as rsl_rl's ``Symmetry``)."""

    use_mirror_loss = True

    def __init__(self, weight: float, reference: dict[str, torch.Tensor]) -> None:
        """``weight``: the loss's coefficient; ``reference``: the actor's state dict to stay near (its
        observation normalizer included)."""
        if not weight > 0.0 or not math.isfinite(weight):
            raise ValueError(f"the anchor's weight is {weight}, expected > 0 (0: no anchor)")
        self.mirror_loss_coeff = weight
        self.reference = reference

    @classmethod
    def from_checkpoint(cls, weight: float, checkpoint: Path, actor: torch.nn.Module) -> ActionAnchor:
        """The actor of an rsl_rl checkpoint (``model_<it>.pt``) as the reference of ``actor``: the same
        network and observation normalizer, parameter for parameter, or a ``ValueError`` naming both."""
        if actor.is_recurrent:  # compute_loss runs the actor without masks or hidden states
            raise ValueError("the anchor needs a feed-forward actor")
        ours = actor.state_dict()
        state = torch.load(checkpoint, map_location=next(iter(ours.values())).device, weights_only=False)
        reference = state["actor_state_dict"]
        shapes = {k: tuple(v.shape) for k, v in ours.items()}
        theirs = {k: tuple(v.shape) for k, v in reference.items()}
        if shapes != theirs:
            raise ValueError(f"{checkpoint}: its actor is not this policy's network (parameters "
                             f"{sorted(set(theirs) ^ set(shapes)) or 'of other shapes'}): anchor to a run "
                             "of the same policy")
        return cls(weight, reference)

    def augment_batch(self, batch: object, original_batch_size: int) -> None:
        """No mirrored samples: the loss is on the batch as collected."""

    def compute_loss(self, actor: torch.nn.Module, batch: object, original_batch_size: int) -> torch.Tensor:
        """Mean over the batch of the summed squared difference of the two mean actions."""
        obs: TensorDict = batch.observations[:original_batch_size]  # type: ignore[attr-defined]
        with torch.no_grad():
            target = torch.func.functional_call(actor, self.reference, (obs,), strict=True)
        return (actor(obs) - target).pow(2).sum(-1).mean()
