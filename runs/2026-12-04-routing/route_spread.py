"""How many distinct routed experts a batched decode step's sequences pick a layer, as gpu_bench --batch runs them (B random
prompts of 32 tokens, then N greedy tokens each): every sequence traced block by block (tools.path_check.trace, the prompt
path), the picks of the same position across the B sequences counted per MoE layer.

  DEV=CPU PYTHONPATH=. python3 runs/2026-12-04-routing/route_spread.py deepseek-v2-lite [N]
"""
import sys
import numpy as np
from apps import synth
from apps.model import Transformer
from tools.path_check import trace

preset, B, P, N = sys.argv[1], 8, 32, int(sys.argv[2]) if len(sys.argv) > 2 else 16
m = Transformer.from_gguf(synth.generate(preset, "release", progress=False), max_context=256)
rng = np.random.default_rng(0)
prompts = [rng.integers(0, 100000, P).tolist() for _ in range(B)]   # gpu_bench.at_batches's prompts
seqs = []
for p in prompts:
  gen = list(m.generate(p, N))
  seqs.append(p + gen)
  print("gen", gen, flush=True)
recs = [trace(m, s) for s in seqs]
moe = [i for i, r in enumerate(recs[0]) if "sel" in r]
E, K = recs[0][moe[0]]["logits"].shape[-1], recs[0][moe[0]]["sel"].shape[-1]
for name, rows in (("prompt", range(8, P)), ("decode", range(P, P + N))):
  d = [len({int(e) for s in range(B) for e in recs[s][i]["sel"][r]}) for i in moe for r in rows]
  print(f"{preset} {name}: experts {E}, top {K}, {B} sequences: distinct experts a layer a step mean {np.mean(d):.1f} "
        f"(of at most {min(E, B * K)}; uniform picks: {E * (1 - (1 - K / E) ** B):.1f})")
