# lockgate -- HTTP lock gateway over Redis.
#
#   docker build -t lockgate .
#   docker run --rm -p 8080:8080 -e LOCKGATE_REDIS=redis://HOST:6379 lockgate
#
# Without a Docker engine (this repository's CI): `make image` builds this
# same file with buildah, `make image-test` runs the image and checks it.

# ---- build stage: the same script and make target CI runs --------------------
FROM debian:bookworm AS build
WORKDIR /src
# Dependencies first, in their own layer: rebuilt only when deps.sh changes.
COPY scripts/deps.sh scripts/deps.sh
RUN scripts/deps.sh \
 && rm -rf /var/lib/apt/lists/*
COPY . .
RUN make -j"$(nproc)" all \
 && strip build/lockgate build/lockctl

# ---- runtime stage: the binaries and their shared libraries, nothing else ----
FROM debian:bookworm-slim
ARG DEBIAN_FRONTEND=noninteractive
# libcurl4 is for lockctl, curl for the HEALTHCHECK; no compiler, no headers.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
        libmicrohttpd12 libhiredis0.14 libcjson1 libgnutls30 libcurl4 curl \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt/* /var/log/dpkg.log \
 && groupadd --gid 10001 lockgate \
 && useradd --uid 10001 --gid 10001 --no-create-home --no-log-init \
        --home-dir /nonexistent --shell /usr/sbin/nologin lockgate
COPY --from=build /src/build/lockgate /src/build/lockctl /usr/local/bin/

# Configuration is by environment (flags given after the image name win):
# LOCKGATE_LISTEN, LOCKGATE_REDIS, LOCKGATE_KEY_PREFIX, LOCKGATE_LOG_LEVEL;
# access control and TLS from mounted files (compose secrets land in
# /run/secrets): LOCKGATE_AUTH_FILE, LOCKGATE_TLS_CERT, LOCKGATE_TLS_KEY,
# LOCKGATE_TLS_CLIENT_CA (docker-compose.secure.yml).
ENV LOCKGATE_LISTEN=0.0.0.0:8080 \
    LOCKGATE_REDIS=redis://redis:6379
EXPOSE 8080
# Numeric, so that Kubernetes' runAsNonRoot can verify it; the name is lockgate.
USER 10001:10001
# Asks the port LOCKGATE_LISTEN names, so it follows a changed listen address,
# over HTTPS when LOCKGATE_TLS_CERT is set (-k: the name is 127.0.0.1, not the
# certificate's; /healthz needs no API key).
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD s=http; [ -z "$LOCKGATE_TLS_CERT" ] || s=https; \
        curl -fsSk -o /dev/null "$s://127.0.0.1:${LOCKGATE_LISTEN##*:}/healthz" || exit 1
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/lockgate"]
