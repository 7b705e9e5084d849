# Device call 3: decode with tuned GEMMs vs torch's picks (one process), then the prefix bench again.
export PYTHONPATH=. PYTHONUNBUFFERED=1
run() { local name=$1 t=$2; shift 2; { echo "# $*"; timeout "$t" "$@" 2>&1; echo "# rc=$?"; } > "$OUT/$name.log"; }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm --format=csv,noheader
run decode_ab 300 python docs/experiments/2026-12-04b/decode_ab.py
grep -vE "^\s*$|Warning|warn" "$OUT/decode_ab.log" | cut -c1-250
run prefix 150 python -m inference.bench --gpu --prefix --repeats 15
grep -E "prefix:|ready|rc=|Error" "$OUT/prefix.log" | cut -c1-200
