#!/usr/bin/env bash
# Benchmark `instrument snapshot` against a Python baseline (bench/snapshot/baseline.py:
# pickle.load + the same summary) on generated snapshots shaped as torch writes them
# (tools/gen_snapshots.py --bench: a pithtrain-like run recorded with context "all",
# stacks "all", written with pickle.dump). Not part of `cargo test`.
#
#   bench/snapshot/run.sh                      # 500 MB and 1 GB, best of 3 (instrument) / 2 (Python)
#   SIZES=500 REPEAT=5 PY_REPEAT=1 bench/snapshot/run.sh
#   BENCH_DIR=/tmp/bench KEEP=1 bench/snapshot/run.sh   # keep (and reuse) the generated files
#
# Needs python3, cargo and /usr/bin/time (GNU time, for peak RSS). Both tools run
# in the same session, alternating, and must agree on what they measured.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SIZES=${SIZES:-"500 1000"}
REPEAT=${REPEAT:-3}
PY_REPEAT=${PY_REPEAT:-2}
DIR=${BENCH_DIR:-$(mktemp -d)}
mkdir -p "$DIR"
if [ -z "${KEEP:-}" ]; then trap 'rm -rf "$DIR"' EXIT; fi

echo "building instrument (cargo build --release)..." >&2
cargo build --release --quiet --manifest-path "$ROOT/Cargo.toml"
BIN="$ROOT/target/release/instrument"

# run NAME CMD...: one run under /usr/bin/time -v; prints "wall user rss_kb".
run() {
    local name=$1; shift
    /usr/bin/time -v "$@" > "$DIR/$name.out" 2> "$DIR/$name.time"
    awk -F': ' '/Elapsed \(wall clock\)/ {n=split($2,t,":"); s=0; for(i=1;i<=n;i++) s=s*60+t[i]; w=s}
                /User time/ {u=$2} /Maximum resident set size/ {m=$2} END {print w, u, m}' "$DIR/$name.time"
}

# best of several runs by wall time (the machine is shared: the median is printed too).
best() {
    sort -n -k1,1 | awk '{w[NR]=$1; line[NR]=$0} END {print line[1], w[int((NR+1)/2)]}'
}

for MB in $SIZES; do
    SNAP="$DIR/bench_${MB}mb.pickle"
    if [ ! -f "$SNAP" ]; then
        echo "generating a ~$MB MB snapshot..." >&2
        python3 "$ROOT/tools/gen_snapshots.py" --bench "$SNAP" --mb "$MB" > "$DIR/gen_${MB}.json"
    fi
    SIZE=$(stat -c %s "$SNAP")
    NEV=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['events'])" "$DIR/gen_${MB}.json")
    : > "$DIR/rust_${MB}.runs"; : > "$DIR/py_${MB}.runs"
    for i in $(seq "$REPEAT"); do
        echo "  instrument snapshot, run $i..." >&2
        run rust "$BIN" snapshot "$SNAP" >> "$DIR/rust_${MB}.runs"
        if [ "$i" -le "$PY_REPEAT" ]; then
            echo "  Python baseline, run $i..." >&2
            run python python3 "$ROOT/bench/snapshot/baseline.py" "$SNAP" >> "$DIR/py_${MB}.runs"
        fi
    done
    read -r RW RU RM RMED <<< "$(best < "$DIR/rust_${MB}.runs")"
    read -r PW PU PM PMED <<< "$(best < "$DIR/py_${MB}.runs")"

    # Both must agree on what they measured: live bytes, kept and dropped entries, peak.
    R=$("$BIN" snapshot "$SNAP" --json | python3 -c "import json,sys; r=json.load(sys.stdin); t=r['trace']; print(r['totals']['allocated_bytes'], t['kept_events'], t['dropped'], t['peak_live_bytes'])")
    P=$(python3 - "$DIR/python.out" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
live = re.search(r" live (\d+) ", text).group(1)
kept, dropped, peak = re.search(r"trace: (\d+) kept, (\d+) dropped, .*, peak (\d+)", text).groups()
print(live, kept, dropped, peak)
EOF
)
    if [ "$R" != "$P" ]; then
        echo "MISMATCH at $MB MB: instrument says (live kept dropped peak) = $R, the baseline $P" >&2
        exit 1
    fi
    "$BIN" snapshot "$SNAP" --html "$DIR/page_${MB}.html" > /dev/null
    HTML=$(stat -c %s "$DIR/page_${MB}.html")
    python3 - "$SIZE" "$NEV" "$REPEAT" "$PY_REPEAT" "$RW" "$RU" "$RM" "$RMED" "$PW" "$PU" "$PM" "$PMED" "$HTML" <<'EOF'
import sys
size, nev, rep, prep = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rw, ru, rm, rmed, pw, pu, pm, pmed, html = map(float, sys.argv[5:14])
print(f"\nsnapshot: {size / 1e6:.0f} MB ({size} bytes), {nev:,} trace events; best (median) of {rep} / {prep} run(s)")
print(f"| {'tool':<56} | {'wall s':>13} | {'user s':>7} | {'peak RSS MiB':>12} |")
print(f"|{'-' * 58}|{'-' * 15}|{'-' * 9}|{'-' * 14}|")
print(f"| {'instrument snapshot (--max-trace-events 1000000)':<56} | {rw:>6.2f} ({rmed:>4.2f}) | {ru:>7.2f} | {rm / 1024:>12.0f} |")
print(f"| {'Python: pickle.load + the same summary (baseline.py)':<56} | {pw:>6.2f} ({pmed:>4.1f}) | {pu:>7.2f} | {pm / 1024:>12.0f} |")
print(f"speedup (wall): {pw / rw:.1f}x   peak memory: {100 * rm / pm:.1f}% of the baseline's   --html page: {html / 1e6:.2f} MB")
EOF
done
