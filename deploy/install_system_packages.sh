#!/usr/bin/env bash
# Debian packages the deployment tests need (idempotent): nginx, run by tests/deploy/ as an unprivileged,
# non-daemon process in a temporary prefix in front of two replicas. The system nginx service is not
# enabled or started here: a CI machine has nothing to serve on port 80.
set -euo pipefail
if [ -x /usr/sbin/nginx ]; then exit 0; fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# policy-rc.d: keep the package's post-install step from starting nginx on port 80.
policy=/usr/sbin/policy-rc.d
created_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && created_policy=1
fi
apt-get install -y -qq nginx >/dev/null
if [ "$created_policy" = 1 ]; then rm -f "$policy"; fi
