#!/bin/bash
# Device call 2: correctness of the new kernels/staging, then the figures.
export PYTHONPATH=.
run() {  # run NAME TIMEOUT CMD...: log with the command on top
  local name=$1 t=$2; shift 2
  { echo "# $*"; timeout "$t" "$@" 2>&1; echo "# rc=$?"; } > "$OUT/$name.log"
}
run prefix 120 python -m inference.bench --gpu --prefix --profile
grep -E "prefix:|pinned TTFT under|timeline" "$OUT/prefix.log" | cut -c1-700
run tests 240 python -m pytest tests/kernels/test_kernel_paged_attention_prefill_split.py tests/kernels/test_kernel_paged_attention_prefill.py tests/kernels/test_kernel_paged_attention_decode.py -q -x
tail -3 "$OUT/tests.log"
run equality 150 python -c "from inference.bench.equality import main; main()"
grep -E "identical|differ|rc=" "$OUT/equality.log" | tail -12
run micro 100 python docs/experiments/2026-12-03/micro.py C A
grep -vE "Warn|warn" "$OUT/micro.log" | tail -32
run suite 200 python -m inference.bench --gpu --only llama3-8b --skip-mixed
grep -E "pagoda|hf generate|copy|rc=" "$OUT/suite.log" | cut -c1-300
