#!/bin/bash
# Device call 3: the final kernels (softmax update shared by the split kernel's two tile steps).
export PYTHONPATH=.
run() { local name=$1 t=$2; shift 2; { echo "# $*"; timeout "$t" "$@" 2>&1; echo "# rc=$?"; } > "$OUT/$name.log"; }
run prefix 120 python -m inference.bench --gpu --prefix
grep -E "prefix:|rc=" "$OUT/prefix.log" | cut -c1-300
run tests 200 python -m pytest tests/kernels/test_kernel_paged_attention_prefill_split.py tests/kernels/test_kernel_paged_attention_prefill.py -q -x
tail -3 "$OUT/tests.log"
run blas 120 python docs/experiments/2026-12-03/blas.py
grep -v Warn "$OUT/blas.log" | tail -12
