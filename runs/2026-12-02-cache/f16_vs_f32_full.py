# full-size logits with an fp16 latent cache against an fp32 one, on the CPU (a 96-token window, chunks of 32):
#   DEV=CPU PYTHONPATH=.:upstream .venv/bin/python runs/2026-12-02-cache/f16_vs_f32_full.py youtu-llm-2b
import gc, sys, time
from apps import synth
from apps.model import Transformer
from tools.path_check import rel, window
preset = sys.argv[1]
path = synth.generate(preset, "release", progress=False)
out = {}
for ct in ("f32", "f16"):
  t = time.perf_counter()
  m = Transformer.from_gguf(path, max_context=256, cache_type=ct)
  ids = window(m.cfg.vocab_size, 96, 5)
  out[ct] = m.logits(ids)
  print(ct, f"{time.perf_counter() - t:.0f} s", flush=True)
  del m
  gc.collect()
a, b = out["f32"], out["f16"]
print(f"{preset}: f16 vs f32 cache rel L2 {rel(b, a):.1e}, argmax {(a.argmax(-1) == b.argmax(-1)).sum()}/{len(a)}")
