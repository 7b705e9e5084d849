#!/usr/bin/env bash
# The test command: set up the environment (idempotent), then run the whole suite.
# With DATABASE_URL / REDIS_URL set (as .ci/run does) the platform tests run on PostgreSQL and Redis;
# without them, on SQLite and the in-memory channel layer.
set -uo pipefail
cd "$(dirname "$0")/.."
bash deploy/setup.sh || exit 1
export TOKENIZERS_PARALLELISM=false
# Without a GPU the Triton kernels run in Triton's interpreter, which must be chosen before triton is
# first imported: pytest-django sets Django up (and the apps import the engine) before any conftest runs.
if ! .venv/bin/python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  export TRITON_INTERPRET=${TRITON_INTERPRET:-1}
fi
# The first run converts the embedded GGUF model once into the local cache (about a minute).
.venv/bin/python -c "from inference.model_loader import resolve_model_path; resolve_model_path('smollm2-135m-instruct')" || exit 1
.venv/bin/python -m pytest -q "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure here" >&2
  exit 1
fi
exit "$rc"
