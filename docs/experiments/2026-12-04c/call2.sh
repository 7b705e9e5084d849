# Device call 2: split attention A/B (stop-19 kernel vs balanced ranges + block ids a tile ahead), the
# prefix bench on the new kernel, ncu warp states of the new kernel, the split kernel's GPU tests.
export PYTHONPATH=. PYTHONUNBUFFERED=1
D=docs/experiments/2026-12-04c
run() { local name=$1 t=$2; shift 2; { echo "# $*"; timeout "$t" "$@" 2>&1; echo "# rc=$?"; } > "$OUT/$name.log"; }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm --format=csv,noheader
run split_ab 200 python $D/split_ab.py
sed -n '/^summary/,$p' "$OUT/split_ab.log"; grep -E "rc=|Error" "$OUT/split_ab.log"
run prefix 200 python -m inference.bench --gpu --prefix --repeats 15
grep -E "prefix:|ready|rc=|Error" "$OUT/prefix.log" | cut -c1-220
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
run ncu_warp 90 $NCU --clock-control none -k regex:_prefill_split --launch-skip 4 --launch-count 1 --section SpeedOfLight --section WarpStateStats --section Occupancy python $D/attn_ncu.py
grep -E "Duration|Stall|Warp Cycles|Issued Warp|rc=" "$OUT/ncu_warp.log" | head -20
run split_tests 200 python -m pytest -q -x -p no:cacheprovider tests/kernels/test_kernel_paged_attention_prefill_split.py tests/engine/test_prefill_graphs_gpu.py
tail -2 "$OUT/split_tests.log" | cut -c1-300
