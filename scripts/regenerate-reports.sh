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

# SLM-Lab's spec leaves the run's length to the command line (-s max_frame): the family reports
# use the budget its docs/BENCHMARKS.md documents for every Playground run (max_frame 100M).
budget=(--set max_frame=100000000)
for family in dm_control locomotion manipulation; do
  verification=()
  if [ "$family" = dm_control ] && [ -f "$seed_verification" ]; then
    verification=(--verification "$seed_verification")
  fi
  brax-diff report "${repos[@]}" --brax 2b109a0 --playground 5a1eaa0 --slm '6eb08fe9^' \
    --family "$family" --output "reports/phase5-seed/$family.md" "${budget[@]}" "${verification[@]}"
  # Each recommended spec edit says what SLM-Lab's own history did with it; master squash-merged the
  # branch the Phase 5 work happened on, so its history is read there.
  brax-diff report "${repos[@]}" --brax main --playground main --slm master \
    --family "$family" --output "reports/upstream/$family.md" --previous "reports/phase5-seed/$family.json" \
    "${budget[@]}" --history-ref feat/mjwarp-phase5-benchmarks
done

# Today's published scores (SLM-Lab's BENCHMARKS.md, identical on master and on the branch the runs
# came from), each joined with the variant its row names at that branch's code (master lacks its
# batch-guard fix and LinearToMin) and the row's own budget; targets and SLM-Lab's own status from
# the last version that had them (d309f672, 2026-03-18).
brax-diff report "${repos[@]}" --brax main --playground main --slm master --family all \
  --results slm@feat/mjwarp-phase5-benchmarks --targets-ref d309f672 --output reports/upstream/results.md

# RSL-RL, Playground's other trainer for locomotion and manipulation, against Brax at today's
# upstream (rsl-rl-lib at its default ref: the release Playground main's uv.lock pins).
brax-diff report --against rsl-rl --brax-repo "$brax_repo" --playground-repo "$playground_repo" \
  --rsl-rl-repo "$rsl_rl_repo" --brax main --playground main --output reports/upstream-rsl-rl
