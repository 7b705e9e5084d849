#!/bin/bash
# Device call: headline with the host cuts (no kernel change), and the host breakdown (micro.py A).
export PYTHONPATH=. PYTHONUNBUFFERED=1
run() { local name=$1 t=$2; shift 2; { echo "# $*"; timeout "$t" "$@" 2>&1; echo "# rc=$?"; } > "$OUT/$name.log"; }
run prefix-host 120 python -m inference.bench --gpu --prefix --repeats 15
grep -E "prefix:|rc=" "$OUT/prefix-host.log" | cut -c1-200
run breakdown-host 120 python docs/experiments/2026-12-03/micro.py A
grep -vE "Warn|warn" "$OUT/breakdown-host.log" | tail -14
