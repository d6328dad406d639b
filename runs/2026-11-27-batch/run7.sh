#!/usr/bin/env bash
# Single-stream decode and prefill (generate) before (A: apps/ of the commit before batched decode, in head_apps/) and
# after (B: this checkout): the short-context numbers must not get worse. make.sh writes head_apps/ first.
set -u
export PYTHONUNBUFFERED=1 DEV=CUDA
OUT=${OUT:-out}; mkdir -p "$OUT"
rm -rf /tmp/A && mkdir -p /tmp/A && tar --exclude=./.cache --exclude=./runs -cf - . | tar -xf - -C /tmp/A && ln -s "$PWD/.cache" /tmp/A/.cache
rm -rf /tmp/A/apps && cp -r runs/2026-11-27-batch/head_apps /tmp/A/apps
for round in 1 2; do
  for v in A B; do
    d=$([ $v = A ] && echo /tmp/A || echo .)
    (cd $d && timeout 140 python3 -m tools.gpu_bench --presets ${PRESETS:-youtu-llm-2b,deepseek-v2-lite} --decode 64 --prefill 512 \
      --json "$OUT/short_${v}_$round.json" 2>&1 | tee "$OUT/short_${v}_$round.log" | grep -v '^{' | tail -3)
  done
done
