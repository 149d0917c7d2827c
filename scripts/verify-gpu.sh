#!/usr/bin/env bash
# The verification on the GPU machine, sized to the window it is lent for (docs/verify.md#gpu).
# It reads no repository and fetches nothing: scripts/verify-gpu-prepare.sh made the bundle
# here. It installs the bundle's wheels into a folder of its own, then (brax_diff/verify/window.py)
# times Brax's trainer at Playground's config, the PyTorch stand-in and SLM-Lab's baseline at
# their real shapes (about a minute or two), plans the reference and the stand-in to Brax's own
# budget with the paired seeds that fit what is left of VERIFY_GPU_DEADLINE seconds (default 540,
# counted from this script's start; VERIFY_GPU_WINDOW caps the training), trains them, times one
# update of SLM-Lab's baseline, and prints what the full evidence would cost from the rates.
#
#   scripts/verify-gpu.sh [OUTPUT_DIR]      (default reports/phase5-seed/verify-gpu)
#
# VERIFY_GPU_BUNDLE: the bundle (default .gpu-bundle). VERIFY_GPU_SCALE=tiny: the same steps on
# a CPU at a tiny size (4 envs, 10-step episodes, one update, one seed): how the tests run it.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-reports/phase5-seed/verify-gpu}
bundle=${VERIFY_GPU_BUNDLE:-.gpu-bundle}
scale=${VERIFY_GPU_SCALE:-full}
case "$scale" in full|tiny) ;; *) echo "error: VERIFY_GPU_SCALE must be full or tiny, got $scale" >&2; exit 2;; esac
if [ ! -f "$bundle/bundle.json" ]; then
  echo "error: no bundle at $bundle: run scripts/verify-gpu-prepare.sh first (where the repositories are)" >&2
  exit 2
fi
export XLA_PYTHON_CLIENT_PREALLOCATE=false  # JAX would take 75% of the GPU at start; PyTorch trains beside it
if compgen -G "$bundle/wheels/*.whl" > /dev/null; then
  site=${VERIFY_GPU_SITE:-${TMPDIR:-/tmp}/brax-diff-site}
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" \
    "$bundle"/wheels/*.whl
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # this checkout's brax_diff, installed or not
if [ "$scale" = full ]; then
  python3 - <<'PY'
import sys
import jax
import torch
if not torch.cuda.is_available() or jax.default_backend() != "gpu":
    print(f"error: no GPU for both trainers (torch cuda: {torch.cuda.is_available()}, "
          f"jax backend: {jax.default_backend()})", file=sys.stderr)
    sys.exit(2)
print(f"GPU: {torch.cuda.get_device_name(0)}; jax {jax.__version__}, torch {torch.__version__}")
PY
fi
# The run cache and XLA's compilation cache stay out of OUTPUT_DIR (what comes back is the results)
args=(run --bundle "$bundle" --output "$out" --cache "${VERIFY_GPU_CACHE:-${TMPDIR:-/tmp}/brax-diff-gpu-cache}"
      --deadline "$(( ${VERIFY_GPU_DEADLINE:-540} - SECONDS ))")
[ -n "${VERIFY_GPU_WINDOW:-}" ] && args+=(--window "$VERIFY_GPU_WINDOW")
[ "$scale" = tiny ] && args+=(--tiny --budget 1)
exec python3 -m brax_diff.verify.window "${args[@]}"
