# One decode attention (Youtu-LLM-2B / DeepSeek-V2-Lite shape, or GLM-4.7-Flash with --glm) at a position, three times, for
# ncu: `python3 runs/2026-11-27-mma-decode/one_step.py [module.py] POS [--glm]` (module: another mla_attention.py).
import sys, math
from pathlib import Path
import numpy as np
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import apps  # noqa: F401
from tinygrad import Tensor, dtypes
from apps.kernels import mla_attention
from tools.ab import load_variant
args = [a for a in sys.argv[1:] if not a.startswith("--")]
mod = load_variant(Path(args[0]), "mla_attention") if len(args) > 1 else mla_attention
pos = int(args[-1])
H, NOPE = (20, 192) if "--glm" in sys.argv else (16, 128)
KV, R, mc = 512, 64, pos + 1
rng = np.random.default_rng(0)
ang = np.arange(mc)[:, None] * (1.0 / 10000.0 ** (np.arange(0, R, 2) / R))[None, :]
cos, sin = Tensor(np.cos(ang).astype(np.float32)).realize(), Tensor(np.sin(ang).astype(np.float32)).realize()
cache = Tensor(rng.standard_normal((mc, KV + R)).astype(np.float32)).realize()
x = [Tensor(rng.standard_normal(s).astype(np.float32)).realize() for s in ((H, KV), (H, NOPE + R), (KV + R,), (KV,))]
p = Tensor([pos, 0], dtype=dtypes.int32).realize()
for _ in range(3):
  mod.mla_decode_attention(*x[:3], x[3], cache, cos, sin, p, n_head=H, kv_lora=KV, qk_nope=NOPE, qk_rope=R, scale=1 / math.sqrt(NOPE + R), eps=1e-6).realize()
print("ok")
