# One device call: K-split GEMM candidates, then the prefix cache's GPU overhead and the prefix TTFT.
export PYTHONPATH=. PYTHONUNBUFFERED=1
run() { local name=$1 t=$2; shift 2; { echo "# $*"; timeout "$t" "$@" 2>&1; echo "# rc=$?"; } > "$OUT/$name.log"; }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm --format=csv,noheader
run ksplit 150 python docs/experiments/2026-12-04/ksplit.py
cat "$OUT/ksplit.log" | cut -c1-400
run overhead 200 python -m inference.bench --gpu --prefix-overhead --repeats 6
grep -E "prefix|rc=|Error" "$OUT/overhead.log" | cut -c1-600
run prefix 150 python -m inference.bench --gpu --prefix --repeats 15
grep -E "prefix:|rc=|Error" "$OUT/prefix.log" | cut -c1-200
