"""Operator settings: :class:`fitgate.settings.OperatorConfig` (``FITGATE_*``; ``fitgate operator`` flags win)."""

from __future__ import annotations

from fitgate.settings import UNKNOWN_POLICIES, OperatorConfig, UnknownPolicy

__all__ = ["UNKNOWN_POLICIES", "OperatorConfig", "UnknownPolicy"]
