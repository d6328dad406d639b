#!/usr/bin/env python3
"""Full-model numbers on the GPU in one go: load, prefill and decode of the full-size synthetic presets, the
device-to-device copy bandwidth, and one table with tok/s, ratios to the llama.cpp anchors and bandwidth-floor fractions.

  DEV=CUDA python3 tools/gpu_bench.py [--presets glm-4.7-flash,deepseek-v2-lite,youtu-llm-2b] [--decode 64] [--prefill 512]

Runs with python3 + numpy + upstream/ only (the GPU machine cannot pip install). Writes --json PATH too.
"""
from __future__ import annotations
import argparse, json, sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import numpy as np
import apps  # noqa: F401
from tinygrad import Device, GlobalCounters
from apps import synth
from apps.model import Transformer
import apply_patches
from bench_block import copy_bandwidth  # 4 chained 1 GiB copies in one TinyJit, read + write bytes

# llama.cpp tg128 (best of fa0/fa1) and upstream tinygrad 0.14 decode on the H100, same synthetic files (issue 8's anchors)
ANCHORS = {"glm-4.7-flash": (196, 6.8), "deepseek-v2-lite": (351, 12.8), "youtu-llm-2b": (382, 32.8)}

def bench(preset: str, n_decode: int, n_prefill: int, mix: str) -> dict:
  t0 = time.perf_counter()
  path = synth.generate(preset, mix, progress=False)
  t_gen = time.perf_counter() - t0
  file_bytes = path.stat().st_size
  mem0 = GlobalCounters.mem_used
  t0 = time.perf_counter()
  model = Transformer.from_gguf(path, max_context=n_prefill + n_decode + 64)
  Device[model.device].synchronize()
  t_load = time.perf_counter() - t0
  mem = GlobalCounters.mem_used - mem0
  rng = np.random.default_rng(0)
  prompt = rng.integers(0, 100000, n_prefill).tolist()
  # prefill: the first run compiles and captures; time the second and third
  pf = []
  for i in range(3):
    model.reset()
    t0 = time.perf_counter()
    first = next(model.generate(prompt, 1))
    pf.append(time.perf_counter() - t0)
  t_first = pf[0]
  # decode: warm up (capture), then time steady tokens
  model.reset()
  ids = prompt[:16]
  times, last = [], time.perf_counter()
  for tok in model.generate(ids, n_decode + 3):
    now = time.perf_counter()
    times.append(now - last)
    last = now
  steady = np.array(times[4:])  # drop prefill + first decode steps (JIT capture)
  ms = float(np.median(steady)) * 1e3
  active = model.active_weight_bytes()
  res = {"preset": preset, "mix": mix, "file_gb": file_bytes / 1e9, "gen_s": t_gen, "load_s": t_load, "weights_gb": model.weight_bytes() / 1e9,
         "device_mem_gb": mem / 1e9, "first_token_s": t_first, "prefill_tok_s": n_prefill / min(pf[1:]),
         "decode_ms": ms, "decode_p10_ms": float(np.percentile(steady, 10)) * 1e3, "decode_p90_ms": float(np.percentile(steady, 90)) * 1e3,
         "decode_tok_s": 1e3 / ms, "active_gb": active / 1e9, "first_generated": int(first)}
  del model
  return res

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--presets", default="youtu-llm-2b,deepseek-v2-lite,glm-4.7-flash")
  ap.add_argument("--mix", default="release")
  ap.add_argument("--decode", type=int, default=64)
  ap.add_argument("--prefill", type=int, default=512)
  ap.add_argument("--json", type=Path)
  args = ap.parse_args()
  print(f"device {Device.DEFAULT}, patch series {apply_patches.series_key()}", flush=True)
  bw = copy_bandwidth(Device.DEFAULT, 1024)
  print(f"copy bandwidth {bw / 1e9:.0f} GB/s (read + write)", flush=True)
  rows = []
  for p in args.presets.split(","):
    r = bench(p, args.decode, args.prefill, args.mix)
    r["floor_tok_s"] = bw / (r["active_gb"] * 1e9)
    rows.append(r)
    print(json.dumps(r), flush=True)
  print(f"\n{'model':18s} {'file GB':>8s} {'load s':>7s} {'mem GB':>7s} {'prefill t/s':>11s} {'decode t/s':>10s} {'ms/tok':>7s} "
        f"{'floor t/s':>9s} {'% floor':>7s} {'x llama.cpp':>11s} {'x tg 0.14':>9s}")
  for r in rows:
    lc, tg = ANCHORS.get(r["preset"], (float("nan"), float("nan")))
    print(f"{r['preset']:18s} {r['file_gb']:8.2f} {r['load_s']:7.1f} {r['device_mem_gb']:7.2f} {r['prefill_tok_s']:11.1f} {r['decode_tok_s']:10.2f} "
          f"{r['decode_ms']:7.1f} {r['floor_tok_s']:9.0f} {100 * r['decode_tok_s'] / r['floor_tok_s']:6.1f}% {r['decode_tok_s'] / lc:11.3f} "
          f"{r['decode_tok_s'] / tg:9.2f}")
  if args.json: args.json.write_text(json.dumps({"device": Device.DEFAULT, "copy_bw": bw, "rows": rows}, indent=1))

if __name__ == "__main__": main()
