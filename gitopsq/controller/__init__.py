"""The long-running controller (docs/controller.md): `manager` (runnables under leader election, leadership
hooks), `endpoints` (``/healthz``, ``/readyz``, the Git push webhook), `audit` (the trail open only while
leading), `wiring` (the parts built from ``gitopsq controller``'s flags) and `job_webhook` (the Job admission
webhook's certificates, server and policy follower as the controller serves them).

Nothing is imported here, so importing one part does not load the others.
"""
