# replicator images. Default target: the daemon (slim, non-root, healthcheck on /healthz).
#   docker build -t replicator .
#   docker build --target spark -t replicator-spark .   # adds Java + PySpark for `materialize`
FROM python:3.11-slim AS build
# gcc builds the native core (replicator/binlog/_rowcore_c/) into the wheel; the runtime stages
# need no compiler
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY replicator ./replicator
# (the build fails here rather than ship an image without it)
RUN pip wheel --no-cache-dir --wheel-dir /wheels . \
    && python -c "import glob, sys, zipfile; \
names = zipfile.ZipFile(glob.glob('/wheels/replicator-*.whl')[0]).namelist(); \
sys.exit(not any('_rowcore' in n and n.endswith('.so') for n in names))"

# The Spark side: `replicator materialize` with PySpark in local mode (or --master URL).
FROM python:3.11-slim AS spark
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 10001 replicator \
    && mkdir -p /current && chown replicator /current
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir "$(ls /wheels/replicator-*.whl)[spark,delta]" && rm -rf /wheels
USER replicator
WORKDIR /home/replicator
ENTRYPOINT ["replicator"]
CMD ["materialize", "--help"]

# The daemon; also `replicator materialize --format delta` (delta-rs: no Java).
FROM python:3.11-slim AS daemon
RUN useradd --create-home --uid 10001 replicator \
    && mkdir -p /landing /current /etc/replicator \
    && chown replicator /landing /current
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir "$(ls /wheels/replicator-*.whl)[delta]" && rm -rf /wheels
COPY config/replicator.example.yaml /etc/replicator/replicator.yaml
USER replicator
WORKDIR /home/replicator
# Inside a container the HTTP port must listen beyond loopback for Prometheus; the landing
# zone is a volume.
ENV REPLICATOR_SERVICE__HTTP_HOST=0.0.0.0 \
    REPLICATOR_SINK__ROOT=/landing \
    PYTHONUNBUFFERED=1
VOLUME ["/landing"]
EXPOSE 9108
# asks /healthz on the port the daemon takes: REPLICATOR_SERVICE__HTTP_PORT, else the config's
# service.http_port, else 9108 (replicator/healthcheck.py)
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-m", "replicator.healthcheck", "--config", "/etc/replicator/replicator.yaml"]
# SIGTERM commits the open batch and exits 0 within service.shutdown_timeout (30 s).
STOPSIGNAL SIGTERM
ENTRYPOINT ["replicator"]
CMD ["run", "--config", "/etc/replicator/replicator.yaml"]
