#!/usr/bin/env bash
# Benchmark `instrument snapshot` against a Python baseline (bench/snapshot/baseline.py:
# pickle.load + the same summary) on generated snapshots shaped as torch writes them
# (tools/gen_snapshots.py --bench: a pithtrain-like run recorded with context "all",
# stacks "all", written with pickle.dump). Not part of `cargo test`.
#
#   bench/snapshot/run.sh                      # 500 MB and 1 GB, best of 3 (instrument) / 2 (Python)
#   SIZES=500 REPEAT=5 PY_REPEAT=1 bench/snapshot/run.sh
#   BENCH_DIR=/tmp/bench KEEP=1 bench/snapshot/run.sh   # keep (and reuse) the generated files
#   BEFORE_BIN=/tmp/instrument-main bench/snapshot/run.sh # also time another build (before a change)
#
# Threads: instrument reads a pickle of 64 MiB or more with two threads (the main reader
# and one helper, src/snapshot/read/split.rs; one thread on one CPU) and analyses it on
# one; Python runs on one. The table's "CPU/wall" column is (user + sys) / wall: the
# cores each side kept busy on average.
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

# run NAME CMD...: one run under /usr/bin/time -v; prints "wall user rss_kb sys".
run() {
    local name=$1; shift
    /usr/bin/time -v "$@" > "$DIR/$name.out" 2> "$DIR/$name.time"
    awk -F': ' '/Elapsed \(wall clock\)/ {n=split($2,t,":"); s=0; for(i=1;i<=n;i++) s=s*60+t[i]; w=s}
                /User time/ {u=$2} /System time/ {y=$2} /Maximum resident set size/ {m=$2}
                END {print w, u, m, y}' "$DIR/$name.time"
}

# best of several runs by wall time, and the median (the machine is shared: compare
# medians). Prints "wall user rss sys median".
best() {
    sort -n -k1,1 | awk '{w[NR]=$1; line[NR]=$1" "$2" "$3" "$4} END {print line[1], w[int((NR+1)/2)]}'
}

for MB in $SIZES; do
    SNAP="$DIR/bench_${MB}mb.pickle"
    if [ ! -f "$SNAP" ]; then
        echo "generating a ~$MB MB snapshot..." >&2
        python3 "$ROOT/tools/gen_snapshots.py" --bench "$SNAP" --mb "$MB" > "$DIR/gen_${MB}.json"
    fi
    SIZE=$(stat -c %s "$SNAP")
    NEV=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['events'])" "$DIR/gen_${MB}.json")
    : > "$DIR/rust_${MB}.runs"; : > "$DIR/py_${MB}.runs"; : > "$DIR/before_${MB}.runs"
    for i in $(seq "$REPEAT"); do
        echo "  instrument snapshot, run $i..." >&2
        run rust "$BIN" snapshot "$SNAP" >> "$DIR/rust_${MB}.runs"
        if [ -n "${BEFORE_BIN:-}" ]; then
            echo "  instrument snapshot ($BEFORE_BIN), run $i..." >&2
            run before "$BEFORE_BIN" snapshot "$SNAP" >> "$DIR/before_${MB}.runs"
        fi
        if [ "$i" -le "$PY_REPEAT" ]; then
            echo "  Python baseline, run $i..." >&2
            run python python3 "$ROOT/bench/snapshot/baseline.py" "$SNAP" >> "$DIR/py_${MB}.runs"
        fi
    done
    read -r RW RU RM RS RMED <<< "$(best < "$DIR/rust_${MB}.runs")"
    read -r PW PU PM PS PMED <<< "$(best < "$DIR/py_${MB}.runs")"
    BW=0 BU=0 BM=0 BS=0 BMED=0
    if [ -n "${BEFORE_BIN:-}" ]; then
        read -r BW BU BM BS BMED <<< "$(best < "$DIR/before_${MB}.runs")"
    fi

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
    python3 - "$SIZE" "$NEV" "$REPEAT" "$PY_REPEAT" "$RW" "$RU" "$RM" "$RMED" "$PW" "$PU" "$PM" "$PMED" "$HTML" \
        "$RS" "$PS" "$BW" "$BU" "$BM" "$BMED" "$BS" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'EOF'
import sys
size, nev, rep, prep = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rw, ru, rm, rmed, pw, pu, pm, pmed, html, rs, ps, bw, bu, bm, bmed, bs = map(float, sys.argv[5:21])
cpus, load = int(sys.argv[21]), sys.argv[22]
threads = 2 if (size >= 64 << 20 and cpus >= 2) else 1
print(f"\nsnapshot: {size / 1e6:.0f} MB ({size} bytes), {nev:,} trace events; best (median) of {rep} / {prep} run(s);"
      f" {cpus} CPUs, load average {load} at the end")
print(f"| {'tool':<58} | {'wall s':>13} | {'user s':>7} | {'CPU/wall':>8} | {'peak RSS MiB':>12} |")
print(f"|{'-' * 60}|{'-' * 15}|{'-' * 9}|{'-' * 10}|{'-' * 14}|")
rows = [(f"instrument snapshot ({threads} reading threads)", rw, rmed, ru, rs, rm)]
if bw:
    rows.append((f"instrument snapshot, BEFORE_BIN ({threads} reading threads)", bw, bmed, bu, bs, bm))
rows.append(("Python: pickle.load + the same summary (1 thread)", pw, pmed, pu, ps, pm))
for name, w, med, u, y, m in rows:
    print(f"| {name:<58} | {w:>6.2f} ({med:>4.2f}) | {u:>7.2f} | {(u + y) / w:>8.2f} | {m / 1024:>12.0f} |")
print(f"speedup, median against median: {pmed / rmed:.1f}x (best against best {pw / rw:.1f}x)"
      f"   peak memory: {100 * rm / pm:.1f}% of the baseline's   --html page: {html / 1e6:.2f} MB")
if bw:
    print(f"this build against BEFORE_BIN, median against median: {bmed / rmed:.2f}x "
          f"(BEFORE_BIN: {pmed / bmed:.1f}x the baseline)")
EOF
done
