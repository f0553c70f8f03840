#!/usr/bin/env python3
"""The nvcc resource table of every CUDA kernel: registers, barriers, shared memory, stack
frame and spills per `__global__` function, as ptxas reports them for the default target
(sm_90). It is the baseline that any rewrite of the kernel sources (e.g. the kernel simulator's
execution context) must match or beat, and it shows spills (`-warn-spills`).

Usage: python3 scripts/cuda_resource_table.py [BUILD_DIR]   (default build-resource)

Configures BUILD_DIR with the `default` preset plus `--resource-usage -Xptxas
-warn-spills,-warn-lmem-usage` (tests and benchmarks off, no compiler launcher so every kernel is
really compiled), builds `bufferlab_cuda` and prints a Markdown table, one row per kernel, sorted
by source file. Needs nvcc (the CUDA toolkit at /usr/local/cuda); no GPU.
"""
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
FLAGS = "--resource-usage -Xptxas -warn-spills,-warn-lmem-usage"


def build_log(build_dir):
    subprocess.run(["cmake", "--preset", "default", "-B", build_dir, f"-DCMAKE_CUDA_FLAGS={FLAGS}",
                    "-DBUFFERLAB_BUILD_TESTS=OFF", "-DBUFFERLAB_BUILD_BENCH=OFF",
                    "-DCMAKE_CUDA_COMPILER_LAUNCHER=", "-DBUFFERLAB_CUDA=ON"],
                   cwd=ROOT, check=True, capture_output=True, text=True)
    # A clean rebuild of the CUDA objects: ptxas prints the table only when it compiles.
    subprocess.run(["cmake", "--build", build_dir, "--target", "clean"], cwd=ROOT, check=True,
                   capture_output=True, text=True)
    r = subprocess.run(["cmake", "--build", build_dir, "--target", "bufferlab_cuda", "-j2"],
                       cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(r.stdout[-4000:] + r.stderr[-4000:])
    return r.stdout + r.stderr


def demangle(names):
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True)
    return out.stdout.splitlines()


def short_name(demangled):
    # "void bufferlab::cuda::(anonymous namespace)::row_scatter_kernel<unsigned short>(...)"
    # → "row_scatter_kernel<unsigned short>"; CUB's kernels keep their name without arguments.
    name = demangled.replace("(anonymous namespace)::", "")
    if name.startswith("void "):
        name = name[5:]
    depth, cut = 0, len(name)
    for i, ch in enumerate(name):  # the first "(" outside template brackets opens the arguments
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "(" and depth == 0:
            cut = i
            break
    name = name[:cut]
    head = name.split("<")[0]
    base = head.split("::")[-1]
    if "cub::" in name:
        return base
    return base + name[len(head):]


def parse(log):
    kernels, current_file = {}, "?"
    entry = None
    for line in log.splitlines():
        m = re.search(r"Building CUDA object .*/src/(\S+)\.cu\.o", line)
        if m:
            current_file = m.group(1) + ".cu"
        m = re.search(r"Compiling entry function '(\S+)'", line)
        if m:
            entry = m.group(1)
            kernels[entry] = {"file": current_file, "stack": 0, "spill_st": 0, "spill_ld": 0,
                              "regs": 0, "barriers": 0, "smem": 0}
            continue
        if entry is None:
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads",
                      line)
        if m:
            k = kernels[entry]
            k["stack"], k["spill_st"], k["spill_ld"] = map(int, m.groups())
        m = re.search(r"Used (\d+) registers, used (\d+) barriers(?:, (\d+) bytes smem)?", line)
        if m:
            k = kernels[entry]
            k["regs"], k["barriers"] = int(m.group(1)), int(m.group(2))
            k["smem"] = int(m.group(3) or 0)
            entry = None
    return kernels


def main():
    build_dir = sys.argv[1] if len(sys.argv) > 1 else "build-resource"
    kernels = parse(build_log(build_dir))
    names = list(kernels)
    rows = sorted(zip(demangle(names), names), key=lambda p: (kernels[p[1]]["file"], p[0]))
    print("| file | kernel | registers | barriers | static smem B | stack B | spill st/ld B |")
    print("|---|---|---:|---:|---:|---:|---:|")
    spilling = 0
    for demangled, mangled in rows:
        k = kernels[mangled]
        if k["spill_st"] or k["spill_ld"]:
            spilling += 1
        print(f"| {k['file']} | `{short_name(demangled)}` | {k['regs']} | {k['barriers']} | "
              f"{k['smem']} | {k['stack']} | {k['spill_st']}/{k['spill_ld']} |")
    print(f"\n{len(rows)} kernels, {spilling} with spills")


if __name__ == "__main__":
    main()
