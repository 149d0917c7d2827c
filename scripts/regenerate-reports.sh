#!/usr/bin/env bash
# Regenerates the committed reports in reports/ (never edit them by hand).
#   reports/phase5-seed/: the refs the hand-written Phase 5 comparison describes.
#   reports/upstream/:    today's upstream (Brax and Playground main, SLM-Lab master), with a
#                         "changes since" section against the seed-era report.
# Repositories default to the upstream URLs (cloned once into the cache); point them at
# local clones with BRAX_REPO, PLAYGROUND_REPO and SLM_REPO. Runs the installed `brax-diff`
# (pip install -e . in this checkout), never code from the current directory.
set -euo pipefail
cd "$(dirname "$0")/.."
brax_repo=${BRAX_REPO:-https://github.com/google/brax}
playground_repo=${PLAYGROUND_REPO:-https://github.com/google-deepmind/mujoco_playground}
slm_repo=${SLM_REPO:-https://github.com/kengz/SLM-Lab}
rsl_rl_repo=${RSL_RL_REPO:-https://github.com/leggedrobotics/rsl_rl}
repos=(--brax-repo "$brax_repo" --playground-repo "$playground_repo" --slm-repo "$slm_repo")

# The seed-era verification (CartpoleBalance and CartpoleSwingup, DM Control environments; five
# arms, the stand-in included) is made by the CPU preset at 20 seeds (docs/verify.md; 48 minutes
# on 2 cores), and the stand-in's second look on fresh seeds by --seeds 20 --first-seed 20
# --env CartpoleBalance --arms stand_in --output reports/phase5-seed/verify-stand-in-fresh-seeds
# (14 minutes):
#   brax-diff verify "${repos[@]}" --brax 2b109a0 --playground 5a1eaa0 --slm '6eb08fe9^' \
#     --preset cpu --seeds 20 --env CartpoleBalance --env CartpoleSwingup --set max_frame=100000000 \
#     --arms gap,stand_in --engine batched --output reports/phase5-seed/verify
seed_verification=reports/phase5-seed/verify/verify.json

for family in dm_control locomotion manipulation; do
  verification=()
  if [ "$family" = dm_control ] && [ -f "$seed_verification" ]; then
    verification=(--verification "$seed_verification")
  fi
  brax-diff report "${repos[@]}" --brax 2b109a0 --playground 5a1eaa0 --slm '6eb08fe9^' \
    --family "$family" --output "reports/phase5-seed/$family.md" "${verification[@]}"
  # Today's scores from SLM-Lab's BENCHMARKS.md, with the targets of its last version that had
  # them (d309f672, 2026-03-18, on feat/mjwarp-phase5-benchmarks).
  brax-diff report "${repos[@]}" --brax main --playground main --slm master \
    --family "$family" --output "reports/upstream/$family.md" --previous "reports/phase5-seed/$family.json" \
    --results slm --targets-ref d309f672
done

# RSL-RL, Playground's other trainer for locomotion and manipulation, against Brax at today's
# upstream (rsl-rl-lib at its default ref, the newest release train_rsl_rl.py's API matches).
brax-diff report --against rsl-rl --brax-repo "$brax_repo" --playground-repo "$playground_repo" \
  --rsl-rl-repo "$rsl_rl_repo" --brax main --playground main --output reports/upstream-rsl-rl
