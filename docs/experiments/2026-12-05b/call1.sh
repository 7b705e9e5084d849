# Device call 1: the Triton skinny GEMM against cuBLAS, alone and in a 32-layer chain with PDL.
export PYTHONPATH=. PYTHONUNBUFFERED=1
D=docs/experiments/2026-12-05b
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm --format=csv,noheader
{ timeout 420 python $D/skinny.py; echo "# rc=$?"; } 2>&1 | tee "$OUT/skinny.log" | cut -c1-200
