#!/usr/bin/env bash
# Wheels the serving benchmark's server needs on a GPU machine that has no network and whose image
# lacks the web stack (Django, channels, daphne, django-ninja, ...): downloaded here into .whl/, then
# installed there with no index. The image already holds torch, transformers, tokenizers, safetensors,
# jinja2, numpy, httpx, aiohttp, msgpack, prometheus-client, psutil, attrs, idna and typing-extensions,
# so those are not fetched. Versions are the ones requirements*.txt pin (or the venv holds) here.
#
#   bash benchmarks/device_wheels.sh            # here: fills .whl/ (about 20 MiB; it is git-ignored)
#   # there, before the benchmark (PYTHONPATH keeps the image's own packages in front of nothing else):
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
#       .whl/*.whl && export PYTHONPATH=/tmp/site
#   python3 -m benchmarks.serve --device cuda --sweep --tokenizer-from .whl/smollm2-tokenizer
# The device has no SmolLM2 either: its tokenizer files (not its weights) are copied to .whl/smollm2-tokenizer.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
DEST=${1:-.whl}
# The device's Python (3.12, x86-64, manylinux); pure-Python wheels match any of these.
PLATFORMS=(manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64
           manylinux2014_x86_64 manylinux1_x86_64)
WHEELS=(
  # the web stack (requirements.txt)
  Django==5.2.19 asgiref==3.13.0 sqlparse==0.6.1
  channels==4.3.2
  daphne==4.2.3 Twisted==26.10.0 autobahn==26.11.1 txaio==26.6.1 Automat==25.4.16 constantly==23.10.4
  hyperlink==21.0.0 Incremental==24.11.0 zope.interface==8.7 cbor2==6.3.0 ujson==6.1.0
  cryptography==50.0.2 cffi==2.1.1 pycparser==3.12
  mozilla-django-oidc==5.0.2 PyJWT==2.15.1
  django-ninja==1.7.1 pydantic==2.14.4 pydantic_core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5
  # the benchmark's WebSocket client (requirements-dev.txt)
  websockets==17.4
  # structured outputs (requirements.txt; benchmarks.structured): the grammar engine and its FFI runtime
  xgrammar==0.2.9 apache-tvm-ffi==0.1.15.post2
)
mkdir -p "$DEST"
args=(--no-deps --only-binary=:all: --python-version 3.12 --implementation cp -d "$DEST" -q)
for p in "${PLATFORMS[@]}"; do args+=(--platform "$p"); done
"$PY" -m pip download "${args[@]}" "${WHEELS[@]}"
tok="${PAGODA_CACHE_DIR:-$HOME/.cache/pagoda}/models/smollm2-135m-instruct"
if [ -f "$tok/tokenizer.json" ]; then
  mkdir -p "$DEST/smollm2-tokenizer"
  for f in "$tok"/*; do
    case "$(basename "$f")" in *.safetensors|config.json|pagoda-converted.json) ;; *) cp "$f" "$DEST/smollm2-tokenizer/" ;; esac
  done
else
  echo "no SmolLM2 cache at $tok: run deploy/test.sh (or start the server) once, then this again" >&2
fi
du -sh "$DEST"
echo "install there: python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade" \
     "--target /tmp/site $DEST/*.whl && export PYTHONPATH=/tmp/site"
