"""gitopsq.yaml's key files and approval recorders as the parser reads them: files read through the reader it
is given (the revision's), each problem a config-invalid-key finding at the naming line, recorders SSH-only."""

from __future__ import annotations

from gitopsq.manifests.config import parse_config

SSH = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJC04diCEa3gzTia5X1EsQlkPdfQi2GctMpg6dBbyyfh ci"
HEAD = ("apiVersion: gitopsq.dev/v1alpha1\nkind: RepositoryConfig\ninclude: [q/]\nplatformTeam: p\n"
        "teams:\n  - name: p\n    paths: ['**']\n")


def test_recorder_and_forge_key_files_join_the_inline_keys() -> None:
    """keyFiles of a forge key and of a recorder are read through the reader; their keys, fingerprints and the
    file names (the platform's) appear in the parsed config and the policy view."""
    text = HEAD + ("forgeKeys:\n  - name: gitea\n    keyFiles: [keys/forge.pub]\n"
                   "approvalRecorders:\n  - name: ci\n    keys: ['" + SSH + "']\n    keyFiles: [keys/ci.pub]\n")
    files = {"keys/forge.pub": ("# the forge\n" + SSH + "\n").encode(), "keys/ci.pub": SSH.encode()}
    parsed = parse_config(text.encode(), read_file=files.get)
    assert [f for f in parsed.findings if f.is_error] == []
    config = parsed.config
    assert config is not None
    assert config.forge_keys[0].keys == (SSH,) and config.approval_recorders[0].keys == (SSH, SSH)
    assert config.key_files == ("keys/forge.pub", "keys/ci.pub")
    view = config.as_policy_dict()
    assert view["keyFiles"] == ["keys/forge.pub", "keys/ci.pub"]
    assert view["approvalRecorders"][0]["fingerprints"][0].startswith("SHA256:")
    assert config.owner_of("keys/ci.pub") == "p"


def test_a_recorder_takes_ssh_keys_only_and_needs_one() -> None:
    """An OpenPGP fingerprint under approvalRecorders and a recorder without keys are findings at their lines."""
    text = HEAD + ("approvalRecorders:\n  - name: ci\n    keys: ['" + "A" * 40 + "']\n  - name: empty\n")
    errors = [f for f in parse_config(text.encode()).findings if f.is_error]
    assert [(f.code, f.location.line if f.location else None) for f in errors] == \
        [("config-invalid-key", 10), ("config-invalid-key", 11)]
    assert "SSH public key" in errors[0].message and "lists no keys" in errors[1].message


def test_a_reader_failure_is_a_finding_not_a_traceback() -> None:
    """A reader that raises (an unreadable source) gives config-invalid-key naming the file and the reason."""
    def broken(path: str) -> bytes | None:
        raise OSError(f"disk on fire reading {path}")

    text = HEAD + "forgeKeys:\n  - name: gitea\n    keyFiles: [keys/forge.asc]\n"
    (finding,) = [f for f in parse_config(text.encode(), read_file=broken).findings if f.is_error]
    assert finding.code == "config-invalid-key" and "'keys/forge.asc' cannot be read: disk on fire" in finding.message
