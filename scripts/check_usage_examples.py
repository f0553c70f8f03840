#!/usr/bin/env python3
"""Re-run the `$ bufferlab ...` examples of the docs and compare their output with the text.

usage: scripts/check_usage_examples.py BUFFERLAB [--update] [--only REGEX] [--scratch DIR]
                                       [--dump DIR] [MARKDOWN_FILE ...]   (default: docs/usage.md)

Every fenced block with lines starting with `$ ` is an example: the command (continued over
lines ending in `\\` or inside an open single quote) and the lines after it, its output. The
commands run in order, with bash, in one scratch directory (so a file one example writes is
there for the next), stdout and stderr merged, with `bufferlab` and `build/tools/bufferlab`
on PATH as BUFFERLAB and `data/` linked to the repository's. Only commands starting with
bufferlab, build/tools/bufferlab, jq, cat or ls (after VAR=value assignments) run; others
(cmake) and commands elided with `…` are skipped. The input files the examples read but do not
write (moe.json, huge.json, broken.json, bad.json) are made by FIXTURES below.

Matching, line by line after stripping trailing blanks: a line of the text that is only `…`,
`...` or `[...]` stands for any number of lines, and `[...]` inside a line for any text. A line
with an elapsed time or a rate (`0.4 s`, `cases/s`, `max RSS`) matches when the two agree with
every number masked. A block preceded by `<!-- check_usage_examples: skip REASON -->` is
skipped (REASON is printed): output that depends on the build or the machine.

--update rewrites the output of the failing examples that have no elision (the others are
left for a person); a line that matched with its numbers masked keeps the text's numbers.
Exit 1 when an example differs (without --update), else 0. Not part of CI: the slow examples
(fuzz --seconds 60, compare ssd) take minutes on a small machine.
"""

import argparse
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RUNNABLE = {"bufferlab", "build/tools/bufferlab", "jq", "cat", "ls"}
SKIP_MARK = re.compile(r"<!--\s*check_usage_examples:\s*skip\s*(.*?)\s*-->")
ELISION_LINES = {"…", "...", "[...]"}
TIMED = re.compile(r"\d s\b|\d s\)|cases/s|max RSS")
NUMBER = re.compile(r"\d+(\.\d+)?(e[-+]?\d+)?")

# Files the examples read but never write, made before the first command naming them.
FIXTURES = {
    "moe.json": "printf '%s\\n' "
    "'{\"hidden_size\": 1024, \"vocab_size\": 32000, \"num_attention_heads\": 16, "
    "\"num_hidden_layers\": 4,' "
    "' \"num_local_experts\": 8, \"top_k_experts\": 2, \"intermediate_size\": 2816}' > moe.json",
    # hidden_size = vocab_size = 2^40 on the small config of tests/unit/test_cli_plan.cpp.
    "huge.json": "echo '{\"model_type\": \"llama\", \"hidden_size\": 1099511627776, "
    "\"intermediate_size\": 128, \"vocab_size\": 1099511627776, \"num_attention_heads\": 4, "
    "\"num_key_value_heads\": 2, \"num_hidden_layers\": 2, \"rms_norm_eps\": 1e-5}' > huge.json",
    "broken.json": "echo '{\"hidden_size\": 64,,}' > broken.json",
    "bad.json": "bufferlab plan --preset tiny-dense --max-batch-tokens 64 --sizing corrected "
    "--json | jq '(.buffers[] | select(.name == \"logits\") | .bytes) = \"lots\"' > bad.json",
}


class Example:
    def __init__(self, path, command, out_first, out_last, expected, skip):
        self.path, self.command, self.skip = path, command, skip
        self.out_first, self.out_last = out_first, out_last  # line indices of the output
        self.expected = expected


def parse(path):
    """The examples of one markdown file, in order."""
    lines = path.read_text().split("\n")
    examples, i, skip = [], 0, None
    while i < len(lines):
        mark = SKIP_MARK.search(lines[i])
        if mark:
            skip = mark.group(1) or "marked"
        if not lines[i].startswith("```"):
            i += 1
            continue
        end = i + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        j = i + 1
        while j < end:
            if not lines[j].startswith("$ "):
                j += 1
                continue
            command = lines[j][2:]
            j += 1
            while j < end and (command.endswith("\\") or command.count("'") % 2 == 1):
                command += "\n" + lines[j]
                j += 1
            first = j
            while j < end and not lines[j].startswith("$ "):
                j += 1
            examples.append(Example(path, command, first, j, lines[first:j], skip))
        skip = None
        i = end + 1
    return examples, lines


def runnable(command):
    if "…" in command:
        return False
    words = command.split()
    while words and re.match(r"^[A-Z_]+=", words[0]):
        words = words[1:]
    return bool(words) and words[0] in RUNNABLE


