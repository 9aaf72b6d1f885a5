# One image for every entry point: loadsched-extender (default), loadsched-annotator and
# loadsched-dispatch-poll. Multi-stage: the virtual environment is built in the first stage; the
# final stage has it and nothing to build or install with (no compiler, no pip). Runs as a
# non-root user and works with a read-only root filesystem (no bytecode written at run time;
# /tmp is the only place it may write).
#
# PYTHON is any Debian-based Python 3.11 image: the official one by default, or an internal
# base (scripts/build-image.sh builds one from Debian's packages when no registry is reachable).
ARG PYTHON=python:3.11-slim-bookworm

FROM ${PYTHON} AS build
# strip, to drop the debug symbols some of the dependencies' compiled extensions carry (30 MB).
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends binutils >/dev/null \
 && rm -rf /var/lib/apt/lists/*
# The builder's package index and its trust, when they are not pip's defaults (a mirror, a
# proxy's CA): build arguments of this stage only, so they stay out of the final image.
ARG PIP_INDEX_URL
ARG PIP_EXTRA_INDEX_URL
ARG PIP_TRUSTED_HOST
ARG PIP_CERT
ARG PIP_DEFAULT_TIMEOUT
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
# The dependencies first, read from pyproject.toml alone: a change to the code reuses this layer.
COPY pyproject.toml ./
RUN python -m venv /opt/loadsched \
 && /opt/loadsched/bin/pip install --quiet --upgrade pip \
 && python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; print('\n'.join(p['dependencies'] + p['optional-dependencies']['postgres'] + p['optional-dependencies']['dispatch']))" > requirements.txt \
 && /opt/loadsched/bin/pip install --quiet --no-compile --requirement requirements.txt \
 && find /opt/loadsched -name '*.so*' -type f -exec sh -c \
      'for f; do if readelf -S "$f" | grep -q "\.debug_info"; then strip --strip-debug "$f"; fi; done' sh {} +
COPY README.md ./
COPY shared ./shared
COPY extender ./extender
COPY annotator ./annotator
COPY poller ./poller
# The project without its dependencies (installed above, and checked here); then no installer
# is left. Bytecode for the modules the entry points import at start-up only: every start is
# about 0.8 s of CPU shorter, for about 15 MB (all of it would be about 80 MB).
RUN /opt/loadsched/bin/pip install --quiet --no-compile --no-deps . \
 && /opt/loadsched/bin/pip check \
 && /opt/loadsched/bin/pip uninstall --quiet --yes setuptools pip \
 && /opt/loadsched/bin/python -I -c "import extender.cli, extender.app, poller.cli, annotator.cli, annotator.main"

FROM ${PYTHON}
# pyproject.toml's version (tests/shared/test_version.py holds the two together)
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="loadsched" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.description="Load-aware scheduling for Kubernetes: extender, annotator, job dispatch"
# Nothing installs packages at run time: the base's pip, setuptools and ensurepip go (from its
# Python's own tree, and Debian's wheel packages when the base's Python is Debian's).
RUN set -e; \
    stdlib="$(python -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')"; \
    purelib="$(python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"; \
    if dpkg-query --show python3-pip-whl >/dev/null 2>&1; then \
      dpkg --purge python3-venv python3.11-venv python3-pip-whl python3-setuptools-whl >/dev/null; \
    fi; \
    rm -rf "$stdlib/ensurepip" "$purelib"/pip "$purelib"/pip-* "$purelib"/setuptools \
      "$purelib"/setuptools-* "$purelib"/pkg_resources "$purelib"/_distutils_hack \
      "$purelib"/distutils-precedence.pth "$purelib"/wheel "$purelib"/wheel-* \
      /usr/local/bin/pip /usr/local/bin/pip3* /usr/local/bin/wheel; \
    ! python -c 'import pip' 2>/dev/null
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
