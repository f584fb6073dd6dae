"""Job integrations: one module per job kind, each an `Integration` (see base.py), listed in
registry.py's `REGISTRY`; the generic reconciler in gitopsq/admission_loop/job_reconciler.py does the rest.

``INTEGRATIONS`` is the whole registry (every kind a Workload may be owned by); a controller runs the ones
``--integrations`` selects (`select`)."""

from __future__ import annotations

from gitopsq.admission_loop.integrations.base import Integration, PodSetPlacement, Rule, child_suspend_patch
from gitopsq.admission_loop.integrations.registry import (
    BY_FRAMEWORK,
    DEFAULT_FRAMEWORKS,
    REGISTRY,
    parse,
    rbac_rules,
    select,
    webhook_kinds,
)

INTEGRATIONS = REGISTRY

__all__ = ["BY_FRAMEWORK", "DEFAULT_FRAMEWORKS", "INTEGRATIONS", "REGISTRY", "Integration", "PodSetPlacement",
           "Rule", "child_suspend_patch", "parse", "rbac_rules", "select", "webhook_kinds"]
