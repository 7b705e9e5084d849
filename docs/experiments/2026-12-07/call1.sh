# Device call 1 (2026-12-07): the prefix bench on the landed code, then the compiled GPU tests of the
# split attention, decode and prefill graphs. Asked for an H200; whichever card came is in the log.
export PYTHONPATH=. PYTHONUNBUFFERED=1
run() { local name=$1 t=$2; shift 2; { echo "# $*"; timeout "$t" "$@" 2>&1; echo "# rc=$?"; } > "$OUT/$name.log"; }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm --format=csv,noheader | tee "$OUT/gpu.txt"
run prefix 240 python -m inference.bench --gpu --prefix --repeats 15
grep -E "prefix:|rc=|Error" "$OUT/prefix.log" | cut -c1-220
run tests 280 python -m pytest -q -p no:cacheprovider tests/kernels/test_kernel_split_ranges.py \
  tests/kernels/test_kernel_paged_attention_decode.py tests/kernels/test_kernel_paged_attention_prefill_split.py \
  tests/engine/test_prefill_graphs_gpu.py
tail -3 "$OUT/tests.log"
