# Device call 2 (H200, 2026-12-06): the prefix bench on the final code, then the skinny GEMM
# script again with the chain's residual reset per call (call 1's chain compared different inputs).
export PYTHONPATH=. PYTHONUNBUFFERED=1
D=docs/experiments/2026-12-05b
run() { local name=$1 t=$2; shift 2; { echo "# $*"; timeout "$t" "$@" 2>&1; echo "# rc=$?"; } > "$OUT/$name.log"; }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm --format=csv,noheader
run prefix 200 python -m inference.bench --gpu --prefix --repeats 15
grep -E "prefix:|ready|rc=|Error" "$OUT/prefix.log" | cut -c1-220
run skinny 300 python $D/skinny.py
grep -E "best|chain|rc=|Error|F.linear" "$OUT/skinny.log" | cut -c1-200
