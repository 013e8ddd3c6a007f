#!/usr/bin/env bash
# One lent-GPU call (issue 19): does imitating the depth-3 expert's soft targets, or a larger
# network, make a better apprentice? Inputs (carried): runs/gpu/in/{d3a,d3b,values}/examples (the
# depth-3 expert games of seeds 0, 1 and 3, hard targets) and runs/gpu/in/f64b6-6k.pt (the 64x6
# network trained on seeds 0 and 1). Outputs under $OUT, packed to pass the device's return limits
# (at most 8 files of 16 MiB): big.tgz (the 128x10 network), nets.tgz (the 64x6 ones), logs.tgz,
# soft-examples.tgz (the soft-target games) and timeline.txt.
#   GAMES=3000 STEPS=3500 BIG_STEPS=5000 REFIT_STEPS=1000 WORKERS=13 DEVICE=cuda bash bench/gpu_d3_soft.sh
# A small CPU dry run: GAMES=24 STEPS=20 BIG_STEPS=20 REFIT_STEPS=20 WORKERS=2 DEVICE=cpu OUT=/tmp/o ...
set -u
export PYTHONPATH=$PWD
: "${GAMES:=3000}" "${STEPS:=3500}" "${BIG_STEPS:=5000}" "${REFIT_STEPS:=1000}" "${WORKERS:=13}"
: "${DEVICE:=cuda}" "${OUT:?}" "${TEMPERATURE:=8}"
IN=runs/gpu/in
W=runs/gpu/work
NETS=$W/nets LOGS=$W/logs
mkdir -p "$NETS" "$LOGS" "$OUT"
PY=${PYTHON:-python}
[ "$DEVICE" = cpu ] && AMP=(--no-amp) || AMP=(--amp)
# A checkpoint's network alone (no optimizer), small enough to fetch.
weights() { $PY -c "import sys; from drmario.learn.checkpoint import load_net, save_net; save_net(load_net(sys.argv[1]), sys.argv[2])" "$1" "$2"; }
log() { echo "[$(date +%T)] $*" | tee -a "$OUT/timeline.txt"; }

log start; nvidia-smi -L >> "$OUT/timeline.txt" 2>&1

# The depth-3 expert's games of seed 0 again (the same games as $IN/d3a: the played move is the best
# one, one in ten random), now with soft targets softmax(score / T) over its moves.
log "generate soft"
$PY -m drmario generate "$W/soft" --mode expert --expert-depth 3 --expert-temperature "$TEMPERATURE" \
  --games "$GAMES" --levels "[0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24]" --seed 0 --epsilon 0.1 \
  --max-pills 1000 --stall-limit None --games-per-shard 100 --workers "$WORKERS" --no-progress \
  > "$LOGS/generate.log" 2>&1 &
GEN=$!

# Meanwhile on the GPU: the 128x10 network on the 6,000 hard games, the 64x6 on seed 0's hard
# games (the soft one's control, same settings), and the 64x6 of 6,000 games' values refitted on all
# 9,000 games.
log "train big + hard + refit9k"
$PY bench/capacity.py train --data $IN/d3a/examples $IN/d3b/examples --sizes 128x10 --value-weights 0.1 \
  --steps "$BIG_STEPS" --batch-size 1024 --lr 0.002 --warmup-steps 300 --device "$DEVICE" "${AMP[@]}" \
  --threads 2 --out "$W/big" --export "$NETS" --name capacity-train-d3-128x10 > "$LOGS/big.log" 2>&1 &
BIG=$!
$PY bench/capacity.py train --data $IN/d3a/examples --sizes 64x6 --value-weights 0.1 \
  --steps "$STEPS" --batch-size 1024 --lr 0.002 --warmup-steps 300 --device "$DEVICE" "${AMP[@]}" \
  --threads 2 --out "$W/hard" --export "$NETS/hard" --name capacity-train-d3-hard > "$LOGS/hard.log" 2>&1 &
HARD=$!
$PY -m drmario train "$W/refit9k" $IN/d3a/examples $IN/d3b/examples $IN/values/examples \
  --init $IN/f64b6-6k.pt --learn values --filters 64 --blocks 6 --augment true --test-fraction 0.05 \
  --steps "$REFIT_STEPS" --batch-size 1024 --lr 0.001 --warmup-steps 100 --device "$DEVICE" --threads 2 \
  > "$LOGS/refit9k.log" 2>&1
log "refit9k rc=$?"; weights "$W/refit9k/checkpoints/latest.pt" "$NETS/refit9k.pt"

wait $GEN; log "generate rc=$?"
log "train soft"
$PY bench/capacity.py train --data "$W/soft/examples" --sizes 64x6 --value-weights 0.1 \
  --steps "$STEPS" --batch-size 1024 --lr 0.002 --warmup-steps 300 --device "$DEVICE" "${AMP[@]}" \
  --threads 4 --out "$W/softnet" --export "$NETS/soft" --name capacity-train-d3-soft > "$LOGS/soft.log" 2>&1
log "soft rc=$?"
$PY -m drmario train "$W/softrefit" $IN/values/examples --init "$NETS/soft/f64b6-vw0.1.pt" --learn values \
  --filters 64 --blocks 6 --augment true --test-fraction 0.05 --steps "$REFIT_STEPS" --lr 0.001 \
  --warmup-steps 100 --device "$DEVICE" --threads 4 > "$LOGS/softrefit.log" 2>&1
log "softrefit rc=$?"; weights "$W/softrefit/checkpoints/latest.pt" "$NETS/soft-refit.pt"
wait $HARD; log "hard rc=$?"
wait $BIG; log "big rc=$?"
cp bench/results/capacity-train-d3-{128x10,hard,soft}-*.json "$LOGS/" 2>/dev/null
tar czf "$OUT/big.tgz" -C "$NETS" f128b10-vw0.1.pt f128b10-vw0.1-metrics.csv
tar czf "$OUT/nets.tgz" -C "$NETS" hard soft refit9k.pt soft-refit.pt
tar czf "$OUT/logs.tgz" -C "$LOGS" .
tar czf "$OUT/soft-examples.tgz" --exclude='*.npz' -C "$W/soft" examples selfplay.json
log done
