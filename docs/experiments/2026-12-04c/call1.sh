# Device call 1: every cuBLASLt config for the chat turn's GEMMs; ncu on the split attention and the GEMMs.
export PYTHONPATH=. PYTHONUNBUFFERED=1
D=docs/experiments/2026-12-04c
run() { local name=$1 t=$2; shift 2; { echo "# $*"; timeout "$t" "$@" 2>&1; echo "# rc=$?"; } > "$OUT/$name.log"; }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm --format=csv,noheader
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1); echo "ncu: $NCU"
run ncu_attn 120 $NCU --clock-control none -k regex:_prefill_ --launch-skip 4 --launch-count 2 --set detailed python $D/attn_ncu.py
grep -E "Duration|Throughput|Registers|Achieved Occupancy|Warp Cycles Per Issued|Stall|rc=|==ERR|Error" "$OUT/ncu_attn.log" | head -40
run enum 330 python $D/enum.py --budget-s 30
grep -A14 -E "^(qkv|o|down|gate_up|lm_head) \[" "$OUT/enum.log" | cut -c1-170; tail -8 "$OUT/enum.log"
