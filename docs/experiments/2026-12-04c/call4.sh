# Device call 4 (the commit's code): decode A/B, the changed kernels' GPU tests, the prefix bench.
export PYTHONPATH=. PYTHONUNBUFFERED=1
D=docs/experiments/2026-12-04c
run() { local name=$1 t=$2; shift 2; { echo "# $*"; timeout "$t" "$@" 2>&1; echo "# rc=$?"; } > "$OUT/$name.log"; }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm --format=csv,noheader
run decode_ab 120 python $D/decode_ab.py
cat "$OUT/decode_ab.log" | cut -c1-150
run tests 260 python -m pytest -q -p no:cacheprovider tests/kernels/test_kernel_split_ranges.py tests/kernels/test_kernel_paged_attention_decode.py tests/kernels/test_kernel_paged_attention_prefill_split.py tests/engine/test_prefill_graphs_gpu.py
tail -2 "$OUT/tests.log" | cut -c1-300
run prefix 180 python -m inference.bench --gpu --prefix --repeats 15
grep -E "prefix:|ready|rc=|Error" "$OUT/prefix.log" | cut -c1-220
