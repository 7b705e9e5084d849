#!/usr/bin/env bash
# Debian packages for LDAP / Active Directory sign-on (idempotent):
#   libldap-dev, libsasl2-dev  python-ldap (requirements.txt) builds against them: PyPI has no wheel for it
#   slapd, ldap-utils          OpenLDAP's server, which tests/sso/ starts unprivileged on a loopback port
#                              with a test directory; the system slapd service is not started or used here.
set -euo pipefail
if [ -x /usr/sbin/slapd ] && [ -f /usr/include/ldap.h ] && [ -f /usr/include/sasl/sasl.h ]; then exit 0; fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# policy-rc.d: keep the package's post-install step from starting slapd on port 389.
policy=/usr/sbin/policy-rc.d
created_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && created_policy=1
fi
apt-get install -y -qq gcc slapd ldap-utils libldap-dev libsasl2-dev >/dev/null
if [ "$created_policy" = 1 ]; then rm -f "$policy"; fi
