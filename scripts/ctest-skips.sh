#!/usr/bin/env bash
# Prints one line: how many tests the last ctest run in BUILD_DIR skipped, and why — the
# GTEST_SKIP message of each, counted per reason (ctest shows the reasons only with -V; its
# LastTest.log keeps every test's output); "skipped: 0 tests" when none was. Nothing without a
# log (ctest did not run).
# Usage: scripts/ctest-skips.sh BUILD_DIR
set -euo pipefail
log="${1:?usage: ctest-skips.sh BUILD_DIR}/Testing/Temporary/LastTest.log"
[ -f "$log" ] || exit 0
# A test's block runs from "N/M Testing: NAME" to its end time; GoogleTest prints
# "file:line: Skipped", the message lines, then "[  SKIPPED ] Test.Name (T ms)"; ctest then says
# "Skip regular expression found in output".
awk '
  /^[0-9]+\/[0-9]+ Testing: / { reason = ""; in_reason = 0; next }
  /: Skipped$/ { in_reason = 1; next }
  in_reason && /^\[  SKIPPED \]/ { in_reason = 0; next }
  in_reason { reason = reason (reason == "" ? "" : " ") $0; next }
  /^Skip regular expression found in output/ {
    if (reason == "") reason = "no reason given"
    count[reason]++; total++
  }
  END {
    if (total == 0) { print "skipped: 0 tests"; exit }
    n = 0
    for (r in count) { order[++n] = r }
    # most frequent reason first
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
      if (count[order[j]] > count[order[i]]) { t = order[i]; order[i] = order[j]; order[j] = t }
    line = ""
    if (n == 1) line = order[1]
    else for (i = 1; i <= n; i++) line = line (i > 1 ? "; " : "") count[order[i]] " × " order[i]
    printf "skipped: %d test%s: %s\n", total, total == 1 ? "" : "s", line
  }' "$log"
