#!/usr/bin/env bash
# The verification at SLM-Lab's real shape (2048 envs, nothing scaled) on one GPU:
# CartpoleBalance with every arm (gap and leave-one-out), CheetahRun and WalkerWalk with the
# gap arms (baseline, all_fixes, reference), 5 seeds each, at the seed-era refs by default.
#
#   scripts/verify-gpu.sh [OUTPUT_DIR]      (default reports/phase5-seed/verify-gpu)
#
# Sized for one large GPU (H100/H200 class) to finish in about 8 minutes: 2 of Brax's
# 983,040-step updates per run (32 of SLM-Lab's), the `gpu` preset otherwise. It was written
# without a GPU to measure on: the first thing it does is print the plan and the estimate, and
# its last is the measured throughput (verify.json "throughput"), which is the number to trust.
# Repositories: BRAX_REPO, PLAYGROUND_REPO, SLM_REPO (paths or URLs); refs: BRAX_REF,
# PLAYGROUND_REF, SLM_REF; SLM_VARIANT, an SLM-Lab spec variant. Its estimates come from CPU-measured constants: they are extrapolated
# until a GPU run calibrates them (the plan line says so).
#
# VERIFY_GPU_SCALE=tiny runs the same steps on a CPU at a tiny size (1 seed, 4 envs, a few
# updates, 10-step episodes, 2 evaluation episodes): how the tests exercise this script end to
# end. VERIFY_GPU_ENVS (space-separated) replaces the three environments.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-reports/phase5-seed/verify-gpu}
# JAX would take 75% of the device at start; PyTorch trains on the same GPU.
export XLA_PYTHON_CLIENT_PREALLOCATE=false
repos=(--brax-repo "${BRAX_REPO:-https://github.com/google/brax}"
       --playground-repo "${PLAYGROUND_REPO:-https://github.com/google-deepmind/mujoco_playground}"
       --slm-repo "${SLM_REPO:-https://github.com/kengz/SLM-Lab}"
       --brax "${BRAX_REF:-2b109a0}" --playground "${PLAYGROUND_REF:-5a1eaa0}" --slm "${SLM_REF:-6eb08fe9^}")
[ -n "${SLM_VARIANT:-}" ] && repos+=(--variant "$SLM_VARIANT")  # else the variant mapped to each env

scale=${VERIFY_GPU_SCALE:-full}
case "$scale" in full|tiny) ;; *) echo "error: VERIFY_GPU_SCALE must be full or tiny, got $scale" >&2; exit 2;; esac
read -r -a envs <<< "${VERIFY_GPU_ENVS:-CartpoleBalance CheetahRun WalkerWalk}"

[ "$scale" = tiny ] || python - <<'EOF'
import sys
import jax
import torch
if not torch.cuda.is_available() or jax.default_backend() != "gpu":
    print(f"error: no GPU for both trainers (torch cuda: {torch.cuda.is_available()}, "
          f"jax backend: {jax.default_backend()})", file=sys.stderr)
    sys.exit(2)
print(f"GPU: {torch.cuda.get_device_name(0)}; jax {jax.__version__}, torch {torch.__version__}")
EOF

common=(--preset gpu --budget 1966080 --evals 2 --set max_frame=100000000 --jobs 1)
if [ "$scale" = tiny ]; then  # the gpu preset, scaled down: flags after --preset override it
  common+=(--seeds 1 --num-envs 4 --budget 1 --evals 1 --eval-envs 2 --set episode_length=10)
  echo "tiny CPU run of the GPU verification (VERIFY_GPU_SCALE=tiny): same steps, scaled presets"
fi
for env in "${envs[@]}"; do
  arms=gap
  [ "$env" = CartpoleBalance ] && [ "$scale" = full ] && arms=gap,loo
  brax-diff verify "${repos[@]}" "${common[@]}" --env "$env" --arms "$arms" --plan \
    | grep -E "^(verify plan|estimated wall time)"
  brax-diff verify "${repos[@]}" "${common[@]}" --env "$env" --arms "$arms" \
    --cache "${CACHE:-.brax-diff-cache}/verify-gpu" --output "$out/$env"
done
python - "$out" <<'EOF'
import json, sys, pathlib
for path in sorted(pathlib.Path(sys.argv[1]).glob("*/verify.json")):
    data = json.loads(path.read_text())
    print(path.parent.name, json.dumps(data["throughput"]), json.dumps(data["gap"].get("closed_fraction")))
EOF
