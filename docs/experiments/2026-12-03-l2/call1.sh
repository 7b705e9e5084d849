export PYTHONPATH=. PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
timeout 560 python docs/experiments/2026-12-03-l2/l2.py 2>&1 | tee $OUT/l2.log | grep -v Warning
echo "# rc=${PIPESTATUS[0]}" | tee -a $OUT/l2.log
