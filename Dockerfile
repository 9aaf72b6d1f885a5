# One image for every entry point: loadsched-extender (default), loadsched-annotator and
# loadsched-dispatch-poll. Multi-stage: wheels are built in the first stage; the final stage
# has the virtual environment and nothing to build with. Runs as a non-root user and works with
# a read-only root filesystem (no bytecode written; /tmp is the only place it may write).
ARG PYTHON=python:3.11-slim-bookworm

FROM ${PYTHON} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY shared ./shared
COPY extender ./extender
COPY annotator ./annotator
RUN python -m venv /opt/loadsched \
 && /opt/loadsched/bin/pip install --upgrade pip \
 && /opt/loadsched/bin/pip install '.[postgres]' \
 && /opt/loadsched/bin/pip uninstall --yes pip \
 && find /opt/loadsched -name '__pycache__' -prune -exec rm -rf {} +

FROM ${PYTHON}
LABEL org.opencontainers.image.title="loadsched" \
      org.opencontainers.image.description="Load-aware scheduling for Kubernetes: extender, annotator, job dispatch"
COPY --from=build /opt/loadsched /opt/loadsched
COPY charts/loadsched/files/policy.yaml /etc/loadsched/policy.yaml
ENV PATH=/opt/loadsched/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    LOADSCHED_HOST=0.0.0.0 \
    LOADSCHED_POLICY=/etc/loadsched/policy.yaml
USER 10001:10001
EXPOSE 8888 8889
# /healthz answers as soon as the process serves (extender on 8888; the annotator's is 8889:
# override the command's port there).
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen(f\"http://127.0.0.1:{os.environ.get('LOADSCHED_PORT', '8888')}/healthz\", timeout=2)"]
CMD ["loadsched-extender"]
