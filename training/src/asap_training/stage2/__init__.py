"""ASAP stage 2: recorded episodes → dataset → delta-action model → fine-tuned policy (research §4)."""
