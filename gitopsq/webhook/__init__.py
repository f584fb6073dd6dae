"""Webhooks served by the controller: `server` (the HTTPS server of the Job and Pod admission decisions in
gitopsq.intake), `follower` (the repository policies the decisions follow), `certs` (generated certificates and
webhook configurations) and `push` (the Git push webhook that wakes the sync loop).

Nothing is imported here, so importing one part does not load the others.
"""
