#!/usr/bin/env bash
# Every citation in code, docs, scripts and CLI strings points into the repository
# (docs/architecture.md "The contract: docs/spec/"). Fails, listing file:line, on:
#   1. a path outside the repository: ../shared, /work/, /tmp/, /home/, /root/, shared/spec;
#   2. a `.md` file that does not exist, relative to the citing file's folder or the
#      repository root (DESIGN.md, GPU.md, spec/buffers.md from core/ ...);
#   3. a contract file cited as `spec/<name>.md` instead of `docs/spec/<name>.md`;
#   4. `docs/spec/<file> §N` (or `<file> §N` inside docs/spec/) whose §N is no heading there.
# Usage: check_citations.sh [REPO_ROOT]   (default: the repository this script is in)
set -uo pipefail
export LC_ALL=C
root=${1:-"$(cd "$(dirname "$0")/../.." && pwd)"}
cd "$root" || exit 2
self=tests/citations/check_citations.sh

# The scanned files: the project's own sources, docs and scripts (no build folders, no .git).
scanned=()
while IFS= read -r -d '' f; do
  f=${f#./}
  [ "$f" = "$self" ] && continue
  scanned+=("$f")
done < <(find core oracle backends properties tools tests bench scripts docs cmake .ci data \
  README.md CMakeLists.txt CMakePresets.json -type f -print0 2>/dev/null)
if [ ${#scanned[@]} -lt 100 ]; then
  echo "check_citations: only ${#scanned[@]} files under $root; wrong root?" >&2
  exit 2
fi

bad=0
fail() {
  echo "$1"
  bad=$((bad + 1))
}

# 1. Paths outside the repository.
while IFS= read -r hit; do
  fail "outside the repository: $hit"
done < <(grep -nIE '\.\./shared|/work/|/tmp/|/home/|/root/|shared/spec/' "${scanned[@]}")

# 2 and 3. Every cited .md file exists; contract files are cited under docs/spec/.
md_token='[A-Za-z0-9_./-]*[A-Za-z0-9_-]+\.md\b'
while IFS= read -r hit; do
  file=${hit%%:*}
  rest=${hit#*:}
  line=${rest%%:*}
  token=${rest#*:}
  token=${token#./}
  dir=$(dirname "$file")
  case "$token" in
    spec/*.md)
      if [ "${token#docs/spec/}" = "$token" ] && [ "$dir" != docs ]; then
        fail "$file:$line: cite the contract as docs/$token (the path from the repository root)"
        continue
      fi
      ;;
  esac
  if [ ! -f "$token" ] && [ ! -f "$dir/$token" ]; then
    fail "$file:$line: $token does not exist in the repository"
  fi
done < <(grep -noIE "$md_token" "${scanned[@]}")

# 4. Cited sections exist. Headings: "## 1. Title", "### 4.3b Title".
sections_of() {
  grep -E '^#{2,4} [0-9]+(\.[0-9]+)*[a-z]?[. ]' "$1" | sed -E 's/^#+ ([0-9]+(\.[0-9]+)*[a-z]?).*/\1/'
}
declare -A known
for spec in docs/spec/*.md; do
  for s in $(sections_of "$spec"); do known["$spec §$s"]=1; done
done
num='[0-9]+(\.[0-9]+)*[a-z]?'
cite="(docs/spec/)?(buffers|numerics|attention|bug-catalogue)\.md \`?§$num((–|-|,| and |, | – ) ?§?$num)*"
while IFS= read -r hit; do
  file=${hit%%:*}
  rest=${hit#*:}
  line=${rest%%:*}
  text=${rest#*:}
  name=$(printf '%s' "$text" | sed -E 's/^(docs\/spec\/)?([a-z-]+\.md).*/\2/')
  case "$text" in
    docs/spec/*) ;;
    *) [ "$(dirname "$file")" = docs/spec ] || continue ;;  # bare names only inside docs/spec/
  esac
  for s in $(printf '%s' "${text#*.md}" | grep -oE "$num"); do
    s=${s%.}
    [ -n "${known["docs/spec/$name §$s"]:-}" ] ||
      fail "$file:$line: docs/spec/$name has no §$s (cited as \"$text\")"
  done
done < <(grep -noIE "$cite" "${scanned[@]}")

if [ "$bad" -gt 0 ]; then
  echo "check_citations: $bad citation(s) point outside the repository or nowhere"
  exit 1
fi
echo "check_citations: ${#scanned[@]} files, every citation points into the repository"
