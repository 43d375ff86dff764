"""Resolving a checkpoint reference into the facts the sizing core consumes.

A reference is a local directory in Hugging Face layout, or a Hugging Face repo id
(``org/name[@revision]``) served from the built-in catalog.
"""

from fitgate.checkpoints.facts import CheckpointError, ModelFacts, to_model_input
from fitgate.checkpoints.resolve import resolve

__all__ = ["CheckpointError", "ModelFacts", "resolve", "to_model_input"]
