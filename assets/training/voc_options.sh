# The options of the default voice's vocoder run (resume.sh sources this); why each is what it is:
# docs/TRAINING.md, "The settings that matter".
VOC="--corpus data/corpus --cache runs/vocoder/cache \
  --hidden 320 --cond-channels 128 --cond-blocks 3 --block 16x4 --density 0.05 --prune-start 64851 --prune-ramp 4800 \
  --prune-every 200 --lpc-order 16 --no-lpc-input --head-pruning rows --pitch --ltp --ltp-input --ltp-input-taps 5 --steps 200000 --batch 16 \
  --segment-frames 4 --lr 3e-5 --warmup 100 --lr-half-life 40000 --lr-min 3e-5 --optimizer adam --grad-clip 1.0 \
  --threads 1 --bf16 on --seed 0 --checkpoint-interval 300 --eval-every 500 --eval-batches 4 --log-every 10 \
  --period-input-fade 0.8"
