# syntax=docker/dockerfile:1
# The gitopsq controller image: slim Debian Python, non-root (uid 65532), nothing written outside /tmp and
# /var/cache/gitopsq, so it runs with readOnlyRootFilesystem (the Helm chart mounts both as emptyDirs).
# The base is pinned to an exact Python and Debian release; pin it further by digest in your build with
#   docker build --build-arg PYTHON_IMAGE=python:3.12.12-slim-bookworm@sha256:<digest> .
ARG PYTHON_IMAGE=python:3.12.12-slim-bookworm
# kustomize renders overlays (docs/kustomize.md): built from the Go module proxy, pinned like scripts/kustomize-prepare.
ARG GO_IMAGE=golang:1.26.8-bookworm
ARG KUSTOMIZE_VERSION=v5.8.1

FROM ${GO_IMAGE} AS kustomize
ARG KUSTOMIZE_VERSION
RUN CGO_ENABLED=0 GOBIN=/out GOFLAGS=-buildvcs=false go install -trimpath \
      -ldflags "-s -w -X sigs.k8s.io/kustomize/api/provenance.version=${KUSTOMIZE_VERSION}" \
      "sigs.k8s.io/kustomize/kustomize/v5@${KUSTOMIZE_VERSION}"

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# gcc: mypyc compiles the admission engine to C (gitopsq.native); the compiler and mypy stay in this stage.
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*
COPY pyproject.toml setup.py README.md ./
COPY gitopsq ./gitopsq
# The commit `gitopsq --version` names (the build context has no .git):
#   docker build --build-arg GITOPSQ_COMMIT=$(git rev-parse HEAD) .
ARG GITOPSQ_COMMIT=""
# The image installs the same wheel a user installs (docs/install.md), built here from the sources.
RUN python -m venv /opt/gitopsq \
 && GITOPSQ_COMMIT="${GITOPSQ_COMMIT}" /opt/gitopsq/bin/pip wheel --no-deps --wheel-dir /tmp/dist . \
 && /opt/gitopsq/bin/pip install --no-compile /tmp/dist/gitopsq-*.whl \
 && /opt/gitopsq/bin/pip install --no-compile --target /opt/build-tools "mypy>=1.10" "setuptools>=65" \
 && PYTHONPATH=/opt/build-tools /opt/gitopsq/bin/python -m gitopsq.native_build build \
 && /opt/gitopsq/bin/python -m gitopsq.native_build status | grep -q "compiled (mypyc" \
 && /opt/gitopsq/bin/python -m compileall -q /opt/gitopsq/lib

FROM ${PYTHON_IMAGE}
# git: the audit writer pushes with the git CLI; openssh-client: ssh transport and ssh-keygen -Y signature
# checks; gnupg: OpenPGP signature checks. Nothing else (prlimit, which bounds kustomize, is in the base).
RUN apt-get update \
 && apt-get install -y --no-install-recommends git openssh-client gnupg ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 65532 gitopsq \
 && useradd --system --uid 65532 --gid 65532 --home-dir /var/cache/gitopsq --no-create-home \
      --shell /usr/sbin/nologin gitopsq \
 && install -d -o 65532 -g 65532 -m 0750 /var/cache/gitopsq
COPY --from=build /opt/gitopsq /opt/gitopsq
COPY --from=kustomize /out/kustomize /usr/local/bin/kustomize
ENV PATH=/opt/gitopsq/bin:$PATH \
    GITOPSQ_KUSTOMIZE=/usr/local/bin/kustomize \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/var/cache/gitopsq \
    XDG_CACHE_HOME=/var/cache/gitopsq
USER 65532:65532
WORKDIR /var/cache/gitopsq
EXPOSE 8080 8081 9443
ENTRYPOINT ["gitopsq"]
CMD ["--help"]
