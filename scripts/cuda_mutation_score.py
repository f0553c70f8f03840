#!/usr/bin/env python3
"""CUDA mutation score on the kernel simulator (issue 14).

Plants one realistic bug at a time in the real kernel sources of backends/cuda/src, builds the
simulated backend's test executable (bufferlab_cuda_sim_tests) on a scratch copy of the tracked
sources, runs the gtest filter that exercises the mutated kernel and checks that the finding
naming the bug appears (and that the run fails). The repository's own sources are never edited:
every edit happens in the scratch copy, which is restored after each mutant.

Usage: cuda_mutation_score.py [SOURCE_DIR] [--only ID] [--keep] [--list] [--scratch DIR]
Exit status: 0 when every mutant is caught and every clean filter passes, 1 otherwise.
"""

import argparse
import filecmp
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

TARGET = "bufferlab_cuda_sim_tests"


@dataclass(frozen=True)
class Mutant:
    """One planted bug: `old` occurs exactly once in `path` and becomes `new`.

    `expect` is the text that must appear in the run's output: a checker's `[name]` tag, or for
    the one mutant no checker can see, the oracle judge's failure line (said in `note`). An
    `equivalent` edit changes nothing the device defines: it must pass with no finding (a
    finding there would be a false positive); it is not part of the score.
    """

    ident: str
    bug_class: str
    path: str
    old: str
    new: str
    gtest_filter: str
    expect: str
    note: str = ""
    equivalent: bool = False


MUTANTS = [
    Mutant(
        "M01", "missing barrier", "backends/cuda/src/rmsnorm_kernel.cu",
        "  if (lane == 0) warp_partials[warp] = v;\n  __syncthreads();\n",
        "  if (lane == 0) warp_partials[warp] = v;\n",
        "RmsNormKernel.ManyRowsLargeWidth", "[shared-race]"),
    Mutant(
        "M02", "off-by-one loop bound", "backends/cuda/src/gemm.cu",
        "i < n;\n       i += uint64_t{gridDim.x} * blockDim.x) {\n"
        "    const uint64_t r = i / cols",
        "i <= n;\n       i += uint64_t{gridDim.x} * blockDim.x) {\n"
        "    const uint64_t r = i / cols",
        "MoeFfnKernel.GemmEveryEpilogueAgrees", "[uninitialized-read]"),
    Mutant(
        "M03", "wrong shuffle offset", "backends/cuda/src/moe_topk.cu",
        "      for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {\n"
        "        const float other_key",
        "      for (int offset = kWarpSize / 4; offset > 0; offset /= 2) {\n"
        "        const float other_key",
        "MoeRoutingKernel.TopKSoftmaxWeightsMatchTheOracle", "ref.ids",
        "oracle judge: the ids differ from the oracle's. No checker can see it: every lane "
        "calls the full-mask shuffles, the half-warps just never exchange their winners"),
    Mutant(
        "M04", "shuffle with a lane outside its mask", "backends/cuda/src/moe_topk.cu",
        "sum += __shfl_sync(kFullMask, w, static_cast<int>(j));",
        "sum += __shfl_sync(0x0000FFFFu, w, static_cast<int>(j));",
        "MoeRoutingKernel.TopKSoftmaxWeightsMatchTheOracle", "[collective-mask]"),
    Mutant(
        "M05", "write past a partial tile", "backends/cuda/src/mamba2_chunk.cu",
        "        if (k < kChunk * np && k / np < len) {\n",
        "        if (k < kChunk * np) {\n",
        "Mamba2KernelChunk.CumsumClampsThresholdAndPartialChunk", "[footprint-write]"),
    Mutant(
        "M06", "wrong leading dimension in the cuBLAS call", "backends/cuda/src/gemm.cpp",
        'const int ldc = as_int(g.ldy, "ldy");',
        'const int ldc = as_int(g.ldy + 1, "ldy");',
        "MoeFfnKernel.GemmEveryBf16EpilogueExactOnIntegers", "[out-of-bounds]"),
    Mutant(
        "M07", "two blocks writing one row", "backends/cuda/src/rmsnorm_kernel.cu",
        "const uint64_t at = static_cast<uint64_t>(blockIdx.x) * a.width;",
        "const uint64_t at = static_cast<uint64_t>(blockIdx.x / 2) * a.width;",
        "RmsNormKernel.ManyRowsLargeWidth", "[block-write-race]"),
    Mutant(
        "M08", "uninitialized shared read", "backends/cuda/src/mhc_lowrank.cu",
        "  if (lane == 0) sh.part[warp] = v;\n",
        "  if (lane == 0 && warp != kWarps - 1) sh.part[warp] = v;\n",
        "MhcLowRankKernel.OracleSplitPathT64", "[shared-uninitialized-read]"),
    Mutant(
        "M09", "grid one block short", "backends/cuda/src/gdn_chunk.cu",
        'launch("gdn_chunk_wu_kernel", gdn_chunk_wu_kernel, regions(a), kWuSmem, a, stream);',
        'launch("gdn_chunk_wu_kernel", gdn_chunk_wu_kernel, regions(a) - 1, kWuSmem, a, '
        'stream);',
        "GdnKernelChunk.PartialChunkTwoHeads", "[uninitialized-read]"),
    Mutant(
        "M10", "order-dependent float atomic", "backends/cuda/src/mhc_lowrank.cu",
        "    sh.total = s;\n  }\n",
        "    sh.total = is_max ? s : 0.0f;\n  }\n  __syncthreads();\n"
        "  if (!is_max && lane == 0) atomicAdd(&sh.total, v);\n",
        "MhcLowRankKernel.OracleSplitPathT64", "[nondeterminism]"),
    Mutant(
        "M11", "two blocks writing one row", "backends/cuda/src/mhc_lowrank.cu",
        "  const uint64_t t = blockIdx.x;\n",
        "  const uint64_t t = blockIdx.x / 2;\n",
        "MhcLowRankKernel.OracleSplitPathT64", "[block-write-race]"),
    Mutant(
        "M12", "group scores read before the warp syncs", "backends/cuda/src/moe_topk.cu",
        "    score[g] = a.group_by_best ? k[first] : k[first] + k[second];\n  }\n  __syncwarp();\n",
        "    score[g] = a.group_by_best ? k[first] : k[first] + k[second];\n  }\n",
        "MoeRoutingKernel.TopKGroupsRankByTheirTwoBestAndTheMutantByTheBestAlone",
        "[shared-race]"),
    Mutant(
        "E01", "butterfly from offset 32 (equivalent)", "backends/cuda/src/moe_topk.cu",
        "      for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {\n"
        "        const float other_key",
        "      for (int offset = kWarpSize; offset > 0; offset /= 2) {\n"
        "        const float other_key",
        "MoeRoutingKernel.TopKSoftmaxWeightsMatchTheOracle", "",
        "a full-width xor shuffle whose source lane is past the warp returns the caller's own "
        "value (CUDA Programming Guide, warp shuffle): the extra round is a no-op",
        equivalent=True),
]


