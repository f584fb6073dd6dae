"""Job integrations: one module per job kind, each an `Integration` (see base.py). Register new kinds in
`INTEGRATIONS`; the generic reconciler in gitopsq/cluster/admission/job_reconciler.py does the rest."""

from __future__ import annotations

from gitopsq.cluster.admission.integrations.base import Integration, PodSetPlacement
from gitopsq.cluster.admission.integrations.batch_job import BatchJob

INTEGRATIONS: tuple[Integration, ...] = (BatchJob(),)

__all__ = ["INTEGRATIONS", "Integration", "PodSetPlacement"]
