"""What the Python programs of scripts/gpu-check.sh share: reading the Google Benchmark JSON of
bufferlab_cuda_bench, timing a PyTorch callable with CUDA events (`time_us`), and the
torch-vs-ours side-by-side table (rows, the budget cut-off, the geometric-mean last line).

torch is imported only where a GPU is timed, so bench_roofline_summary.py runs without it.
"""
import json
import math
import os
import time

NAN = math.nan


def load_benchmarks(path):
    """The "benchmarks" list of a Google Benchmark JSON file."""
    with open(path) as f:
        return json.load(f)["benchmarks"]


def read_kernel_times(out_dir, files, prefixes):
    """Our kernel time per benchmark, from the bench JSON files in out_dir.

    Returns (times, problems): times maps each benchmark name (without "/manual_time") that
    starts with one of prefixes and has a kernel_us counter to (kernel_us, roofline_fraction
    or NaN), the first file and row naming it winning; problems lists (file, exception) for
    every file that could not be read (rows read before the error are kept).
    """
    times, problems = {}, []
    for name in files:
        try:
            for b in load_benchmarks(os.path.join(out_dir, name)):
                key = b["name"].removesuffix("/manual_time")
                if key.startswith(prefixes) and "kernel_us" in b:
                    times.setdefault(key, (b["kernel_us"], b.get("roofline_fraction", NAN)))
        except Exception as e:  # noqa: BLE001 — the caller reports it and times torch only
            problems.append((name, e))
    return times, problems


def time_us(fn, reps=None):
    """Mean microseconds per call of fn on the current CUDA device, timed by CUDA events.

    reps=None (adaptive): one warm-up call, one timed call; a call of 20 ms or more is its own
    answer, a shorter one is repeated min(50, max(3, 20 ms / once)) times. reps=N: five warm-up
    calls, then N timed calls.
    """
    import torch

    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    if reps is not None:
        for _ in range(5):
            fn()
        s.record()
        for _ in range(reps):
            fn()
        e.record(); torch.cuda.synchronize()
        return 1e3 * s.elapsed_time(e) / reps
    fn()
    s.record(); fn(); e.record(); e.synchronize()
    once = s.elapsed_time(e)
    if once >= 20.0:
        return 1e3 * once
    reps = int(min(50, max(3, 20.0 / max(once, 1e-3))))
    s.record()
    for _ in range(reps):
        fn()
    e.record(); e.synchronize()
    return 1e3 * s.elapsed_time(e) / reps


def side_by_side_args(argv):
    """OUT_DIR and BUDGET_S of a torch_*.py side-by-side, and the time it began."""
    return argv[1], float(argv[2]), time.time()


def within_budget(cases, began, budget_s):
    """The cases, until budget_s seconds have passed since began (then one "stopped at" line).

    Each case is a tuple whose first item is the benchmark key; it is drawn before the clock is
    read, so the line names the first case not run.
    """
    for case in cases:
        if time.time() - began > budget_s:
            print(f"stopped at {case[0]}: the {budget_s:.0f} s budget is spent")
            return
        yield case


class SideBySide:
    """The table of a torch_*.py program: per (benchmark, torch variant) the torch time, our
    kernel time from the bench JSON, torch/ours and our roofline fraction.

    key_width / variant_width / torch_width size the columns; decimals is the precision of the
    two times. Every ratio is kept for the geometric-mean last line.
    """

    def __init__(self, ours, key_width, variant_width, torch_width=10, decimals=2):
        self.ours = ours
        self.kw, self.vw, self.tw, self.dec = key_width, variant_width, torch_width, decimals
        self.ratios = []

    def header(self, extra=""):
        import torch

        print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}; "
              "ours = bufferlab_cuda_bench")
        print(f"{'benchmark (ours)':<{self.kw}} {'torch variant':<{self.vw}}"
              f"{'torch us':>{self.tw}}{'ours us':>10}{'torch/ours':>11}{'ours roofline':>14}"
              + extra)

    def row(self, key, variant, fn, extra=""):
        """Times fn and prints its row (extra: more columns, already formatted)."""
        try:
            t = time_us(fn)
        except Exception as ex:  # noqa: BLE001 — an API this torch lacks, out of memory, ...
            why = (str(ex).splitlines() or [type(ex).__name__])[0][:80]
            print(f"{key:<{self.kw}} {variant:<{self.vw}}  failed: {why}")
            return
        mine, frac = self.ours.get(key, (NAN, NAN))
        ratio = t / mine if mine == mine and mine > 0 else NAN
        if ratio == ratio:
            self.ratios.append(ratio)
        print(f"{key:<{self.kw}} {variant:<{self.vw}}{t:>{self.tw}.{self.dec}f}"
              f"{mine:>10.{self.dec}f}{ratio:>11.2f}{frac:>14.3f}" + extra)

    def summary(self):
        """The last line: geometric mean, min and max of torch/ours over the timed rows."""
        r = self.ratios
        geo = math.exp(sum(map(math.log, r)) / len(r)) if r else NAN
        print(f"torch/ours over {len(r)} rows: geomean {geo:.2f}, "
              f"min {min(r, default=NAN):.2f}, max {max(r, default=NAN):.2f} "
              "(> 1: ours faster)")
