"""The controller image's Dockerfile, linted (no container engine here): pinned slim base, non-root user, no
remote ADD, an entrypoint the chart's arguments fit, and a build context limited to what the image needs."""

from __future__ import annotations

import json
import re

from chart_helm import ROOT, Helm

DOCKERFILE = ROOT / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs with line continuations joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for raw in text.splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def build_args() -> dict[str, str]:
    return dict(rest.split("=", 1) for word, rest in instructions() if word == "ARG" and "=" in rest)


def test_base_image_is_a_pinned_slim_python() -> None:
    """Every FROM resolves to python:<major.minor.patch>-slim-<debian> (or a digest), never a floating tag; the
    one Go stage (building kustomize, docs/kustomize.md) is a pinned golang:<major.minor.patch> image."""
    args = build_args()
    froms = [rest.split()[0] for word, rest in instructions() if word == "FROM"]
    assert len(froms) == 3
    images = [re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], written) for written in froms]
    assert re.fullmatch(r"golang:\d+\.\d+\.\d+-[a-z]+(@sha256:[0-9a-f]{64})?", images[0]), images[0]
    for image in images[1:]:
        assert re.fullmatch(r"python:\d+\.\d+\.\d+-slim-[a-z]+(@sha256:[0-9a-f]{64})?", image), image


def test_runs_as_a_numeric_non_root_user() -> None:
    """The last USER is a non-zero numeric uid:gid matching the chart's runAsUser (kubelet can verify it)."""
    users = [rest for word, rest in instructions() if word == "USER"]
    assert users and users[-1] == "65532:65532"


def test_nothing_is_added_from_urls_and_nothing_downloaded_by_hand() -> None:
    """No ADD at all (COPY only) and no curl/wget piping into the image."""
    for word, rest in instructions():
        assert word != "ADD", rest
        if word == "RUN":
            assert not re.search(r"\b(curl|wget)\b", rest), rest


def test_entrypoint_is_gitopsq_so_chart_args_start_with_the_verb(helm: Helm) -> None:
    """ENTRYPOINT runs `gitopsq`; the chart passes only args, whose first is the `controller` verb."""
    entry = next(rest for word, rest in instructions() if word == "ENTRYPOINT")
    assert json.loads(entry) == ["gitopsq"]
    container = helm.render().container
    assert "command" not in container and container["args"][0] == "controller"


def test_read_only_root_friendly() -> None:
    """Byte-code is compiled at build time and not written at run time; HOME and caches live under the one
    directory the chart mounts writable."""
    text = DOCKERFILE.read_text()
    assert "compileall" in text and "PYTHONDONTWRITEBYTECODE=1" in text
    assert "HOME=/var/cache/gitopsq" in text and "XDG_CACHE_HOME=/var/cache/gitopsq" in text


def test_build_context_is_allow_listed() -> None:
    """.dockerignore excludes everything but the package sources, so tests and caches never reach the image."""
    lines = [line for line in (ROOT / ".dockerignore").read_text().splitlines() if line and not line.startswith("#")]
    assert lines[0] == "*"
    assert {"!pyproject.toml", "!README.md", "!gitopsq/"} <= set(lines)
    sources = [src for word, rest in instructions() if word == "COPY" and "--from" not in rest
               for src in rest.split()[:-1]]
    assert sources and set(sources) <= {"pyproject.toml", "setup.py", "README.md", "gitopsq"}, sources
    assert "!setup.py" in lines  # it records the build's commit (gitopsq --version)


def test_the_image_installs_the_wheel_users_install() -> None:
    """The build stage builds gitopsq's wheel from the sources and installs that wheel, never the source tree, so
    the image holds what `pip install gitopsq-*.whl` gives a user (the template and data files included); the
    commit it names comes in as a build argument."""
    runs = [rest for word, rest in instructions() if word == "RUN"]
    builds = [m for r in runs for m in re.finditer(r"\bpip wheel\b[^&]*--no-deps[^&]*--wheel-dir (\S+) \.(?:\s|$)", r)]
    assert len(builds) == 1, runs
    wheels = builds[0].group(1)
    installs = [" ".join(m.group(1).split())
                for r in runs for m in re.finditer(r"/opt/gitopsq/bin/pip install\b([^&]*)", r)]
    assert [i for i in installs if "mypy" not in i] == [f"--no-compile {wheels}/gitopsq-*.whl"], installs
    assert not any(re.search(r"pip install[^&]*(?:\s\.(?:\s|$)|-e\s)", r) for r in runs), runs
    assert "GITOPSQ_COMMIT" in build_args() and 'GITOPSQ_COMMIT="${GITOPSQ_COMMIT}"' in builds[0].string
