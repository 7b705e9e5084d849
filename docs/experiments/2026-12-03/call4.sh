export PYTHONPATH=.
run() { local name=$1 t=$2; shift 2; { echo "# $*"; timeout "$t" "$@" 2>&1; echo "# rc=$?"; } > "$OUT/$name.log"; }
run prefix 100 python -m inference.bench --gpu --prefix
grep -E "prefix:|rc=" "$OUT/prefix.log" | cut -c1-200
run suite 200 python -m inference.bench --gpu --only llama3-8b --skip-mixed --no-hf
grep -E "pagoda|copy|rc=" "$OUT/suite.log" | cut -c1-300
