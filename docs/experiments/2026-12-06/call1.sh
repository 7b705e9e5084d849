# Device call 1 (2026-12-06): the chat turn's attention against peers, then the prefix bench on HEAD.
export PYTHONPATH=. PYTHONUNBUFFERED=1
D=docs/experiments/2026-12-06
run() { local name=$1 t=$2; shift 2; { echo "# $*"; timeout "$t" "$@" 2>&1; echo "# rc=$?"; } > "$OUT/$name.log"; }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm --format=csv,noheader
run attn 300 python $D/attn_peers.py
grep -vE "^#|Warning|warn" "$OUT/attn.log" | cut -c1-160
run prefix 200 python -m inference.bench --gpu --prefix --repeats 15
grep -E "prefix:|rc=|Error" "$OUT/prefix.log" | cut -c1-220
