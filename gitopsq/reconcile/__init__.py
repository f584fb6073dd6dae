"""Reconciling desired with live objects, pure (no Kubernetes, Git or I/O): what one sync must do.

`pairing` pairs desired, live and inventory into a Plan; `diff` and `normalize` compare objects; `ordering`
orders applies; `inventory` is what a GitSource owns. The sync shell (gitopsq.sync) reads and writes around it.
"""
