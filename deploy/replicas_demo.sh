#!/usr/bin/env bash
# Two replicas behind nginx on this machine, end to end, printing figures (docs/REPLICAS.md records a run):
# routing by tenant, the API and the chat socket through nginx, a prompt change re-pinned on both
# replicas through Redis, and one replica killed mid-load. Loopback only; stops itself (15 min at most).
#
#   bash deploy/replicas_demo.sh [--model NAME_OR_FOLDER] [--long-tokens N] [--clients N]
#
# Needs nginx (bash deploy/install_system_packages.sh), PostgreSQL (DATABASE_URL's server, default
# postgres@127.0.0.1:5432) and Redis (REDIS_URL, default redis://127.0.0.1:6379/0). It creates and
# drops its own database; the model is the embedded default unless --model says otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/setup.sh
export TOKENIZERS_PARALLELISM=false
exec timeout 900 .venv/bin/python tests/deploy/replicas_demo.py "$@"
