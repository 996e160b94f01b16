#!/usr/bin/env python3
"""Write fixtures/nsys/dualpipe/: what pithtrain's own analyze-nsys-profile scripts (889a408,
.agents/skills/analyze-nsys-profile/scripts/) print for the pithtrain-shaped exports
tools/gen_nsys_sqlite.py --scenario dualpipe writes. tests/it/nsys_ranks.rs generates the same
exports (the generator is deterministic) and holds `instrument nsys report` to these numbers.

The scripts are run from a pithtrain checkout (--pithtrain DIR), never copied into this
repository; only their printed tables are kept. Rerun this after changing the generator.

Usage: tools/nsys_pithtrain_oracle.py [--pithtrain DIR] [--out fixtures/nsys/dualpipe]
"""

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# (fixture name, generator arguments)
EXPORTS = [
    ("base.node0", ["--node", "0"]),
    ("base.node1", ["--node", "1"]),
    ("regressed.node0", ["--node", "0", "--variant", "regressed"]),
    ("regressed.node1", ["--node", "1", "--variant", "regressed"]),
]
# (suffix, script arguments after the export): the median window, the whole capture, a window
# given as bounds (the same for every rank).
RUNS = [
    ("", []),
    (".whole", ["--start", "0", "--end", "1000000000000000"]),
    (".range", ["--start", "5000000", "--end", "9000000"]),
]
SCRIPTS = ["show_setup", "find_window", "classify_streams", "compute_overlap"]
WINDOWED = {"classify_streams", "compute_overlap"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pithtrain", default=os.environ.get("PITHTRAIN", "/work/ref/pith-train-889a408"))
    ap.add_argument("--out", default=str(ROOT / "fixtures/nsys/dualpipe"))
    a = ap.parse_args()
    skill = Path(a.pithtrain) / ".agents/skills/analyze-nsys-profile/scripts"
    if not (skill / "compute_overlap.py").exists():
        sys.exit(f"{skill}: no analyze-nsys-profile scripts there (--pithtrain DIR)")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name, args in EXPORTS:
            db = Path(tmp) / f"{name}.sqlite"
            subprocess.run([sys.executable, ROOT / "tools/gen_nsys_sqlite.py", "--out", db, "--scenario", "dualpipe",
                            "--ranks", "4", *args], check=True, capture_output=True)
            for suffix, extra in RUNS:
                for s in SCRIPTS:
                    if suffix and s not in WINDOWED:
                        continue
                    if name.startswith("regressed") and suffix:
                        continue
                    r = subprocess.run([sys.executable, skill / f"{s}.py", db, *extra], check=True,
                                       capture_output=True, text=True)
                    (out / f"{name}{suffix}.{s}.txt").write_text(r.stdout)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
