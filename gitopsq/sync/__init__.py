"""Syncing a Git source into a cluster (docs/sync.md): the imperative shell around gitopsq.reconcile.

`values` (the leaf the others share), `syncer` (the pipeline), `outcomes` (status, Events and records per
outcome), `whole` (dry run, staged apply, rollback), `health`, `validate`, `report`, `change_approvals`,
`repo_config`, `audit` (records enriched for the trail) and `loop` (the controller's sync runnable).
"""
