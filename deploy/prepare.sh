#!/usr/bin/env bash
# Once per release, before starting the replicas (deploy/systemd/pagoda-migrate.service runs it):
# apply migrations, collect static files for nginx, and convert the model once (replicas starting
# together must not all convert the same GGUF file into the cache at the same time).
# Reads the same environment as the replicas (/etc/pagoda/pagoda.env). Never loads the engine.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/platform:$PWD${PYTHONPATH:+:$PYTHONPATH}"
export DJANGO_SETTINGS_MODULE=pagoda.settings
export PAGODA_ENGINE=off
PY=${PAGODA_PYTHON:-.venv/bin/python}
"$PY" manage.py migrate --noinput
"$PY" manage.py collectstatic --noinput -v 0
"$PY" -c "import sys; from inference.model_loader import resolve_model_path; print('model:', resolve_model_path(sys.argv[1]))" \
  "${PAGODA_MODEL:-smollm2-135m-instruct}"
