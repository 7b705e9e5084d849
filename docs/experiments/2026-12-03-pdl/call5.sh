#!/bin/bash
# Device call: in-graph staging (memcpy node + unpack kernel): tests, headline, host breakdown, fp32 equality.
export PYTHONPATH=. PYTHONUNBUFFERED=1
run() { local name=$1 t=$2; shift 2; { echo "# $*"; timeout "$t" "$@" 2>&1; echo "# rc=$?"; } > "$OUT/$name.log"; }
run tests 150 python -m pytest tests/kernels/test_kernel_step_row.py tests/engine/test_prefill_graphs_gpu.py tests/kernels/test_kernel_paged_attention_prefill_split.py -q -x -p no:cacheprovider
tail -2 "$OUT/tests.log"
run prefix 120 python -m inference.bench --gpu --prefix --repeats 15
grep -E "prefix:|rc=|Error" "$OUT/prefix.log" | cut -c1-200
run breakdown 90 python docs/experiments/2026-12-03/micro.py A
grep -vE "Warn|warn" "$OUT/breakdown.log" | tail -13
run equality 200 python -c "from inference.bench.equality import main; main()"
grep -E "identical|differ|rc=" "$OUT/equality.log" | tail -10