def parse_args():
    """Command line: the source tree defaults to this script's repository."""
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("source", nargs="?", default=os.path.dirname(here),
                   help="repository root (default: this script's repository)")
    p.add_argument("--only", action="append", metavar="ID",
                   help="run only this mutant (repeatable)")
    p.add_argument("--keep", action="store_true", help="keep the scratch directory")
    p.add_argument("--list", action="store_true", help="list the mutants and exit")
    p.add_argument("--scratch", metavar="DIR",
                   help="use (and keep) this scratch directory: a rerun rebuilds only what "
                        "changed")
    p.add_argument("--jobs", type=int, default=2, help="build parallelism (default 2)")
    return p.parse_args()


def tracked_files(source):
    """The repository's tracked files: build outputs and other helpers' files stay out."""
    out = subprocess.run(["git", "-C", source, "ls-files", "-z"], check=True,
                         capture_output=True).stdout
    return [f for f in out.decode().split("\0") if f]


def copy_tree(source, scratch):
    """Copy the tracked sources into the scratch tree. A file already there with the same
    bytes is left alone, so a rerun in the same scratch directory rebuilds only what changed;
    a changed one is written with a fresh time: copying the source's (older) time could leave
    ninja an object built from a mutant that looks newer than its source."""
    for rel in tracked_files(source):
        src = os.path.join(source, rel)
        if not os.path.isfile(src):
            continue  # deleted in the working tree
        dst = os.path.join(scratch, rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if os.path.isfile(dst) and filecmp.cmp(src, dst, shallow=False):
            continue
        shutil.copyfile(src, dst)
        shutil.copymode(src, dst)


def build_env(scratch):
    """ccache (the project's launcher) keys on paths: a base directory makes the scratch
    tree's compilations hit the cache of earlier scratch trees."""
    env = dict(os.environ)
    env["CCACHE_BASEDIR"] = scratch
    return env


def configure(scratch):
    """Configure the simulator-only build of the scratch tree (no nvcc, no benchmarks)."""
    subprocess.run(["cmake", "-S", scratch, "-B", os.path.join(scratch, "build"), "-G", "Ninja",
                    "-DCMAKE_BUILD_TYPE=Release", "-DBUFFERLAB_CUDA=OFF",
                    "-DBUFFERLAB_CUDA_SIM=ON", "-DBUFFERLAB_BUILD_BENCH=OFF"],
                   check=True, env=build_env(scratch), stdout=subprocess.DEVNULL)


def build(scratch, jobs):
    """Build the test executable; returns (ok, log) so a mutant that does not compile is
    reported, not mistaken for a caught one."""
    r = subprocess.run(["cmake", "--build", os.path.join(scratch, "build"), "--target", TARGET,
                        "-j", str(jobs)], env=build_env(scratch), capture_output=True, text=True)
    return r.returncode == 0, r.stdout + r.stderr


def run_filter(scratch, gtest_filter):
    """Run the suite on one filter; returns (passed, output, seconds)."""
    exe = os.path.join(scratch, "build", "tests", TARGET)
    start = time.monotonic()
    r = subprocess.run([exe, "--gtest_filter=" + gtest_filter], capture_output=True, text=True,
                       cwd=os.path.join(scratch, "build"))
    return r.returncode == 0, r.stdout + r.stderr, time.monotonic() - start


def apply(scratch, m):
    """Plant the mutant; the text to replace must occur exactly once, or the table is stale
    and the score would be meaningless: fail loudly."""
    path = os.path.join(scratch, m.path)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    count = text.count(m.old)
    if count != 1:
        raise SystemExit(f"{m.ident}: the text to replace occurs {count} times in {m.path} "
                         f"(must be exactly once): {m.old!r}")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text.replace(m.old, m.new))
    return text


