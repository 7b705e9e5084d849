# Device call 2: the tuner's GPU tests, then the prefix TTFT with GEMM tuning on and off (A/B, same machine).
export PYTHONPATH=. PYTHONUNBUFFERED=1
run() { local name=$1 t=$2; shift 2; { echo "# $*"; timeout "$t" "$@" 2>&1; echo "# rc=$?"; } > "$OUT/$name.log"; }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm --format=csv,noheader
run tests 150 python -m pytest -q -p no:cacheprovider tests/engine/test_gemm_tuner_gpu.py tests/engine/test_prefill_graphs_gpu.py
tail -15 "$OUT/tests.log" | cut -c1-300
run prefix_on 170 python -m inference.bench --gpu --prefix --repeats 15
grep -vE "^\s*$" "$OUT/prefix_on.log" | cut -c1-230
run prefix_off 120 python -m inference.bench --gpu --prefix --repeats 15 --no-tune-gemms
grep -E "prefix:|ready|rc=|Error" "$OUT/prefix_off.log" | cut -c1-200
