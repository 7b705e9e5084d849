# Device call 3: the split attention A/B of call 2, whose script had failed at its import.
export PYTHONPATH=. PYTHONUNBUFFERED=1
D=docs/experiments/2026-12-04c
run() { local name=$1 t=$2; shift 2; { echo "# $*"; timeout "$t" "$@" 2>&1; echo "# rc=$?"; } > "$OUT/$name.log"; }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm --format=csv,noheader
run split_ab 240 python $D/split_ab.py
sed -n '/^summary/,$p' "$OUT/split_ab.log"; grep -E "rc=|Error" "$OUT/split_ab.log"
