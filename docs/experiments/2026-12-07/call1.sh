# Device call 1 (2026-12-07): how much of L2 holds a weight just read (l2_retention.py), then the
# prefix bench on the landed code. Asks for an H200; whichever card came is in gpu.txt.
export PYTHONPATH=. PYTHONUNBUFFERED=1
D=docs/experiments/2026-12-07
run() { local name=$1 t=$2; shift 2; { echo "# $*"; timeout "$t" "$@" 2>&1; echo "# rc=$?"; } > "$OUT/$name.log"; }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm --format=csv,noheader | tee "$OUT/gpu.txt"
run l2 120 python $D/l2_retention.py
cat "$OUT/l2.log"
run prefix 240 python -m inference.bench --gpu --prefix --repeats 15
grep -E "prefix:|rc=|Error" "$OUT/prefix.log" | cut -c1-220