def restore(scratch, m, text):
    """Put the original file back (a new mtime: ninja rebuilds it for the next mutant)."""
    with open(os.path.join(scratch, m.path), "w", encoding="utf-8") as f:
        f.write(text)


def finding_line(output, expect):
    """The first output line carrying the expected finding, shortened for the table; for an
    oracle-judge line, with the gtest failure location before it (the line alone is terse)."""
    where = ""
    for line in output.splitlines():
        if line.endswith(": Failure"):
            where = os.path.basename(line.strip()) + " "
        if expect in line:
            text = line.strip() if expect.startswith("[") else where + line.strip()
            return text[:200]
    return ""


def main():
    """Clean runs first (a mutant counts only when its filter passes unmutated), then each
    mutant: edit, build, run, check, restore."""
    args = parse_args()
    chosen = [m for m in MUTANTS if not args.only or m.ident in args.only]
    if args.only and len(chosen) != len(set(args.only)):
        raise SystemExit(f"unknown mutant id in {args.only}")
    if args.list:
        for m in chosen:
            print(f"{m.ident}  {m.bug_class:45s} {m.path:40s} {m.expect}  ({m.gtest_filter})")
        return 0
    source = os.path.abspath(args.source)
    keep = args.keep or args.scratch is not None
    scratch = os.path.abspath(args.scratch) if args.scratch else tempfile.mkdtemp(
        prefix="bufferlab-cuda-mutants-")
    os.makedirs(scratch, exist_ok=True)
    print(f"scratch tree: {scratch}", flush=True)
    started = time.monotonic()
    failures = 0
    try:
        copy_tree(source, scratch)
        for m in chosen:  # stale table entries stop the run before the long build
            path = os.path.join(scratch, m.path)
            with open(path, encoding="utf-8") as f:
                if f.read().count(m.old) != 1:
                    apply(scratch, m)  # raises with the count
        configure(scratch)
        ok, log = build(scratch, args.jobs)
        if not ok:
            print(log[-4000:])
            raise SystemExit("the unmutated scratch tree does not build")
        clean = {}
        for flt in sorted({m.gtest_filter for m in chosen}):
            passed, output, secs = run_filter(scratch, flt)
            clean[flt] = passed
            print(f"clean  {flt}: {'pass' if passed else 'FAIL'} ({secs:.1f} s)", flush=True)
            if not passed:
                print(output[-3000:])
                failures += 1
        caught = 0
        equivalents = [m for m in chosen if m.equivalent]
        confirmed = 0
        for m in chosen:
            text = apply(scratch, m)
            try:
                ok, log = build(scratch, args.jobs)
                if not ok:
                    print(f"{m.ident} {m.bug_class}: does not compile\n{log[-3000:]}")
                    continue
                passed, output, secs = run_filter(scratch, m.gtest_filter)
            finally:
                restore(scratch, m, text)
            if m.equivalent:
                ok = passed and "cuda-sim:" not in output
                confirmed += ok
                print(f"{m.ident} {'passes' if ok else 'FLAGGED':8s} {m.bug_class} | {m.path} | "
                      f"must pass with no finding | {m.gtest_filter} | {secs:.1f} s", flush=True)
                if not ok:
                    print(output[-3000:])
                continue
            line = finding_line(output, m.expect)
            hit = clean[m.gtest_filter] and not passed and bool(line)
            caught += hit
            status = "caught" if hit else "SURVIVED"
            print(f"{m.ident} {status:8s} {m.bug_class} | {m.path} | expect {m.expect} | "
                  f"{m.gtest_filter} | {secs:.1f} s", flush=True)
            print(f"    {line or '(expected finding absent)'}", flush=True)
            if not hit:
                print(output[-3000:])
        scored = len(chosen) - len(equivalents)
        if equivalents:
            print(f"equivalent mutants passing clean: {confirmed}/{len(equivalents)}")
        print(f"total {time.monotonic() - started:.0f} s (builds included)")
        print(f"CUDA mutation score: {caught}/{scored}")
        if caught != scored or confirmed != len(equivalents):
            failures += 1
    finally:
        if not keep:
            shutil.rmtree(scratch, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
