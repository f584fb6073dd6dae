"""Kubernetes naming rules (apimachinery's validation), each returning why a name is wrong or None."""

from __future__ import annotations

import re
from typing import Final

_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

DNS_LABEL_MAX: Final = 63
DNS_SUBDOMAIN_MAX: Final = 253


def dns_label(name: str) -> str | None:
    """RFC 1123 label: Namespaces, team and cohort names in gitopsq.yaml."""
    if not name:
        return "must not be empty"
    if len(name) > DNS_LABEL_MAX:
        return f"must be at most {DNS_LABEL_MAX} characters (it has {len(name)})"
    if not _LABEL.match(name):
        return ("must be a DNS label: lower-case letters, digits and '-', starting and ending with a letter or "
                "digit")
    return None


def dns_subdomain(name: str) -> str | None:
    """RFC 1123 subdomain: the names of ClusterQueues, ResourceFlavors, Cohorts, LocalQueues, priority classes."""
    if not name:
        return "must not be empty"
    if len(name) > DNS_SUBDOMAIN_MAX:
        return f"must be at most {DNS_SUBDOMAIN_MAX} characters (it has {len(name)})"
    if not _SUBDOMAIN.match(name):
        return ("must be a DNS subdomain: lower-case letters, digits, '-' and '.', starting and ending with a "
                "letter or digit")
    return None


def qualified_name(name: str) -> str | None:
    """A label key, taint key or resource name: an optional DNS-subdomain prefix and '/', then a name ≤ 63."""
    if not name:
        return "must not be empty"
    prefix, slash, rest = name.rpartition("/")
    if slash:
        if not prefix:
            return "has an empty prefix before '/'"
        problem = dns_subdomain(prefix)
        if problem:
            return f"prefix {prefix!r} {problem}"
    else:
        rest = name
    if len(rest) > DNS_LABEL_MAX:
        return f"name part must be at most {DNS_LABEL_MAX} characters"
    if not _QUALIFIED_NAME.match(rest):
        return ("name part must consist of letters, digits, '-', '_' or '.', starting and ending with a letter or "
                "digit")
    return None


def label_value(value: str) -> str | None:
    if len(value) > DNS_LABEL_MAX:
        return f"must be at most {DNS_LABEL_MAX} characters (it has {len(value)})"
    if not _LABEL_VALUE.match(value):
        return "must be empty or letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
    return None
