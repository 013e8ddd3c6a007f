#!/usr/bin/env bash
# One lent-GPU call (issue 19): the gpu-quick profile's round 0 trained, analysed and played by the
# pipeline, so its 128x10 network can ship with its card. Round 0's games are made beforehand on
# the CPU machine (29 minutes on 2 cores, no GPU needed):
#   python -m drmario pipeline --profile gpu-quick --run-dir runs/quick --set round0_data.workers=2 --stop-before 02
# Carry runs/quick (its 6,000 round-0 games, 18 MB) and .whl (below). Here the same run resumes: 02
# trains the network on the GPU, 03 analyses it; then, while time is left (DEADLINE seconds after the
# start), the network with 100 simulations and alone play the 100 evaluation games on the GPU
# (bench/search_vs_expert.py --device cuda; the expert's games need no GPU and are the same anywhere:
# pair with them afterwards, bench/pair.py). Measured on an NVIDIA H100 with 16 cores (2026-11-27):
# 02 in 211 s (its training 140 s), 03 in 149 s, the evaluation 108 s. A run trained here on the CPU
# first holds dataset caches (*.cache.npz) and checkpoints too large to carry: carry a copy of the run
# with round0/ (no caches), notebooks/ and pipeline.json only. Outputs under $OUT, packed to pass the
# device's return limits (at most 8 files of 16 MiB): run.tgz.* (the run without its games, in
# parts), evaluation.tgz (bench/results/search100-quick0*), pipeline.log and timeline.txt. Then, here:
#   cat run.tgz.* | tar xzf - -C runs/quick && python -m drmario export runs/quick --out data/networks/NAME.pt
# A small CPU dry run (a run made with the same SETS, e.g. round0_data.games=8):
#   SETS="--set round0_data.games=8 --set train.steps=20 --set train.device=cpu ..." DEVICE=cpu OUT=/tmp/o ...
set -u
# The device has torch, numba, numpy, pandas, matplotlib and pyyaml, not papermill and Jupyter: carry
# their wheels for its Python (3.12) in .whl (ignored by git), as bench/README.md's "GPU calls" says.
PY=${PYTHON:-python3}
if [ -d .whl ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
: "${OUT:?}" "${RUN:=runs/quick}" "${SETS:=}" "${DEVICE:=cuda}" "${DEADLINE:=560}" "${GAMES:=100}"
START=$(date +%s)
mkdir -p "$OUT"
log() { echo "[$(date +%T)] $*" | tee -a "$OUT/timeline.txt"; }
left() { echo $((DEADLINE - ($(date +%s) - START))); }

log start; nvidia-smi -L >> "$OUT/timeline.txt" 2>&1
# shellcheck disable=SC2086  # SETS is a list of --set flags
timeout "$(left)" $PY -m drmario pipeline --profile gpu-quick --run-dir "$RUN" --no-progress $SETS \
  > "$OUT/pipeline.log" 2>&1
log "pipeline rc=$? ($(left) s left)"
# The run without its games (they are on the CPU machine already); latest.pt is about 36 MB.
tar czf - --exclude='round0/examples' --exclude='*.cache.npz' --exclude='step-*.pt' -C "$RUN" . |
  split -b 15m - "$OUT/run.tgz."
log "packed: $(ls "$OUT" | tr '\n' ' ')"

NET=$RUN/train0/checkpoints/latest.pt
if [ -f "$RUN/train0/train_result.json" ] && [ "$(left)" -gt 60 ]; then
  log "evaluation: $GAMES games, net-mcts-100 and policy"
  timeout "$(($(left) - 10))" $PY bench/search_vs_expert.py --network "$NET" --others policy \
    --games "$GAMES" --device "$DEVICE" --lockstep "$GAMES" --threads 4 --name search100-quick0 \
    > bench/results/search100-quick0.log 2>&1
  log "evaluation rc=$?"
  tar czf "$OUT/evaluation.tgz" bench/results/search100-quick0*
fi
log done
