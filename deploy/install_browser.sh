#!/usr/bin/env bash
# Debian's headless Chromium and ChromeDriver for the end-to-end browser test (idempotent).
set -euo pipefail
if [ -x /usr/bin/chromium ]; then exit 0; fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq chromium chromium-driver fonts-noto-cjk >/dev/null
