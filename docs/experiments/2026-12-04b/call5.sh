# Device call 5 (the commit's code): GPU tests, the prefix bench, then the split-attention tests compiled.
export PYTHONPATH=. PYTHONUNBUFFERED=1
run() { local name=$1 t=$2; shift 2; { echo "# $*"; timeout "$t" "$@" 2>&1; echo "# rc=$?"; } > "$OUT/$name.log"; }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm --format=csv,noheader
run tests 150 python -m pytest -q -p no:cacheprovider tests/engine/test_gemm_tuner_gpu.py tests/engine/test_prefill_graphs_gpu.py
tail -2 "$OUT/tests.log" | cut -c1-300
run prefix 150 python -m inference.bench --gpu --prefix --repeats 15
grep -E "prefix:|ready|rc=|Error" "$OUT/prefix.log" | cut -c1-200
run split_tests 250 python -m pytest -q -p no:cacheprovider tests/kernels/test_kernel_paged_attention_prefill_split.py
tail -2 "$OUT/split_tests.log" | cut -c1-300