def masked(line):
    return NUMBER.sub("#", line)


def line_matches(want, got):
    if "[...]" in want:
        pattern = ".*".join(re.escape(part) for part in want.split("[...]"))
        return re.fullmatch(pattern, got) is not None
    if want == got:
        return True
    return bool(TIMED.search(want)) and masked(want) == masked(got)


def matches(expected, actual):
    """Whether actual fits expected, whose elision lines match any number of lines."""
    reach = {0}  # positions in actual reachable after matching a prefix of expected
    for want in expected:
        if want.strip() in ELISION_LINES:
            reach = set(range(min(reach), len(actual) + 1)) if reach else set()
        else:
            reach = {j + 1 for j in reach if j < len(actual) and line_matches(want, actual[j])}
    return len(actual) in reach


def run(command, scratch, env):
    for name, make in FIXTURES.items():
        if name in command and not (scratch / name).exists():
            subprocess.run(["bash", "-c", make], cwd=scratch, env=env, check=True)
    result = subprocess.run(["bash", "-c", command], cwd=scratch, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, timeout=900)
    text = result.stdout[:-1] if result.stdout.endswith("\n") else result.stdout
    return [line.rstrip() for line in text.split("\n")] if text else []


def updated(expected, actual):
    """actual, keeping the text's line where it matched with its numbers masked (times)."""
    new = list(actual)
    aligned = difflib.SequenceMatcher(None, [masked(e) for e in expected],
                                      [masked(a) for a in actual], autojunk=False)
    for block in aligned.get_matching_blocks():
        for k in range(block.size):
            e, a = expected[block.a + k], actual[block.b + k]
            if line_matches(e, a):
                new[block.b + k] = e
    return new


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("bufferlab")
    parser.add_argument("files", nargs="*", default=["docs/usage.md"])
    parser.add_argument("--update", action="store_true")
    parser.add_argument("--only", help="run only the commands matching this regex")
    parser.add_argument("--scratch", help="scratch directory (kept; default a fresh temp dir)")
    parser.add_argument("--dump", help="write each command's real output to DIR/NNN.txt")
    args = parser.parse_args()

    scratch = Path(args.scratch or tempfile.mkdtemp(prefix="usage-examples-")).resolve()
    (scratch / "bin" / "build" / "tools").mkdir(parents=True, exist_ok=True)
    (scratch / "build" / "tools").mkdir(parents=True, exist_ok=True)
    (scratch / "docs" / "img").mkdir(parents=True, exist_ok=True)  # --svg examples write here
    binary = Path(args.bufferlab).resolve()
    for link in (scratch / "bin" / "bufferlab", scratch / "build" / "tools" / "bufferlab"):
        if not link.exists():
            link.symlink_to(binary)
    if not (scratch / "data").exists():
        (scratch / "data").symlink_to(REPO / "data")
    env = dict(os.environ, PATH=f"{scratch / 'bin'}:{os.environ['PATH']}",
               OMP_WAIT_POLICY="PASSIVE")
    if args.dump:
        Path(args.dump).mkdir(parents=True, exist_ok=True)

    failed = 0
    for file in args.files:
        path = Path(file)
        examples, lines = parse(path)
        replacements = []
        for number, ex in enumerate(examples):
            where = f"{file}:{ex.out_first}"
            first_line = ex.command.split("\n")[0]
            if ex.skip or not runnable(ex.command):
                print(f"skip  {where}  $ {first_line}" + (f"  ({ex.skip})" if ex.skip else ""))
                continue
            if args.only and not re.search(args.only, ex.command):
                continue
            actual = run(ex.command, scratch, env)
            if args.dump:
                Path(args.dump, f"{number:03d}.txt").write_text(
                    "$ " + ex.command + "\n" + "\n".join(actual) + "\n")
            expected = [line.rstrip() for line in ex.expected]
            if matches(expected, actual):
                print(f"ok    {where}  $ {first_line}")
                continue
            elided = any(e.strip() in ELISION_LINES or "[...]" in e for e in expected)
            if args.update and not elided:
                print(f"upd   {where}  $ {first_line}")
                replacements.append((ex, updated(expected, actual)))
                continue
            failed += 1
            print(f"DIFF  {where}  $ {first_line}" + ("  (elided: fix by hand)" if elided else ""))
            sys.stdout.writelines(difflib.unified_diff(
                [e + "\n" for e in expected], [a + "\n" for a in actual], "text", "real", n=1))
        for ex, new in sorted(replacements, key=lambda r: -r[0].out_first):
            lines[ex.out_first:ex.out_last] = new
        if replacements:
            path.write_text("\n".join(lines))
    if not args.scratch:
        shutil.rmtree(scratch)
    print(f"{failed} example(s) differ")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
