#!/usr/bin/env python3
"""What the formulas allocate versus what the plans touch, for every preset and every shipped
config (data/configs/*.json) at the default run shape: one `bufferlab verify --json` per model
and sizing, summarised as the Markdown table of docs/findings.md ("slack").

Usage: python3 scripts/slack_summary.py [path/to/bufferlab]   (default build/tools/bufferlab)
"""
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
GIB = 1024**3


def verify(bufferlab, source, sizing):
    r = subprocess.run([bufferlab, "verify", *source, "--sizing", sizing, "--json"],
                       capture_output=True, text=True, cwd=ROOT)
    if r.returncode not in (0, 1):
        lines = r.stderr.strip().splitlines()
        return None, lines[-1] if lines else f"exit {r.returncode}"
    return json.loads(r.stdout), None


def gib(n):
    return f"{n / GIB:.2f}"


def row(name, sizing, report, err):
    if report is None:
        return f"| {name} | {sizing} | error: {err} | | | | |"
    s = report["slack"]
    alloc, needed = s["allocated_arena_bytes"], s["needed_arena_bytes"]
    top = max(s["buffers"], key=lambda b: b["wasted"])
    verdict = "clean" if report["clean"] else f"{len(report['findings'])} findings"
    waste = 100.0 * (alloc - needed) / alloc if alloc else 0.0
    return (f"| {name} | {sizing} | {gib(alloc)} | {gib(needed)} | {waste:.1f}% | "
            f"{top['buffer']} ({gib(top['wasted'])}) | {verdict} |")


def main():
    bufferlab = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "build/tools/bufferlab")
    presets = json.loads(subprocess.run([bufferlab, "presets", "--json"], capture_output=True,
                                        text=True, check=True).stdout)
    models = [(p["name"], ["--preset", p["name"]]) for p in presets]
    for f in sorted((ROOT / "data/configs").glob("*.json")):
        rel = f.relative_to(ROOT)
        models.append((str(rel), ["--config", str(rel)]))
    print("| model | sizing | allocated GiB | touched GiB | never touched | most wasted (GiB) | verify |")
    print("|---|---|---:|---:|---:|---|---|")
    for name, source in models:
        corrected, err = verify(bufferlab, source, "corrected")
        spec, serr = verify(bufferlab, source, "spec")
        print(row(name, "corrected", corrected, err))
        same = (spec is not None and corrected is not None and
                spec["slack"]["allocated_arena_bytes"] == corrected["slack"]["allocated_arena_bytes"]
                and spec["slack"]["needed_arena_bytes"] == corrected["slack"]["needed_arena_bytes"]
                and spec["clean"] == corrected["clean"])
        if not same:
            print(row(name, "spec", spec, serr))


if __name__ == "__main__":
    main()
