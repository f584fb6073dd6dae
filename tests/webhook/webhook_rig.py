"""Builders the Job webhook's rig tests share (no tests here): the policy they judge Jobs by, and an HTTPS
AdmissionReview POST that trusts only the CA under test."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from typing import Any

JOB_POLICY = """apiVersion: gitopsq.dev/v1alpha1
kind: Policy
metadata: {name: jobs-at-most-8-pods}
spec:
  severity: Deny
  match: {kinds: [Job]}
  validations:
    - expression: "!has(object.spec.parallelism) || object.spec.parallelism <= 8"
      message: "a Job may run at most 8 pods in parallel"
"""


def post_review(port: int, path: str, body: bytes, ca_pem: bytes, *,
                check_hostname: bool = True) -> dict[str, Any] | None:
    """POST ``body`` to ``https://localhost:{port}{path}`` trusting only ``ca_pem``; None while nothing answers."""
    context = ssl.create_default_context(cadata=ca_pem.decode())
    context.check_hostname = check_hostname
    request = urllib.request.Request(f"https://localhost:{port}{path}", data=body,
                                     headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as answer:
            return dict(json.loads(answer.read()))
    except (OSError, ssl.SSLError, urllib.error.URLError):
        return None
