# syntax=docker/dockerfile:1
# One image for every coachbus service; the command picks the service, e.g.
#   faststream run services.shadow.main:app --host 0.0.0.0 --port 8080
# (see docker-compose.yml and the Helm chart).

ARG PYTHON_VERSION=3.12

# --- build: wheels for coachbus and all its dependencies --------------------
FROM python:${PYTHON_VERSION}-slim-bookworm AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
# Only what the package build reads (every package pyproject.toml's find includes,
# so every `coachbus` command works in the image; tests/repo/test_packaging.py builds
# a wheel from exactly these COPY lines); the rest of the repo (tests, charts,
# benchmarks) stays out of the layer, so editing it does not rebuild the image.
COPY pyproject.toml README.md ./
COPY shared ./shared
COPY services ./services
COPY evaluation ./evaluation
RUN python -m venv /opt/coachbus \
 && /opt/coachbus/bin/pip install --upgrade pip \
 && /opt/coachbus/bin/pip install .

# --- runtime: the virtualenv only, no compiler, no source tree ---------------
FROM python:${PYTHON_VERSION}-slim-bookworm AS runtime
LABEL org.opencontainers.image.title="coachbus" \
      org.opencontainers.image.description="coachbus services (gateway, agents, synth), one image" \
      org.opencontainers.image.licenses="Apache-2.0"
# Numeric uid so Kubernetes' runAsNonRoot can verify it without a passwd lookup.
RUN groupadd --system --gid 10001 coachbus \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent coachbus
COPY --from=build /opt/coachbus /opt/coachbus
# No .pyc writes: the root filesystem is read-only in compose and Kubernetes.
# Unbuffered output so log lines reach `docker logs` / kubectl at once.
ENV PATH=/opt/coachbus/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 10001:10001
WORKDIR /tmp
EXPOSE 8080
# Same probe as compose and Kubernetes use: every service serves /healthz on 8080.
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=2); sys.exit(0)"]
CMD ["faststream", "run", "services.gateway.main:app", "--host", "0.0.0.0", "--port", "8080"]
