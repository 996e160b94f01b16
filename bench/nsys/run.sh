#!/usr/bin/env bash
# Benchmark `instrument nsys report` against the same summary done with Python's sqlite3
# (bench/nsys/baseline.py), on one generated export, in one run; then check both agree.
# Not part of `cargo test`. Usage: bench/nsys/run.sh [KERNELS]   (default 2000000)
set -euo pipefail
kernels="${1:-2000000}"
cd "$(dirname "$0")/../.."
cargo build --release -q
dir=target/nsys-bench
mkdir -p "$dir"
db="$dir/bench-$kernels.sqlite"
if [ ! -f "$db" ]; then
  echo "generating $db (once; reused by later runs) ..."
  python3 tools/gen_nsys_sqlite.py --out "$db" --kernels "$kernels" --ranks 8 --seed 11 --no-expected
fi
read -r nk nr nn < <(python3 -c '
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
print(*[db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS")])
' "$db")
cat "$db" > /dev/null  # same page-cache state for both
now() { date +%s.%N; }
t0=$(now)
./target/release/instrument nsys report --json --top 100000 "$db" > "$dir/instrument.json"
t1=$(now)
python3 bench/nsys/baseline.py "$db" > "$dir/baseline.json"
t2=$(now)
python3 - "$t0" "$t1" "$t2" "$nk" "$nr" "$nn" "$db" <<'PY'
import sys
t0, t1, t2 = map(float, sys.argv[1:4])
nk, nr, nn, db = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), sys.argv[7]
a, b = t1 - t0, t2 - t1
print(f"export: {db}: {nk:,} kernels, {nr:,} runtime calls, {nn:,} NVTX events")
print(f"instrument nsys report --json:               {a:7.2f} s")
print(f"python3 sqlite3 baseline (bench/nsys/baseline.py): {b:7.2f} s")
print(f"speedup: {b / a:.1f}x")
PY
python3 bench/nsys/compare.py "$dir/instrument.json" "$dir/baseline.json"
