#!/usr/bin/env bash
# Start Pagoda on this machine: set up .venv, apply migrations, create the first admin and a demo
# tenant (first run only), then serve the ASGI app with daphne on 127.0.0.1:$PORT (default 8000),
# with the embedded default model (SmolLM2-135M-Instruct on the CPU unless a GPU is visible).
#
# Environment (all optional): PORT, HOST (default 127.0.0.1), DATABASE_URL, REDIS_URL, PAGODA_MODEL,
# PAGODA_DEVICE, PAGODA_ADMIN_USER / PAGODA_ADMIN_PASSWORD (first superuser), SECRET_KEY, ALLOWED_HOSTS,
# PAGODA_WEB_PROCESSES (web processes sharing the one engine core; default 1, see platform/pagoda/serve.py).
set -euo pipefail
cd "$(dirname "$0")/.."

HOST=${HOST:-127.0.0.1}
PORT=${PORT:-8000}
export PYTHONPATH="$PWD/platform:$PWD${PYTHONPATH:+:$PYTHONPATH}"
export DJANGO_SETTINGS_MODULE=pagoda.settings

bash deploy/setup.sh
.venv/bin/python manage.py migrate --noinput
.venv/bin/python manage.py bootstrap

cat <<MSG

  Pagoda is starting on http://$HOST:$PORT/  (the model loads in the background; the console shows when it is ready)
    console : http://$HOST:$PORT/console/
    admin   : http://$HOST:$PORT/admin/
  Log in as ${PAGODA_ADMIN_USER:-admin} (password: ${PAGODA_ADMIN_PASSWORD:-admin} unless it was changed).
  Change a default password with: .venv/bin/python manage.py changepassword ${PAGODA_ADMIN_USER:-admin}

MSG
# 30 s, not daphne's 5 s: under a burst of new chats the handshake waits behind the engine and the DB.
if [ "${PAGODA_WEB_PROCESSES:-1}" -gt 1 ]; then
  exec .venv/bin/python -m pagoda.serve --host "$HOST" --port "$PORT" --processes "$PAGODA_WEB_PROCESSES" \
    -- --websocket_connect_timeout 30
fi
exec .venv/bin/daphne -b "$HOST" -p "$PORT" --websocket_connect_timeout 30 pagoda.asgi:application
