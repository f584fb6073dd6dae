"""Decisions on Jobs and Pods as they enter the cluster, pure: what the admission webhooks answer.

`jobs` validates and mutates queued Jobs against the repository's Job policies; `pods` gates a queued Pod and
marks it for its pod group. The HTTPS servers that ask them are gitopsq.webhook.
"""
