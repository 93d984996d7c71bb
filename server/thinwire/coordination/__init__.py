"""Coordinators: who may change a context, and how a run on another process is reached.
See `base.py` for the contract."""

from __future__ import annotations

from thinwire.coordination.base import Coordinator, Lease
from thinwire.coordination.local import LocalCoordinator

__all__ = ["Coordinator", "Lease", "LocalCoordinator"]
