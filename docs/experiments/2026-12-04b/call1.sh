# Device call 1: cuBLASLt's candidate algorithms for the engine's skinny GEMMs, timed.
export PYTHONPATH=. PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm --format=csv,noheader
{ echo "# python docs/experiments/2026-12-04b/algos.py"; timeout 400 python docs/experiments/2026-12-04b/algos.py 2>&1; echo "# rc=$?"; } > "$OUT/algos.log"
cut -c1-300 "$OUT/algos.log"
