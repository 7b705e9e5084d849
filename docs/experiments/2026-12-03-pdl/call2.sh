#!/bin/bash
# Device call: programmatic dependent launch (PDL) on every Triton kernel, A/B in one machine.
export PYTHONPATH=. PYTHONUNBUFFERED=1
run() { local name=$1 t=$2; shift 2; { echo "# $*"; timeout "$t" "$@" 2>&1; echo "# rc=$?"; } > "$OUT/$name.log"; }
run prefix-nopdl 90 env PAGODA_PDL=0 python -m inference.bench --gpu --prefix --repeats 9
grep -E "prefix:|rc=" "$OUT/prefix-nopdl.log" | cut -c1-200
run prefix-pdl 90 python -m inference.bench --gpu --prefix --repeats 9
grep -E "prefix:|rc=" "$OUT/prefix-pdl.log" | cut -c1-200
run prefix-pdl-profile 100 python -m inference.bench --gpu --prefix --profile
grep -E "pinned TTFT under|timeline|_kernel|nvjet" "$OUT/prefix-pdl-profile.log" | cut -c1-400 | head -16
run kernel-tests 240 python -m pytest tests/kernels -q -x -p no:cacheprovider
tail -3 "$OUT/kernel-tests.log"
