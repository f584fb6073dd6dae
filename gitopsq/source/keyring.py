"""The signing keys gitopsq.yaml trusts, as the signature verifier takes them.

Identities are the maintainer's e-mail (or name when it has none), so a verified signature names the same person
in validation, in the policies and in audit records. Forge signing keys (``forgeKeys:``) get the identity
``forge:<name>``: a commit they sign is the forge's, never a maintainer's.
"""

from __future__ import annotations

from typing import Any

FORGE_PREFIX = "forge:"


def signing_keys(config: Any) -> dict[str, list[str]]:
    """identity → public keys of every maintainer (and forge) of ``config`` that lists any; {} for None."""
    keys: dict[str, list[str]] = {}
    for team in getattr(config, "teams", ()) or ():
        for person in team.maintainers:
            identity = person.email or person.name
            if person.signing_keys and not identity.startswith(FORGE_PREFIX):  # never pass for a forge
                keys.setdefault(identity, []).extend(person.signing_keys)
    for forge in getattr(config, "forge_keys", ()) or ():
        keys.setdefault(FORGE_PREFIX + forge.name, []).extend(forge.keys)
    return keys
