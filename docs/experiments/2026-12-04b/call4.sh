# Device call 4 (final code): GPU tests, decode A/B with distinct prompts per run, the prefix bench.
export PYTHONPATH=. PYTHONUNBUFFERED=1
run() { local name=$1 t=$2; shift 2; { echo "# $*"; timeout "$t" "$@" 2>&1; echo "# rc=$?"; } > "$OUT/$name.log"; }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm --format=csv,noheader
run tests 200 python -m pytest -q -p no:cacheprovider tests/engine/test_gemm_tuner_gpu.py tests/engine/test_prefill_graphs_gpu.py tests/kernels/test_kernel_paged_attention_prefill_split.py
tail -3 "$OUT/tests.log" | cut -c1-300
run decode_ab 300 python docs/experiments/2026-12-04b/decode_ab.py
grep -vE "^\s*$|Warning|warn|^  [0-9]" "$OUT/decode_ab.log" | cut -c1-250
run prefix 150 python -m inference.bench --gpu --prefix --repeats 15
grep -E "prefix:|ready|rc=|Error" "$OUT/prefix.log" | cut -c1-200
