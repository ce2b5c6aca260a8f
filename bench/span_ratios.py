#!/usr/bin/env python3
"""Read the medians of the span_overhead criterion bench and print the
table and ratios recorded in docs/performance.md.

Run after: cargo bench -p looptime-capture --bench span_overhead
"""
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "scripts" / "lib"))
from target_dir import target_dir  # noqa: E402  (the scripts' one rule)

base = target_dir() / "criterion" / "span"
names = {
    "a": "a_floor_two_tsc_reads",
    "b": "b_looptime_span_wall",
    "c": "c_looptime_span_cpu",
    "d": "d_two_thread_cpu_reads",
    "e": "e_puffin_scope",
    "f": "f_tracing_span",
    "g": "g_looptime_span_wall_shm",
    "h": "h_looptime_span_wall_shm_watched",
}
med = {}
for key, name in names.items():
    path = base / name / "new" / "estimates.json"
    if not path.exists():
        sys.exit(f"{path} is missing: run `cargo bench -p looptime-capture --bench span_overhead` first")
    med[key] = json.loads(path.read_text())["median"]["point_estimate"]

print("| case | median (ns) |")
print("|---|---|")
for key, name in names.items():
    print(f"| ({key}) {name} | {med[key]:.1f} |")
print()
targets = [
    ("b/a", med["b"] / med["a"], "<= 1.5", med["b"] / med["a"] <= 1.5),
    ("c/d", med["c"] / med["d"], "<= 1.1", med["c"] / med["d"] <= 1.1),
    ("e/b", med["e"] / med["b"], ">= 3", med["e"] / med["b"] >= 3),
    ("f/b", med["f"] / med["b"], ">= 4", med["f"] / med["b"] >= 4),
    ("g/b", med["g"] / med["b"], "<= 1.1", med["g"] / med["b"] <= 1.1),
    ("h/g", med["h"] / med["g"], "<= 1.1", med["h"] / med["g"] <= 1.1),
]
inter = base / "interleaved.json"
if inter.exists():
    iv = json.loads(inter.read_text())
    print(f"interleaved: heap {iv['heap_ns']:.2f} ns, shm {iv['shm_ns']:.2f} ns over {iv['rounds']} alternating chunks")
    print()
    med["g_i"], med["b_i"] = iv["shm_ns"], iv["heap_ns"]
    targets.append(("g/b interleaved", med["g_i"] / med["b_i"], "<= 1.1", med["g_i"] / med["b_i"] <= 1.1))
print("| ratio | value | target | met |")
print("|---|---|---|---|")
for name, value, target, ok in targets:
    print(f"| {name} | {value:.2f} | {target} | {'yes' if ok else 'NO'} |")
