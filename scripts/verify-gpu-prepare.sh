#!/usr/bin/env bash
# Here, where the repositories and the package index are: everything the GPU run needs, in one
# folder that travels with the working tree (the GPU machine has no network).
#
#   scripts/verify-gpu-prepare.sh [BUNDLE]     (default .gpu-bundle, ignored by git)
#
# 1. The Brax and SLM-Lab Extractions of VERIFY_GPU_ENV (default CartpoleSwingup: a DM Control
#    environment SLM-Lab misses, and the only kind that loads offline), and the variant
#    `brax-diff fix` writes for it: python -m brax_diff.verify.window prepare.
# 2. The wheels in scripts/gpu-wheels.txt for Python 3.12 on x86-64 (VERIFY_GPU_WHEELS=0 skips).
# Repositories and refs: BRAX_REPO, PLAYGROUND_REPO, SLM_REPO, BRAX_REF, PLAYGROUND_REF, SLM_REF
# (default: Brax and Playground main; SLM-Lab feat/mjwarp-phase5-benchmarks, the code its published
# Playground scores came from: at master its ppo_playground variant cannot train, so its arms could
# not be planned). VERIFY_GPU_FAILING (space-separated) are the environments the full-evidence
# estimate costs.
set -euo pipefail
cd "$(dirname "$0")/.."
bundle=${1:-.gpu-bundle}
env=${VERIFY_GPU_ENV:-CartpoleSwingup}
failing=(${VERIFY_GPU_FAILING:-CartpoleSwingup FingerTurnEasy FingerTurnHard})
args=(prepare --bundle "$bundle" --env "$env"
      --brax-repo "${BRAX_REPO:-https://github.com/google/brax}" --brax "${BRAX_REF:-main}"
      --playground-repo "${PLAYGROUND_REPO:-https://github.com/google-deepmind/mujoco_playground}"
      --playground "${PLAYGROUND_REF:-main}"
      --slm-repo "${SLM_REPO:-https://github.com/kengz/SLM-Lab}" --slm "${SLM_REF:-feat/mjwarp-phase5-benchmarks}"
      --set "max_frame=${MAX_FRAME:-100000000}")
[ -n "${SLM_VARIANT:-}" ] && args+=(--variant "$SLM_VARIANT")
for name in "${failing[@]}"; do args+=(--failing-env "$name"); done
python3 -m brax_diff.verify.window "${args[@]}"
if [ "${VERIFY_GPU_WHEELS:-1}" = 1 ]; then
  mkdir -p "$bundle/wheels"
  grep -v '^#' scripts/gpu-wheels.txt | xargs python3 -m pip download -q --no-deps --only-binary=:all: \
    --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$bundle/wheels"
  du -sh "$bundle"
fi
