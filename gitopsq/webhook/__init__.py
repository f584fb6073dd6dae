"""Webhooks served by the controller: `jobs` (the pure Job admission decisions), `server` (their HTTPS server),
`follower` (the repository policies the decisions follow), `certs` (generated certificates and webhook
configurations) and `push` (the Git push webhook that wakes the sync loop).

Nothing is imported here, so importing one part does not load the others.
"""
