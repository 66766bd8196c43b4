# The tracker in a container: `docker compose up` (compose.yaml) starts the demo with Redis.
#
# Two stages: the first compiles the Cython hot path and bjoern (gcc, libev headers) into a
# virtualenv; the second is that virtualenv on a slim Debian with only the runtime libraries,
# run as an unprivileged user. The virtualenv sits where the systemd units expect it
# (/opt/tracker/venv, packaging/systemd/), so both ways of running it read the same.
#
# Debian's own Python 3.11 (bookworm), as on the servers the Ansible role provisions.
FROM debian:bookworm AS build

RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
       python3 python3-venv python3-dev gcc libc6-dev libev-dev ca-certificates \
    && rm -rf /var/lib/apt/lists/*
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python3 -m venv /opt/tracker/venv
WORKDIR /src
# The pinned requirements first, so a source change does not rebuild them.
COPY requirements.txt requirements-dev.txt ./
RUN /opt/tracker/venv/bin/pip install -r requirements.txt \
    $(grep -E '^(cython|setuptools|wheel)==' requirements-dev.txt)
COPY pyproject.toml setup.py README.md LICENSE ./
COPY src ./src
RUN /opt/tracker/venv/bin/pip install --no-build-isolation --no-deps . \
    && /opt/tracker/venv/bin/python -c "import tracker_core.compiled._protocol_c, tracker_core.compiled._bloom_c, tracker_core.compiled._classify_c"

FROM debian:bookworm

# python3: the virtualenv's interpreter. libev4: bjoern's event loop. redis-server: `tracker
# run`'s embedded Redis, for a one-container demo without compose (compose.yaml runs Redis as its
# own service).
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
       python3 libev4 redis-server \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --user-group --home-dir /var/lib/tracker --shell /usr/sbin/nologin tracker \
    && install -d -o tracker -g tracker -m 0750 /var/lib/tracker
COPY --from=build /opt/tracker/venv /opt/tracker/venv
ENV PATH=/opt/tracker/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    LANG=C.UTF-8 \
    TRACKER_DATA_DIR=/var/lib/tracker
USER tracker
WORKDIR /var/lib/tracker
VOLUME ["/var/lib/tracker"]
EXPOSE 8080 8081
# Answers once a worker serves: 503 (a failure) while Redis is down or the clock is past its bound.
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('TRACKER_SERVE_PORT', '8080'), timeout=4)"]
ENTRYPOINT ["tracker"]
CMD ["run", "--demo", "--host", "0.0.0.0"]
