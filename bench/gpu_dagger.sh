#!/usr/bin/env bash
# Lent-GPU calls (issue 19): the DAgger round of bench/dagger_round.py labelled by expert4 against the
# same round labelled by expert3, both trained on the GPU, in two calls with CPU work between:
#
#   bash bench/gpu_dagger.sh games   the round's 1,200 games and the 150 held-out games, labelled by
#       expert3 (dagger_round.py games, the network in bfloat16 on every core: the device's Xeon has
#       AMX), then expert4's labels (bench/relabel.py) for the held-out games and as many of the
#       round's shards as time leaves (RELABEL=0: none). Back: $OUT/games.tgz and $OUT/relabelled.tgz,
#       to untar into runs/ap-r1.
#   On the CPU machine: round 0's examples, and the rest of the relabelling (it resumes by shard):
#       python -m drmario pipeline --profile gpu-quick --run-dir runs/quick --set round0_data.workers=2 --stop-before 02
#       (cd bench && python relabel.py ../runs/ap-r1/round1/examples --out ../runs/ap-r1/round1-d4/examples)
#     and runs/ap-r1/round1-d3/examples: a copy of the shards of round1 that round1-d4 holds.
#   bash bench/gpu_dagger.sh train   carrying runs/quick/round0/examples, runs/ap-r1/round1-d3 and
#       runs/ap-r1/round1-d4 (no dataset caches): both trainings (dagger_round.py train --device cuda:
#       700 steps of 1,024 from the apprentice, on round 0's examples and the round's, same seed), then
#       the evaluation (below; `eval`: the evaluation alone). Back: the networks, weights only, in
#       $OUT/nets.tgz.* (parts: cat nets.tgz.* | tar xzf - -C runs/ap-r1) and $OUT/evaluation.tgz.
#
# Every stage stops by DEADLINE seconds and returns what it finished; the logs and bench/results are
# in $OUT/logs.tgz (the device returns at most 8 files). A dry run on the CPU: DEVICE=cpu WORKERS=2
# DTYPE=float32 GAMES_FLAGS="--games 4" TRAIN_FLAGS="--steps 2 --batch-size 64" EVAL_FLAGS="--games 2
# --search net-mcts-4" on a small copy of the runs.
set -u
STAGE=${1:?games, train (then the evaluation) or eval}
: "${OUT:?}" "${WORKERS:=16}" "${DEADLINE:=550}" "${DEVICE:=cuda}" "${DTYPE:=bfloat16}"
: "${GAMES_FLAGS:=}" "${TRAIN_FLAGS:=}" "${EVAL_FLAGS:=}" "${RELABEL:=1}"
START=$(date +%s)
left() { echo $((DEADLINE - ($(date +%s) - START))); }
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
L=/tmp/gpu-dagger-logs
log() { echo "[$(date +%T)] $*" | tee -a $L/timeline.txt; tar czf "$OUT/logs.tgz" -C $L .; }
mkdir -p "$OUT" $L
cd bench || exit
log "$STAGE: $(nvidia-smi -L 2>&1 | head -1); $(lscpu | grep -o 'amx_bf16' | head -1); $(nproc) cores"
shards() { ls "$1" 2>/dev/null | grep -c 'jsonl.gz$'; }
relabel() {  # SOURCE NAME: expert4's labels into SOURCE-d4 until the deadline (resumes by shard)
  [ "$(left)" -gt 30 ] || return
  timeout "$(($(left) - 20))" $PY relabel.py "../runs/ap-r1/$1/examples" --out "../runs/ap-r1/$1-d4/examples" \
    --depth 4 --workers "$WORKERS" --name "$2" >> $L/relabel.log 2>&1
  log "relabel $1 rc=$? ($(shards ../runs/ap-r1/$1-d4/examples) of $(shards ../runs/ap-r1/$1/examples) shards)"
}

