#!/usr/bin/env bash
# Serve one replica: daphne with its own in-process engine, for systemd (deploy/systemd/pagoda@.service),
# the container image and tests/deploy. No setup, no migrations: run `manage.py migrate` once per
# release before starting replicas (deploy/systemd/pagoda-migrate.service does).
#
#   bash deploy/replica.sh INDEX        # replica INDEX: port PAGODA_BASE_PORT+INDEX, GPU INDEX
#
# Environment (see deploy/env.example): PORT (default PAGODA_BASE_PORT+INDEX, base 8100), HOST (default
# 127.0.0.1: only the load balancer on this host reaches a replica), CUDA_VISIBLE_DEVICES (default
# INDEX; set it, even empty, to choose), PAGODA_REPLICA (default <hostname>-<INDEX>), PAGODA_PYTHON
# (default .venv/bin/python), and everything pagoda.settings reads.
set -euo pipefail
cd "$(dirname "$0")/.."
INDEX=${1:?usage: deploy/replica.sh INDEX}
case "$INDEX" in ''|*[!0-9]*) echo "replica index must be a number, got '$INDEX'" >&2; exit 2 ;; esac

export PORT=${PORT:-$(( ${PAGODA_BASE_PORT:-8100} + INDEX ))}
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-$INDEX}
export PAGODA_REPLICA=${PAGODA_REPLICA:-$(hostname -s 2>/dev/null || echo pagoda)-$INDEX}
export PYTHONPATH="$PWD/platform:$PWD${PYTHONPATH:+:$PYTHONPATH}"
export DJANGO_SETTINGS_MODULE=pagoda.settings
export TOKENIZERS_PARALLELISM=${TOKENIZERS_PARALLELISM:-false}
PY=${PAGODA_PYTHON:-.venv/bin/python}

echo "pagoda replica $PAGODA_REPLICA on ${HOST:-127.0.0.1}:$PORT (CUDA_VISIBLE_DEVICES='$CUDA_VISIBLE_DEVICES')"
# --proxy-headers: the client address comes from X-Forwarded-For, which nginx overwrites (never appends),
# so /metrics' address allow-list and the request logs see the real client, not the proxy.
exec "$PY" -m daphne --proxy-headers --websocket_connect_timeout 30 -b "${HOST:-127.0.0.1}" -p "$PORT" pagoda.asgi:application
