# syntax=docker/dockerfile:1
# The gitopsq controller image: slim Debian Python, non-root (uid 65532), nothing written outside /tmp and
# /var/cache/gitopsq, so it runs with readOnlyRootFilesystem (the Helm chart mounts both as emptyDirs).
# The base is pinned to an exact Python and Debian release; pin it further by digest in your build with
#   docker build --build-arg PYTHON_IMAGE=python:3.12.12-slim-bookworm@sha256:<digest> .
ARG PYTHON_IMAGE=python:3.12.12-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY gitopsq ./gitopsq
RUN python -m venv /opt/gitopsq \
 && /opt/gitopsq/bin/pip install --no-compile . \
 && /opt/gitopsq/bin/python -m compileall -q /opt/gitopsq/lib

FROM ${PYTHON_IMAGE}
# git: the audit writer pushes with the git CLI; openssh-client: ssh transport and ssh-keygen -Y signature
# checks; gnupg: OpenPGP signature checks. Nothing else.
RUN apt-get update \
 && apt-get install -y --no-install-recommends git openssh-client gnupg ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 65532 gitopsq \
 && useradd --system --uid 65532 --gid 65532 --home-dir /var/cache/gitopsq --no-create-home \
      --shell /usr/sbin/nologin gitopsq \
 && install -d -o 65532 -g 65532 -m 0750 /var/cache/gitopsq
COPY --from=build /opt/gitopsq /opt/gitopsq
ENV PATH=/opt/gitopsq/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/var/cache/gitopsq \
    XDG_CACHE_HOME=/var/cache/gitopsq
USER 65532:65532
WORKDIR /var/cache/gitopsq
EXPOSE 8080 8081 9443
ENTRYPOINT ["gitopsq"]
CMD ["--help"]
