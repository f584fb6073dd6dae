"""Syncing a Git source into a cluster (docs/sync.md): the imperative shell around gitopsq.reconcile.

`values` (the leaf the others share), `syncer` (the pipeline of named steps, its status written once in a
finaliser), `outcomes` (the status, Events and records of each way a pass ends, as values), `live_reads`, `labels`,
`whole` (dry run, staged apply, rollback), `health`, `validate`, `report`, `change_approvals`, `repo_config`,
`audit` (records enriched for the trail) and `loop` (the controller's sync runnable).
"""
