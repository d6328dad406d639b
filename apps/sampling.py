"""Token sampling on the device, inside the decode TinyJit: the only host read per token is the chosen id.

The chain is llama.cpp's default order: repetition penalty over the last tokens, top-k, top-p, min-p, temperature,
then a draw (Gumbel-max with a counter-based hash RNG, so a seed reproduces a run). Thresholds for top-k and top-p
are found exactly with a 32-step bitwise search over order-preserving integer keys of the float logits: no sort.
Parameters live in persistent device tensors (set before each generation), so one JIT capture serves all values;
only the structure (greedy or sampled, which stages are on) selects a different capture.
"""
from __future__ import annotations
from dataclasses import dataclass
import numpy as np
from tinygrad import Tensor, dtypes
from apps.readback import upload_many

@dataclass(frozen=True)
class Params:
  temperature: float = 0.0   # 0: greedy (argmax)
  top_k: int = 0             # 0: off
  top_p: float = 1.0         # 1: off
  min_p: float = 0.0         # 0: off
  repeat_penalty: float = 1.0
  repeat_last_n: int = 64
  seed: int = 0

  def __post_init__(self):
    checks = [(self.temperature >= 0, "temperature must be >= 0"), (self.top_k >= 0, "top_k must be >= 0"),
              (0 < self.top_p <= 1, "top_p must be in (0, 1]"), (0 <= self.min_p <= 1, "min_p must be in [0, 1]"),
              (self.repeat_penalty > 0, "repeat_penalty must be > 0"), (0 <= self.repeat_last_n <= RING, f"repeat_last_n must be in [0, {RING}]")]
    for ok, msg in checks:
      if not ok: raise ValueError(msg)

  @property
  def structure(self) -> tuple[bool, ...]:
    """Which stages run; each distinct structure is its own JIT capture."""
    greedy = self.temperature == 0
    return (greedy, self.repeat_penalty != 1.0 and self.repeat_last_n > 0, not greedy and self.top_k > 0,
            not greedy and self.top_p < 1.0, not greedy and self.min_p > 0)

RING = 256  # longest repetition-penalty window

def _order_key(x: Tensor) -> Tensor:
  """uint32 keys with the same order as the float32 values."""
  b = x.bitcast(dtypes.uint32)
  return (b >> 31).cast(dtypes.bool).where(b ^ 0xFFFFFFFF, b | 0x80000000)

def _kth_key(keys: Tensor, enough) -> Tensor:
  """Largest m (1,) with enough(keys >= m) true, built bit by bit from the top: an exact radix select."""
  m = Tensor.zeros(1, dtype=dtypes.uint32, device=keys.device)
  for bit in range(31, -1, -1):
    cand = m | (1 << bit)
    m = enough(keys >= cand).where(cand, m)
  return m

def _uniform(counter: Tensor, seed: Tensor, n: int) -> Tensor:
  """n uniforms in (0, 1) from a hash of (seed, counter, index) (a lowbias32-style integer mix)."""
  x = Tensor.arange(n).cast(dtypes.uint32) * 0x9E3779B1 + counter * 0x85EBCA77 + seed
  x = x ^ (x >> 16)
  x = x * 0x7FEB352D
  x = x ^ (x >> 15)
  x = x * 0x846CA68B
  x = x ^ (x >> 16)
  return ((x >> 8).cast(dtypes.float32) + 0.5) * (1.0 / (1 << 24))

class Sampler:
  """Persistent device state of the sampler for one model (so TinyJit captures it once)."""

  def __init__(self, vocab_size: int, device: str):
    self.vocab_size, self.device = vocab_size, device
    self.params = Params()
    f = lambda v, dt=dtypes.float32: Tensor([v], dtype=dt, device=device).contiguous()
    self.temperature, self.top_p, self.min_p, self.penalty = f(1.0), f(1.0), f(0.0), f(1.0)
    self.top_k, self.seed, self.counter = f(0, dtypes.uint32), f(0, dtypes.uint32), f(0, dtypes.uint32)
    self.recent = Tensor.full((RING,), -1, dtype=dtypes.int32, device=device).contiguous()
    Tensor.realize(self.temperature, self.top_p, self.min_p, self.penalty, self.top_k, self.seed, self.counter, self.recent)

  def configure(self, params: Params, history: list[int]) -> None:
    """Set the parameters and the penalty window (the last repeat_last_n tokens of history) before a generation."""
    self.params = params
    recent = np.full(RING, -1, np.int32)
    if params.repeat_last_n and history:
      tail = history[-params.repeat_last_n:]
      recent[RING - len(tail):] = tail
    upload_many([(self.temperature, [max(params.temperature, 1e-6)]), (self.top_p, [params.top_p]), (self.min_p, [params.min_p]),
                 (self.penalty, [params.repeat_penalty]), (self.top_k, [params.top_k]), (self.seed, [params.seed & 0xFFFFFFFF]),
                 (self.counter, [0]), (self.recent, recent)])

  def sample(self, logits: Tensor, into: Tensor) -> Tensor:
    """(vocab,) float32 logits -> the token id, written into `into` (a realized (1,) int32 buffer) and returned; updates the
    penalty window and the RNG counter in place."""
    greedy, penalize, top_k, top_p, min_p = self.params.structure
    n = logits.shape[0]
    if penalize:  # llama.cpp: divide positive logits, multiply negative ones, for tokens in the window
      window = self.recent[RING - self.params.repeat_last_n:]
      seen = (Tensor.arange(n).reshape(n, 1) == window.reshape(1, -1)).any(-1)
      logits = seen.where((logits > 0).where(logits / self.penalty, logits * self.penalty), logits)
    if greedy: tok = logits.argmax(-1, keepdim=True).cast(dtypes.int32)
    else:
      keep = Tensor.ones(n, dtype=dtypes.bool, device=self.device)
      if top_k:
        keys = _order_key(logits)
        k = self.top_k.minimum(n)
        keep = keep & (keys >= _kth_key(keys, lambda ge: ge.cast(dtypes.uint32).sum() >= k))
      if top_p or min_p:
        probs = keep.where(logits, float("-inf")).softmax(-1)
        if top_p:
          keys = _order_key(probs)
          keep = keep & (keys >= _kth_key(keys, lambda ge: (ge.where(probs, 0.0)).sum() >= self.top_p))
        if min_p: keep = keep & (probs >= probs.max() * self.min_p)
      gumbel = -(-_uniform(self.counter, self.seed, n).log()).log()
      tok = (keep.where(logits / self.temperature, float("-inf")) + gumbel).argmax(-1, keepdim=True).cast(dtypes.int32)
    tok = into.assign(tok)
    updates = ([self.counter.assign(self.counter + 1)] if not greedy else []) + ([self.recent.assign(self.recent[1:].cat(tok))] if penalize else [])
    Tensor.realize(tok, *updates)
    return tok
