#!/bin/sh
# Continue the default voice's two long training runs on a fresh machine (or the same one).
# Run from the repository root after ./setup.sh:   sh assets/training/resume.sh
# Each run continues from runs/<model>/checkpoint.pt when it exists (bit-exact), else from
# the compact bfloat16 checkpoints committed here (not bit-exact, same weights and moments).
set -e
cd "$(dirname "$0")/../.."
PY=.venv/bin/python
mkdir -p runs/vocoder runs/acoustic

# The corpus is deterministic from its seed: this rebuilds the very corpus the runs trained on.
[ -f data/corpus/metadata.jsonl ] || .venv/bin/wavern corpus build data/corpus --utterances 2000 --seed 0

# Acoustic model: 1 thread; --time-limit-min bounds one call, rerun to continue.
if [ ! -f runs/acoustic/checkpoint.pt ]; then
  cp assets/training/acoustic-compact.pt runs/acoustic/checkpoint.pt
fi
nohup $PY -m wavern.training.acoustic_trainer data/corpus runs/acoustic \
  --steps 100000 --batch-size 8 --lr 1.5e-3 --warmup-steps 200 --d-model 128 --layers 3 \
  --ffn 256 --decoder-kind window --time-limit-min ${ACOUSTIC_MINUTES:-150} --eval-every 400 --threads 1 \
  >> runs/acoustic.log 2>&1 &
echo "acoustic training: PID $!, log runs/acoustic.log"

# Vocoder (session 4 on): the LPC run, an excitation-only WaveRNN over an order-16 predictor from
# the mel, output layers pruned row by row. 1 thread (2 threads collapse when the other core is
# busy), bf16, block pruning to 10 % (done at step 10000). With a free core, the same options under
# `.venv/bin/torchrun --standalone --nproc-per-node 2 -m wavern.training.vocoder_trainer ...` run 1.4x faster.
if [ -f runs/vocoder/checkpoint.pt ]; then START="--resume"; else START="--init-from assets/training/vocoder-compact.pt"; fi
nohup $PY -m wavern.training.vocoder_trainer --corpus data/corpus --run-dir runs/vocoder \
  --hidden 384 --cond-channels 128 --cond-blocks 3 --block 16x4 --density 0.1 --prune-start 2000 --prune-ramp 8000 \
  --prune-every 200 --lpc-order 16 --no-lpc-input --head-pruning rows --steps 200000 --batch 16 --segment-frames 4 --lr 3e-4 --warmup 100 --lr-half-life 40000 \
  --lr-min 5e-5 --optimizer adam --grad-clip 1.0 --threads 1 --bf16 on --seed 0 --checkpoint-interval 300 \
  --eval-every 500 --eval-batches 4 --log-every 10 $START >> runs/vocoder/log.txt 2>&1 &
echo $! > runs/vocoder/pid
echo "vocoder training: PID $!, log runs/vocoder/log.txt, metrics runs/vocoder/metrics.jsonl"

# Later, refresh the shipped voice from wherever the runs are, and measure it:
#   $PY -c "from wavern.training.voice import assemble_from_runs; assemble_from_runs('assets/voices/default', \
#     acoustic_checkpoint='runs/acoustic/checkpoint.pt', vocoder_checkpoint='runs/vocoder/checkpoint.pt', \
#     corpus_dir='data/corpus', card=open('assets/voices/default/MODEL_CARD.md').read())"
#   $PY bench/eval_voice.py --n-utts 10
#   $PY -c "from wavern.training.common import compact_checkpoint; \
#     compact_checkpoint('runs/acoustic/checkpoint.pt', 'assets/training/acoustic-compact.pt')"
#   cp runs/vocoder/compact.pt assets/training/vocoder-compact.pt
