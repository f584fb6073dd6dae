"""Syncing a Git source into a cluster (docs/sync.md).

Pure modules (no Kubernetes, Git or I/O; strict mypy): `plan` pairs desired, live and inventory into a plan,
`diff` and `normalize` compare objects, `ordering` orders applies, `inventory` is what a GitSource owns.
Shell modules: `model` (the leaf the others share), `syncer` (the pipeline), `validate`, `report`, `approvals`,
`repo_config`, `audit` (records enriched for the trail) and `loop` (the controller's sync runnable).

Nothing is imported here: the cluster edge imports the pure modules without pulling in the shell.
"""
