# replicator: a slim, non-root image whose entrypoint is the replicator CLI.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY replicator ./replicator
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
RUN useradd --create-home --uid 10001 replicator
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
USER replicator
WORKDIR /home/replicator
ENTRYPOINT ["replicator"]
CMD ["--help"]
