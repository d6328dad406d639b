"""Token sampling on the device, inside the decode TinyJit: the only host read per token is the chosen id.

The chain is llama.cpp's default order: repetition penalty over the last tokens, top-k, top-p, min-p, temperature,
then a draw (Gumbel-max with a counter-based hash RNG, so a seed reproduces a run). Thresholds for top-k and top-p
are found exactly with a radix search over order-preserving integer keys of the float logits, 4 bits a pass: no sort.
Parameters live in persistent device tensors (set before each generation), so one JIT capture serves all values;
only the structure (greedy or sampled, which stages are on) selects a different capture.
"""
from __future__ import annotations
from dataclasses import dataclass
import numpy as np
from tinygrad import Tensor, dtypes
from apps.readback import device_full, to_device, upload_rows

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

def merged(structures) -> tuple[bool, ...]:
  """The structure of a batch whose rows have these structures: greedy if every row is, each stage on where a row uses it
  (a row with a stage off gets its neutral value: top_k 0 keeps all, top_p 1, min_p 0, penalty 1, temperature 0 argmax)."""
  s = list(zip(*structures))
  return (all(s[0]), *(any(col) for col in s[1:]))

RING = 256  # longest repetition-penalty window

def _order_key(x: Tensor) -> Tensor:
  """uint32 keys with the same order as the float32 values."""
  b = x.bitcast(dtypes.uint32)
  return (b >> 31).cast(dtypes.bool).where(b ^ 0xFFFFFFFF, b | 0x80000000)

RADIX = 4           # bits a pass of _kth_key decides
RADIX_BLOCK = 1024  # keys a pass's first count covers: each candidate's count is a sum per block of keys, then their sum

