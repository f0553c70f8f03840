#!/usr/bin/env bash
# Regenerates tests/golden/ from third-party model code (docs/golden.md). Run by hand, never in
# CI: the golden ctest reads the files this writes and needs no Python.
#
# Creates the virtual environment .venv-golden/ (ignored by git) at the repository root and
# pip-installs the pinned versions below from PyPI, then runs make_golden.py in it. torch comes
# with its NVIDIA dependencies: installed with --no-deps, `import torch` fails even on the CPU
# (libtorch links libcufile and the CUDA runtime), so the several-GB download is the price.
set -euo pipefail

TORCH_VERSION=2.15.0
TRANSFORMERS_VERSION=5.24.0
FLA_VERSION=0.6.0

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
venv="$root/.venv-golden"

if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c "import torch, transformers, fla" 2>/dev/null; then
  cat <<EOF
make_golden.sh: about to create $venv and pip-install from PyPI
  torch==$TORCH_VERSION transformers==$TRANSFORMERS_VERSION flash-linear-attention==$FLA_VERSION
torch's PyPI wheel pulls the NVIDIA CUDA runtime wheels with it: SEVERAL GB of downloads and
about 5 GB on disk, although the references run on the CPU only. Interrupt now (Ctrl-C) to stop.
EOF
  sleep 5
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet "torch==$TORCH_VERSION" "transformers==$TRANSFORMERS_VERSION" \
    "flash-linear-attention==$FLA_VERSION" numpy
fi

# The DeepSeek-V3 compare cases take the inputs `bufferlab compare --dump` writes: a built binary
# (BUFFERLAB, default build/tools/bufferlab of the default preset).
bufferlab="${BUFFERLAB:-$root/build/tools/bufferlab}"
[[ -x "$bufferlab" ]] || { echo "make_golden.sh: no bufferlab binary at $bufferlab (set BUFFERLAB)" >&2; exit 2; }
exec "$venv/bin/python" "$root/scripts/golden/make_golden.py" --out "$root/tests/golden" \
  --bufferlab "$bufferlab" "$@"
