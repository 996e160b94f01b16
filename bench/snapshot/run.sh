#!/usr/bin/env bash
# Benchmark `instrument snapshot` against a Python baseline (bench/snapshot/baseline.py:
# pickle.load + the same summary) on a generated ~500 MB snapshot with millions of
# trace events. Not part of `cargo test`.
#
#   bench/snapshot/run.sh                 # ~9M events, ~510 MB, best of 2 runs each
#   EVENTS=2000000 REPEAT=3 bench/snapshot/run.sh
#
# Needs python3, cargo and /usr/bin/time (GNU time, for peak RSS). The snapshot is
# generated into a temporary directory and deleted afterwards.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
EVENTS=${EVENTS:-9000000}
REPEAT=${REPEAT:-2}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

echo "building instrument (cargo build --release)..." >&2
cargo build --release --quiet --manifest-path "$ROOT/Cargo.toml"
BIN="$ROOT/target/release/instrument"

echo "generating a snapshot with ~$EVENTS trace events..." >&2
python3 "$ROOT/tools/gen_snapshots.py" --bench "$TMP/bench.pickle" --events "$EVENTS" > "$TMP/gen.json" 2> /dev/null
SIZE=$(stat -c %s "$TMP/bench.pickle")
NEV=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['events'])" "$TMP/gen.json")

# best_of NAME CMD...: run REPEAT times under /usr/bin/time -v; print "wall user rss_kb" of the fastest.
best_of() {
    local name=$1; shift
    local best=""
    for _ in $(seq "$REPEAT"); do
        /usr/bin/time -v "$@" > "$TMP/$name.out" 2> "$TMP/$name.time"
        local wall user rss
        wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {n=split($2,t,":"); s=0; for(i=1;i<=n;i++) s=s*60+t[i]; print s}' "$TMP/$name.time")
        user=$(awk -F': ' '/User time/ {print $2}' "$TMP/$name.time")
        rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$TMP/$name.time")
        if [ -z "$best" ] || awk -v a="$wall" -v b="${best%% *}" 'BEGIN{exit !(a<b)}'; then
            best="$wall $user $rss"
        fi
    done
    echo "$best"
}

echo "running instrument snapshot..." >&2
read -r RW RU RM <<< "$(best_of rust "$BIN" snapshot "$TMP/bench.pickle")"
echo "running the Python baseline..." >&2
read -r PW PU PM <<< "$(best_of python python3 "$ROOT/bench/snapshot/baseline.py" "$TMP/bench.pickle")"

# Both must agree on what they measured.
R_LIVE=$("$BIN" snapshot "$TMP/bench.pickle" --json | python3 -c "import json,sys; r=json.load(sys.stdin); print(r['totals']['allocated_bytes'], r['trace']['kept_events'], r['trace']['dropped'])")
P_LIVE=$(python3 - "$TMP/python.out" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
live = re.search(r" live (\d+) ", text).group(1)
kept, dropped = re.search(r"trace: (\d+) kept, (\d+) dropped", text).groups()
print(live, kept, dropped)
EOF
)
if [ "$R_LIVE" != "$P_LIVE" ]; then
    echo "MISMATCH: instrument says (live kept dropped) = $R_LIVE, baseline says $P_LIVE" >&2
    exit 1
fi

python3 - "$SIZE" "$NEV" "$REPEAT" "$RW" "$RU" "$RM" "$PW" "$PU" "$PM" <<'EOF'
import sys
size, nev, rep = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
rw, ru, rm, pw, pu, pm = map(float, sys.argv[4:10])
print(f"snapshot: {size / 1e6:.0f} MB ({size} bytes), {nev:,} trace events; best of {rep} run(s) each")
print(f"| {'tool':<58} | {'wall s':>7} | {'user s':>7} | {'peak RSS MiB':>12} |")
print(f"|{'-' * 60}|{'-' * 9}|{'-' * 9}|{'-' * 14}|")
print(f"| {'instrument snapshot (Rust, --max-trace-events 1000000)':<58} | {rw:>7.2f} | {ru:>7.2f} | {rm / 1024:>12.0f} |")
print(f"| {'Python baseline: pickle.load + summary (baseline.py)':<58} | {pw:>7.2f} | {pu:>7.2f} | {pm / 1024:>12.0f} |")
print(f"speedup (wall): {pw / rw:.1f}x   peak memory: {100 * rm / pm:.1f}% of the baseline's")
EOF