def _kth_key(keys: Tensor, target: Tensor, digits: list[Tensor], mass: Tensor | None = None) -> Tensor:
  """Per row of keys (B, n): the largest m (B, 1) whose keys >= m hold at least target (B, 1, 1) of the count (or of
  `mass` (B, n), with it), RADIX bits a pass from the top: an exact radix select. digits: a pass's candidate digits, each a
  realized (D,) buffer (d << shift for d < D), so every pass after the first is the same AST, compiled once. The first
  candidate, m itself, is always enough (m = 0 keeps every key), so the largest enough one is the next m. A pass counts in
  two reductions, per RADIX_BLOCK keys and then over the blocks, so its D candidates' counts of a 100k vocabulary are
  thousands of parallel sums rather than D long ones (the rows padded with key 0, below every key, and mass 0)."""
  B, n = keys.shape
  nb = -(-n // RADIX_BLOCK)
  blocked = lambda t: t.pad(((0, 0), (0, nb * RADIX_BLOCK - n))).reshape(B, 1, nb, RADIX_BLOCK).contiguous()
  keys, mass = blocked(keys), (None if mass is None else blocked(mass))
  m = Tensor.zeros(B, 1, 1, dtype=dtypes.uint32, device=keys.device)
  for d in digits:
    cand = m | d.reshape(1, -1, 1)                                              # (B, D, 1), increasing in d
    ge = keys >= cand.unsqueeze(-1)                                             # (B, D, nb, RADIX_BLOCK)
    part = (ge.cast(dtypes.uint32) if mass is None else ge.where(mass, 0.0)).sum(-1).contiguous()   # (B, D, nb)
    m = (part.sum(-1, keepdim=True) >= target).where(cand, 0).max(1, keepdim=True)   # the largest candidate that is enough
  return m.reshape(B, 1)

def _uniform(counter: Tensor, seed: Tensor, n: int) -> Tensor:
  """(B, n) uniforms in (0, 1) from a hash of (seed, counter, index) of each row (counter, seed: (B,))."""
  x = Tensor.arange(n).cast(dtypes.uint32).reshape(1, n) * 0x9E3779B1 + counter.reshape(-1, 1) * 0x85EBCA77 + seed.reshape(-1, 1)
  x = x ^ (x >> 16)
  x = x * 0x7FEB352D
  x = x ^ (x >> 15)
  x = x * 0x846CA68B
  x = x ^ (x >> 16)
  return ((x >> 8).cast(dtypes.float32) + 0.5) * (1.0 / (1 << 24))

ARGMAX_ROW = 4096   # a row's length is padded to a multiple of this for its argmax

def _argmax_rows(x: Tensor) -> Tensor:
  """(B,) int32 index of each row's largest value (the first of equals); one row as a 1-D argmax (tinygrad's kernels for a
  (1, n) argmax were four instead of three, a slower reduction among them: Youtu-LLM-2B decode -3% on the H100). The row is
  padded with -inf to a multiple of ARGMAX_ROW: Youtu-LLM-2B's and GLM-4.7-Flash's vocabularies (2^8 x 501, 2^8 x 605) left
  the heuristics 64 threads a row, each reading ~2,000 logits in turn (49-81 us of a step on the H100, where
  DeepSeek-V2-Lite's 2^12 x 25 took 9-10)."""
  if pad := -x.shape[-1] % ARGMAX_ROW: x = x.pad(((0, 0), (0, pad)), value=float("-inf"))
  return (x[0].argmax(-1, keepdim=True) if x.shape[0] == 1 else x.argmax(-1)).cast(dtypes.int32)

class Sampler:
  """Persistent device state of the sampler, a row per sequence slot of the model (so TinyJit captures it once): the
  parameters, the RNG counter and the penalty window of each."""

  def __init__(self, vocab_size: int, device: str, slots: int = 1):
    self.vocab_size, self.device, self.slots = vocab_size, device, slots
    self.params = [Params()] * slots
    f = lambda v, dt=dtypes.float32: device_full((slots,), v, dt, device)
    self.temperature, self.top_p, self.min_p, self.penalty = f(0.0), f(1.0), f(0.0), f(1.0)
    self.top_k, self.seed, self.counter, self.window = f(0, dtypes.uint32), f(0, dtypes.uint32), f(0, dtypes.uint32), f(0, dtypes.int32)
    self.recent = device_full((slots, RING), -1, dtypes.int32, device)
    D = 1 << RADIX   # _kth_key's candidate digits of each pass, highest first
    self.digits = [to_device(np.arange(D, dtype=np.uint32) << np.uint32(s), device) for s in range(32 - RADIX, -1, -RADIX)]

  @property
  def structure(self) -> tuple[bool, ...]: return self.params[0].structure

  def configure(self, params: Params, history: list[int], slot: int = 0) -> None:
    """Set a slot's parameters and penalty window (the last repeat_last_n tokens of history) before its generation; the
    other slots' rows are left as they are (their counters and windows move on on the device)."""
    self.params[slot] = params
    recent = np.full(RING, -1, np.int32)
    if params.repeat_last_n and history:
      tail = history[-params.repeat_last_n:]
      recent[RING - len(tail):] = tail
    upload_rows([(self.temperature, [params.temperature]), (self.top_p, [params.top_p]), (self.min_p, [params.min_p]),
                 (self.penalty, [params.repeat_penalty]), (self.top_k, [params.top_k]), (self.seed, [params.seed & 0xFFFFFFFF]),
                 (self.counter, [0]), (self.window, [params.repeat_last_n]), (self.recent, recent)], slot)

  def sample(self, logits: Tensor, into: Tensor, slots: Tensor | None = None, structure: tuple[bool, ...] | None = None) -> Tensor:
    """(B, vocab) float32 logits of B rows -> their token ids (B,) int32, written into `into` (a realized int32 buffer of
    B) and returned; row b samples with the state of slot slots[b] (an int32 (B,) tensor; None: B = 1, slot 0), whose RNG
    counter and penalty window move on in place. `structure`: which stages run (merged(); default slot 0's)."""
    greedy, penalize, top_k, top_p, min_p = structure or self.structure
    B, n = logits.shape
    if slots is None:   # one row, slot 0: its state sliced, no gather
      if B != 1: raise ValueError(f"sample: {B} rows need their slots")
      hit, row = Tensor.arange(self.slots).reshape(1, -1) == 0, lambda t: t[0:1]
    else:
      hit = slots.reshape(B, 1) == Tensor.arange(self.slots).reshape(1, -1)  # (B, slots): row b is slot s
      row = lambda t: hit.where(t.reshape(1, -1), 0).sum(1) if t.ndim == 1 else (hit.unsqueeze(-1).where(t.unsqueeze(0), 0)).sum(1)
    if penalize:  # llama.cpp: divide positive logits, multiply negative ones, for tokens in each row's window
      recent, window = row(self.recent), row(self.window)                                     # (B, RING), (B,)
      live = Tensor.arange(RING).reshape(1, RING) >= (RING - window).reshape(B, 1)
      recent = live.where(recent, -1)
      seen = (Tensor.arange(n).reshape(1, n, 1) == recent.reshape(B, 1, RING)).any(-1)   # (B, n)
      penalty = row(self.penalty).reshape(B, 1)
      logits = seen.where((logits > 0).where(logits / penalty, logits * penalty), logits)
    argmax = _argmax_rows(logits)
    if greedy: tok = argmax
    else:
      keep = Tensor.ones(B, n, dtype=dtypes.bool, device=self.device)
      if top_k:
        keys, k = _order_key(logits), row(self.top_k).reshape(B, 1, 1)
        k = (k == 0).where(n, k.minimum(n))                                                     # 0: off
        keep = keep & (keys >= _kth_key(keys, k, self.digits))
      if top_p or min_p:
        probs = keep.where(logits, float("-inf")).softmax(-1)
        if top_p:
          keys, p = _order_key(probs), row(self.top_p).reshape(B, 1, 1)
          keep = keep & ((keys >= _kth_key(keys, p, self.digits, probs)) | (p[:, 0] >= 1.0))
        if min_p: keep = keep & (probs >= probs.max(-1, keepdim=True) * row(self.min_p).reshape(B, 1))
      temperature, counter = row(self.temperature), row(self.counter)
      gumbel = -(-_uniform(counter, row(self.seed), n).log()).log()
      drawn = _argmax_rows(keep.where(logits / temperature.maximum(1e-6).reshape(B, 1), float("-inf")) + gumbel)
      tok = (temperature > 0).where(drawn, argmax)                                              # temperature 0: greedy
    tok = into.assign(tok)
    any_hit = hit.any(0)                                                                        # (slots,): a row of the step
    updates = [] if greedy else [self.counter.assign(self.counter + any_hit.cast(dtypes.uint32))]
    if penalize:  # the slot's window shifted by its row's token (rows of one slot carry the same token: max picks it)
      shifted = row(self.recent)[:, 1:].cat(tok.reshape(B, 1), dim=1)                           # (B, RING)
      moved = hit.unsqueeze(-1).where(shifted.unsqueeze(1), -2**31).max(0)                      # (slots, RING)
      updates.append(self.recent.assign(any_hit.reshape(-1, 1).where(moved, self.recent)))
    Tensor.realize(tok, *updates)
    return tok