if [ "$STAGE" = games ]; then
  timeout "$(($(left) - 60))" $PY dagger_round.py games \
    --generate-flags="--workers $WORKERS --dtype $DTYPE --threads 1 $GAMES_FLAGS" > $L/games.log 2>&1
  log "games rc=$? ($(shards ../runs/ap-r1/round1/examples) and $(shards ../runs/ap-r1/own-held-out/examples) shards)"
  tar czf "$OUT/games.tgz" -C ../runs/ap-r1 --exclude='*.cache.npz' --exclude=.drmario.lock round1 own-held-out
  [ "$RELABEL" = 1 ] && relabel own-held-out relabel-own-held-out-d4-gpu && relabel round1 relabel-round1-d4-gpu
  [ "$RELABEL" = 1 ] && tar czf "$OUT/relabelled.tgz" -C ../runs/ap-r1 --exclude='*.cache.npz' round1-d4 own-held-out-d4
fi
if [ "$STAGE" = train ]; then
  for teacher in d4 d3; do
    examples=../runs/ap-r1/round1-$teacher/examples
    [ "$(shards $examples)" -gt 0 ] && [ "$(shards $examples)" -eq "$(shards ../runs/ap-r1/round1-d3/examples)" ] ||
      { log "$examples: not the same shards as round1-d3's"; exit 1; }
    timeout "$(($(left) - 20))" $PY dagger_round.py train --round0 ../runs/quick/round0/examples --examples $examples \
      --out train1-$teacher-gpu --device "$DEVICE" --train-flags="$TRAIN_FLAGS" > $L/train1-$teacher.log 2>&1
    log "train1-$teacher rc=$?"
    $PY -c "import sys; from drmario.learn.checkpoint import load_net, save_net
save_net(load_net(sys.argv[1]), sys.argv[2])" ../runs/ap-r1/train1-$teacher-gpu/checkpoints/latest.pt \
      ../runs/ap-r1/train1-$teacher-gpu/net.pt
    rm -f "$OUT"/nets.tgz.*
    (cd ../runs/ap-r1 && tar czf - --exclude=checkpoints train1-*-gpu) | split -b 15m - "$OUT/nets.tgz."
  done
fi
if [ "$STAGE" != games ] && [ "$(left)" -gt 60 ]; then
  # While time is left, all at once: on the device's CPU in bfloat16 (AMX, as the kit's CPU figures on
  # the Xeon) the gates and the networks alone on the 100 evaluation games and the 48 others; on the
  # GPU the expert4 round's network with 100 simulations. Back: $OUT/evaluation.tgz.
  D4=../runs/ap-r1/train1-d4-gpu/net.pt D3=../runs/ap-r1/train1-d3-gpu/net.pt
  NETS="--network $D4 --against d3=$D3 --against apprentice=apprentice --others policy --alone"
  E="timeout $(($(left) - 15))"
  log "evaluation ($(left) s left)"
  export OMP_NUM_THREADS=2
  $E $PY dagger_round.py gate --new $D4 --name dagger-d4-gate > $L/gate-d4.log 2>&1 &
  $E $PY dagger_round.py gate --new $D3 --name dagger-d3-gate > $L/gate-d3.log 2>&1 &
  $E $PY dagger_round.py gate --new $D4 --old $D3 --name dagger-d4-vs-d3-gate > $L/gate-d4-d3.log 2>&1 &
  $E $PY search_vs_expert.py $NETS --dtype bfloat16 --threads 2 --name alone-d4-bf16 > $L/alone.log 2>&1 &
  $E $PY search_vs_expert.py $NETS --dtype bfloat16 --threads 2 --games 48 --seed 7 --name alone-d4-bf16-fresh48 \
    > $L/alone-fresh48.log 2>&1 &
  $E $PY search_vs_expert.py --network $D4 --others policy --device "$DEVICE" --lockstep 100 --threads 4 \
    --name search100-d4 $EVAL_FLAGS > $L/search100.log 2>&1 &
  wait
  log "evaluation done"
  tar czf "$OUT/evaluation.tgz" results/dagger-d*-gate-* results/alone-d4-bf16* results/search100-d4-*
fi
cp results/*-gpu-* $L/ 2>/dev/null
log "done: $(ls "$OUT" | tr '\n' ' ')"
