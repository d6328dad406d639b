#!/usr/bin/env python3
"""Decode-time measurements of the deepseek2 blocks, built exactly as apps/mla.py and apps/model.py build them.

  BEAM=0 python bench_block.py [count] --model M [--rounds R] [--json] [--only stack,decode] [--mask N]

M is a GGUF path or a synthetic preset (apps.synth: glm-4.7-flash, deepseek-v2-lite, youtu-llm-2b and their -tiny
variants); every shape and quant type comes from the file's metadata. One decode token (T=1, start_pos bound to --pos
through the model's own symbolic variable, so the kernels are the decode kernels) is captured in a TinyJit per target:

  block   a full block (MoE where the model has MoE)  \\  over a bank of --bank distinct blocks of the file, chained
  ffn     its feed-forward half (norm, router, experts) > in one step, so the weights a step reads are not the ones
  attn    its attention half (norm, MLA, output)      /   the last step left in the caches; reported per block
  stack   the decode-stack proxy: every block of the model, wired as Transformer.hidden() wires them
  decode  the real decode step (embedding, stack, head, on-device sampling, one host read), as generate() runs it
  fill    (only when asked for) one prefill chunk of the model's shortest prefill chunk length at --pos, as generate() runs every
          chunk but the last (Transformer._fill); reported per chunk, tok/s = its tokens / its time
  prompt  (only when asked for) the same chunk as generate() runs a prompt's last one: with the head on its last row and the
          sampling of the first token (Transformer._prompt), read back as there
  upstream  (only when asked for) upstream tinygrad.llm's own decode of the same file: its Transformer.generate(), one
          next() per token as its --benchmark times it (a second copy of the weights on the device)

Each step is timed as wall time around one JIT replay and a device synchronize (the decode step's sync is its .item()).
A loop of `count` steps gives median, p10/p90, IQR and MAD; --rounds R repeats the loop and the headline is the median
of the round medians. Per step it also reports kernels (captured by the JIT; graph launches apart, since one graph
launch counts as one kernel in GlobalCounters), bytes of weights read (the packed tensors the step touches, k of
n_expert routed experts a token, those its tokens reach for a batched step; see active_weight_bytes) next to tinygrad's
own estimate (GlobalCounters.global_mem), the KV-cache bytes, and the bandwidth floor: those bytes / the device's
measured copy bandwidth (or --bandwidth).
`--markdown run.json ...` turns saved --json outputs into rows for OPTIMIZATION_JOURNAL.md.

For search2.py: SPLIT_POINTS (apps.mla's named fusion boundaries), setup(argv), cache_key(), graph_key(mask) and
bench_mask(mask, iters, beam) -> ms, which re-traces the loaded blocks with a new split mask (no weight reload).
"""
from __future__ import annotations
import argparse, functools, gc, json, math, subprocess, sys, time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

ROOT = Path(__file__).resolve().parent
if str(ROOT) not in sys.path: sys.path.insert(0, str(ROOT))
import apps  # noqa: F401  (the pinned, patched tinygrad first on sys.path)
import numpy as np
from tinygrad import Tensor, TinyJit, Device, GlobalCounters, dtypes
from tinygrad.helpers import Context, getenv, BEAM, NOOPT, JIT, disable_gc
from tinygrad.uop.ops import Ops
from apps.gguf import GGUFError
from apps.mla import SPLIT_POINTS, DEFAULT_SPLIT_MASK, Block
from apps.model import Transformer
from apps.readback import upload
from apps import KERNEL_PATHS
from apps.quantized import QuantizedLinear, QuantizedExpertWeights, QuantizedEmbedding
from apps.packed import PackedTensor
from apps import synth, sampling

TARGETS = ("block", "ffn", "attn", "stack", "decode", "fill", "prompt", "mixed", "upstream")
DEFAULT_TARGETS = ("block", "ffn", "attn", "stack", "decode")
PARTS = ("attention", "router", "experts", "shared_expert", "dense_ffn", "norms", "embedding", "output", "sampling", "other")

# ---------------------------------------------------------------- statistics

def percentile(xs: Sequence[float], q: float) -> float:
  """q-th percentile (0..100) with linear interpolation between order statistics (numpy's default method)."""
  s = sorted(xs)
  if not s: raise ValueError("percentile of an empty sample")
  pos = (len(s) - 1) * q / 100.0
  lo = math.floor(pos)
  hi = min(lo + 1, len(s) - 1)
  return s[lo] + (s[hi] - s[lo]) * (pos - lo)

def median(xs: Sequence[float]) -> float: return percentile(xs, 50.0)

def summarize(xs: Sequence[float]) -> dict[str, float]:
  """Robust summary of one loop: median, p10/p90, IQR (p75 - p25), MAD (median absolute deviation from the median)."""
  med = median(xs)
  return {"n": len(xs), "median": med, "mean": sum(xs) / len(xs), "min": min(xs), "max": max(xs), "p10": percentile(xs, 10),
          "p90": percentile(xs, 90), "iqr": percentile(xs, 75) - percentile(xs, 25), "mad": median([abs(x - med) for x in xs])}

def combine_rounds(rounds: Sequence[Sequence[float]]) -> dict:
  """Statistics of R loops: each round's summary, and the headline median of the round medians (robust to one bad round)."""
  per = [summarize(r) for r in rounds]
  meds = [p["median"] for p in per]
  return {"median": median(meds), "round_medians": meds, "rounds": per, "spread": (max(meds) - min(meds)) / median(meds) if median(meds) else 0.0}

# ---------------------------------------------------------------- the model

def resolve_model(model: str, mix: str = "release") -> Path:
  """A GGUF path, or the cached file of a synthetic preset (generated on first use)."""
  p = Path(model).expanduser()
  if p.is_file(): return p
  if model in synth.PRESETS: return synth.generate(model, mix, progress=sys.stderr.isatty())
  raise SystemExit(f"bench: unknown model '{model}': not a file, and not a preset ({', '.join(synth.PRESETS)})")

def load_model(path: Path, max_context: int, split_mask: int, verbose: bool = False, kernels: str = "hand", slots: int = 1,
               cache_type: str = "f32") -> Transformer:
  try: return Transformer.from_gguf(path, max_context=max_context, split_mask=split_mask, verbose=verbose, kernels=kernels, slots=slots,
                                    cache_type=cache_type)
  except GGUFError as e: raise SystemExit(f"bench: {e}")

def set_split_mask(model: Transformer, mask: int) -> None:
  """Block.split_mask is read at trace time: a fresh TinyJit after this re-traces with the new boundaries, same weights."""
  if not 0 <= mask < 1 << len(SPLIT_POINTS): raise ValueError(f"split mask {mask} is outside 0..{(1 << len(SPLIT_POINTS)) - 1}")
  for b in model.blocks: b.split_mask = mask

def mask_names(mask: int) -> str: return "+".join(n for i, n in enumerate(SPLIT_POINTS) if mask >> i & 1) or "none"

# ---------------------------------------------------------------- bytes a decode token reads

@dataclass(frozen=True)
class WeightRef:
  block: int          # block index, -1 for model-level tensors
  name: str           # GGUF name stem (attn_q_b, ffn_down_exps, token_embd, ...)
  part: str           # one of PARTS
  half: str           # attn | ffn (the two residual halves of a block) | model
  tensors: tuple      # the device tensors holding it (packed parts)
  nbytes: int         # device bytes of the whole tensor
  fraction: float     # share of it one decode token reads (k / n_expert for routed experts, one row of the embedding)
  def share(self, tokens: int) -> float:
    """Share of it `tokens` distinct tokens read: a row of the embedding each; of routed experts those any token chose,
    expected under uniform routing (each token k distinct of n: 1 - (1 - k/n)^tokens of them); else all."""
    if self.name.endswith("_exps"): return 1 - (1 - self.fraction) ** tokens
    return min(1.0, self.fraction * tokens) if self.part == "embedding" else self.fraction
  def reached(self, tokens: int) -> int: return int(round(self.nbytes * self.share(tokens)))

def _tensors_of(v) -> tuple:
  if isinstance(v, QuantizedLinear) or isinstance(v, QuantizedEmbedding): return tuple(v.w.part_list())
  if isinstance(v, QuantizedExpertWeights): return tuple(t for g in v.groups for t in g.part_list())
  if isinstance(v, PackedTensor): return tuple(v.part_list())
  if isinstance(v, Tensor): return (v,)
  if isinstance(v, tuple): return tuple(t for x in v for t in _tensors_of(x))  # an unstacked (gate, up) pair
  return ()

def part_of(name: str) -> str:
  if "norm" in name: return "norms"
  if name.startswith("attn_"): return "attention"
  if name in ("ffn_gate_inp", "exp_probs_b"): return "router"
  if name.endswith("_exps"): return "experts"
  if name.endswith("_shexp"): return "shared_expert"
  if name.startswith("ffn_"): return "dense_ffn"
  return "other"

def block_weights(b: Block) -> list[WeightRef]:
  """Every weight tensor of a block with its model part and the share of it a decode token reads."""
  out = []
  for name, v in sorted(vars(b).items()):
    if not (ts := _tensors_of(v)): continue
    frac = b.cfg.n_expert_used / b.cfg.n_expert if name.endswith("_exps") else 1.0  # batched attn_k_b / attn_v_b read every head
    out.append(WeightRef(b.i, name, part_of(name), "attn" if name.startswith("attn") else "ffn", ts, sum(t.nbytes() for t in ts), frac))
  return out

def model_weights(m: Transformer) -> list[WeightRef]:
  refs = [r for b in m.blocks for r in block_weights(b)]
  for name, part, frac in (("token_embd", "embedding", 1 / m.cfg.vocab_size), ("output_norm", "norms", 1.0), ("output", "output", 1.0)):
    ts = _tensors_of(getattr(m, name))
    refs.append(WeightRef(-1, name, part, "model", ts, sum(t.nbytes() for t in ts), frac))
  return refs

def active_weight_bytes(obj: Transformer | Sequence[Block], halves: Sequence[str] = ("attn", "ffn", "model"), whole: bool = False,
                        tokens: int = 1) -> dict[str, int]:
  """Bytes of weights one decode token reads, per model part and in total: every tensor it touches whole, except the k of
  n_expert routed experts and the one embedding row. Takes a Transformer (blocks, embedding, head) or a list of blocks.
  whole: every tensor whole (a prefill chunk: its tokens route to nearly every expert). tokens: what a batched step of that
  many distinct tokens reads (WeightRef.reached: the routed experts any of them chose, expected under uniform routing)."""
  refs = model_weights(obj) if isinstance(obj, Transformer) else [r for b in obj for r in block_weights(b)]
  out = {p: 0 for p in PARTS}
  for r in refs:
    if r.half in halves: out[r.part] += r.nbytes if whole else r.reached(tokens)
  out = {k: v for k, v in out.items() if v}
  out["total"] = sum(out.values())
  return out

def cache_bytes(m: Transformer, n_blocks: int, pos: int, tokens: int = 1) -> int:
  """KV-cache bytes that `tokens` tokens at pos.. read (pos + tokens rows) and write (tokens rows) in n_blocks blocks."""
  row = (m.cfg.kv_lora_rank + m.cfg.qk_rope) * m.caches[0].dtype.itemsize
  return n_blocks * (pos + 2 * tokens) * row

# ---------------------------------------------------------------- the steps under test

def attn_half(b: Block, x: Tensor, cache: Tensor, pos, cos: Tensor, sin: Tensor, tables: tuple | None = None, base=0) -> Tensor:
  """The first residual half of Block.__call__: x + MLA(attn_norm(x))."""
  return b.attention(x, cache, pos, cos, sin, tables, base)

def ffn_half(b: Block, h: Tensor) -> Tensor:
  """The second residual half of Block.__call__: h + FFN(ffn_norm(h))."""
  return b.feed_forward(h)

@dataclass
class Step:
  target: str
  fn: Callable                    # the TinyJit
  args: Callable[[int], tuple]    # iteration -> arguments
  sync: Callable                  # output -> None, waits for the device
  n_blocks: int                   # blocks per step (the bank size, or the whole stack)
  weights: dict[str, int]         # active_weight_bytes of the step
  cache: int                      # KV-cache bytes of the step
  per: str                        # what the headline is per: "block", "token", "chunk" (of `tokens` prompt tokens) or "step" (of `tokens` rows)
  tokens: int = 1                 # tokens per step

class Bench:
  """A loaded model and the decode steps built on it. Steps are fresh TinyJits over the same weights."""
  def __init__(self, model: Transformer, pos: int, bank: int, n_inputs: int = 8, seed: int = 0, rows: int = 1):
    if not 0 <= pos < model.max_context: raise SystemExit(f"bench: --pos {pos} is outside the context 0..{model.max_context - 1}")
    if not 1 <= rows <= model.slots: raise SystemExit(f"bench: {rows} rows need a model of as many slots (it has {model.slots})")
    self.m, self.pos, self.rows = model, pos, rows
    kind = [b for b in model.blocks if b.moe] or model.blocks
    self.bank = kind[:max(1, bank)]
    self.v_pos = model.start_pos.bind(pos)  # the model's own start_pos variable: the same symbolic kernels as its decode
    rng = np.random.default_rng(seed)
    # distinct inputs, rotated: each step routes to other experts, as consecutive tokens do
    self.xs = [Tensor(rng.standard_normal((1, model.cfg.dim), dtype=np.float32), device=model.device).realize() for _ in range(n_inputs)]
    self.dev = model.device

  def distinct_tokens(self) -> None:
    """Each slot's last token a different one, as a server's sequences have: rows of one token (at one position, over
    empty caches) are one row repeated, which a MoE model routes to the same k experts, so a batched step would read a
    fraction of the experts that sequences of their own read."""
    upload(self.m.slot_tokens, np.random.default_rng(2).choice(self.m.cfg.vocab_size, self.m.slots, replace=False).tolist())

  def step(self, target: str) -> Step:
    m = self.m
    sync_dev = lambda out: Device[self.dev].synchronize()
    xargs = lambda i: (self.xs[i % len(self.xs)], self.v_pos)
    if target in ("block", "ffn", "attn"):
      bank = self.bank
      def part(x: Tensor, pos) -> Tensor:
        args = m.rope_args(pos, 1)
        for b in bank:
          cache = m.caches[b.i]
          if target == "block": x = b(x, cache, *args)
          elif target == "attn": x = attn_half(b, x, cache, *args)
          else: x = ffn_half(b, x)
        return x.realize()
      halves = {"block": ("attn", "ffn"), "attn": ("attn",), "ffn": ("ffn",)}[target]
      return Step(target, TinyJit(part), xargs, sync_dev, len(bank), active_weight_bytes(bank, halves),
                  cache_bytes(m, len(bank), self.pos) if target != "ffn" else 0, "block")
    if target == "stack":
      def stack(x: Tensor, pos) -> Tensor:
        args = m.rope_args(pos, 1)
        for b, cache in zip(m.blocks, m.caches): x = b(x, cache, *args)
        return x.realize()
      return Step(target, TinyJit(stack), xargs, sync_dev, len(m.blocks), active_weight_bytes(m.blocks),
                  cache_bytes(m, len(m.blocks), self.pos), "token")
    if target == "decode" and self.rows > 1:
      # a batched step (Transformer.step) of `rows` sequences, slot b's at pos, greedy: what the server runs for as many requests
      B = self.rows
      self.distinct_tokens()
      for b in range(B): m.sampler.configure(sampling.Params(), [], b)
      row_vars = m.place_rows([self.pos] * B, list(range(B)))
      step = TinyJit(functools.partial(m._step_rows, B, sampling.Params().structure))
      return Step(target, step, lambda i: row_vars, sync_dev, len(m.blocks), active_weight_bytes(m, tokens=B),
                  B * cache_bytes(m, len(m.blocks), self.pos), "step", B)
    if target == "decode":
      m.sampler.configure(sampling.Params(), [])  # greedy, as the default generate()
      upload(m.token, [1])
      decode = TinyJit(functools.partial(m._decode, sampling.Params().structure))  # what generate() replays per token, token read back as there
      return Step(target, decode, lambda i: (self.v_pos,), lambda out: m.token.item(), len(m.blocks), active_weight_bytes(m),
                  cache_bytes(m, len(m.blocks), self.pos), "token")
    if target == "mixed":
      # a batched step of `rows` sequences (each at pos) with a prompt's chunk of the shortest chunk length (its tokens at pos
      # of slot `rows`) as further rows (Transformer.launch(slots, prompt)): the server's turn while a prompt arrives
      B, T = self.rows, m.prefill_chunks[-1]
      if B >= m.slots: raise SystemExit(f"bench: a mixed step of {B} rows needs a model of {B + 1} slots (it has {m.slots})")
      if self.pos + T > m.max_context: raise SystemExit(f"bench: a prefill chunk of {T} at --pos {self.pos} overflows the context of {m.max_context}")
      for b in range(B): m.sampler.configure(sampling.Params(), [], b)
      self.distinct_tokens()
      buf = Tensor(np.random.default_rng(1).integers(0, m.cfg.vocab_size, m.max_context, dtype=np.int32), device=self.dev).realize()
      args = (buf, m.start_pos.bind(self.pos), m._v_len[T].bind(T), m._v_slot.bind(B), *m.place_rows([self.pos] * B, list(range(B)), B))
      step = TinyJit(functools.partial(m._step_mixed, B, False, sampling.Params().structure))
      return Step(target, step, lambda i: args, sync_dev, len(m.blocks), active_weight_bytes(m, tokens=B + T),
                  (B + 1) * cache_bytes(m, len(m.blocks), self.pos, T), "step", B + T)
    if target in ("fill", "prompt"):
      # one prefill chunk as generate() runs every chunk but the last (fill) or the last (prompt): the shortest chunk length's
      # tokens placed at pos (pos <= max_context - T), latents into the caches, the stack's last row out (fill) or the token
      # sampled from its logits (prompt); the sequence's earlier rows are whatever the caches hold (the time does not depend on them)
      T = m.prefill_chunks[-1]
      if self.pos + T > m.max_context: raise SystemExit(f"bench: a prefill chunk of {T} at --pos {self.pos} overflows the context of {m.max_context}")
      self.fill_ids = np.random.default_rng(1).integers(0, m.cfg.vocab_size, m.max_context, dtype=np.int32)  # padded as generate()'s
      buf = Tensor(self.fill_ids, device=self.dev).realize()
      pos, n = m.start_pos.bind(self.pos), m._v_len[T].bind(T)
      if target == "prompt": m.sampler.configure(sampling.Params(), [])  # greedy, as the default generate()
      fn, sync = (m._fill, sync_dev) if target == "fill" else (functools.partial(m._prompt, sampling.Params().structure), lambda out: m.token.item())
      return Step(target, TinyJit(fn), lambda i: (buf, pos, n), sync, len(m.blocks),
                  active_weight_bytes(m, whole=True), cache_bytes(m, len(m.blocks), self.pos, T), "chunk", T)
    raise ValueError(f"unknown target '{target}' (choose from {', '.join(TARGETS)})")

def upstream_step(path: Path, ref: Transformer, pos: int) -> Step:
  """tinygrad.llm's decode of the same file (weights packed, dequantized in each kernel as upstream does), for the baseline."""
  from tinygrad.llm.model import Transformer as UpstreamTransformer
  um, _ = UpstreamTransformer.from_gguf(Tensor(path), max_context=ref.max_context)
  gen = um.generate([int(t) % ref.cfg.vocab_size for t in range(1, pos + 1)] or [1])
  def decode() -> int: return next(gen)
  decode.jit = um.rollout_jit
  return Step("upstream", decode, lambda i: (), lambda out: None, len(ref.blocks), active_weight_bytes(ref),
              cache_bytes(ref, len(ref.blocks), pos), "token")

def jit_of(step: Step) -> TinyJit: return getattr(step.fn, "jit", step.fn)

def warm(step: Step, beam: int | None = None, extra: int = 2) -> None:
  """Eager run (never beamed: its kernels are not the JIT's), capture at BEAM=beam (default: the BEAM setting), a few replays."""
  beam = BEAM.value if beam is None else beam
  with Context(BEAM=0): step.sync(step.fn(*step.args(0)))
  with Context(BEAM=beam): step.sync(step.fn(*step.args(1)))
  for i in range(extra): step.sync(step.fn(*step.args(2 + i)))

def time_step(step: Step, count: int, rounds: int = 1) -> list[list[float]]:
  """Seconds per step: `rounds` loops of `count` replays, each timed around the call and its device sync."""
  out = []
  for _ in range(rounds):
    ts = []
    for i in range(count):
      a = step.args(i)
      t0 = time.perf_counter()
      step.sync(step.fn(*a))
      ts.append(time.perf_counter() - t0)
    out.append(ts)
  return out

def host_and_pipelined(step: Step, count: int) -> dict[str, float]:
  """Where a step's time goes: `host_ms`, the median time of the call alone (the JIT replay's Python and driver calls
  up to the graph launch, no sync), and `pipelined_ms`, the time per step of `count` calls issued back to back with
  one sync at the end (the device's own time per step when the host keeps ahead of it, else the host's)."""
  hs = []
  out = None
  for i in range(count):
    a = step.args(i)
    t0 = time.perf_counter()
    out = step.fn(*a)
    hs.append(time.perf_counter() - t0)
    step.sync(out)
  # a mean over the loop, so no collector pass inside it: one gen-2 pass over the captured graphs takes milliseconds
  gc.collect()
  with disable_gc():
    t0 = time.perf_counter()
    for i in range(count): out = step.fn(*step.args(i))
    step.sync(out)
    pipelined = (time.perf_counter() - t0) / count
  return {"host_ms": float(np.median(hs)) * 1e3, "pipelined_ms": pipelined * 1e3}

def program_calls(jit: TinyJit) -> list:
  """The captured calls with graphs expanded: one per kernel (or copy), in order."""
  calls = []
  for c in jit.captured.linear.src:
    if c.src[0].op is Ops.CUSTOM_FUNCTION and c.src[0].arg == "graph": calls.extend(c.src[0].src[0].src)
    else: calls.append(c)
  return calls

def kernel_counts(jit: TinyJit) -> dict[str, int]:
  """From the capture: kernels (programs, graphs expanded), launches (graph launches + kernels outside graphs + copies), graphs."""
  kernels = launches = graphs = copies = 0
  for call in jit.captured.linear.src:
    ast = call.src[0]
    launches += 1
    if ast.op is Ops.CUSTOM_FUNCTION and ast.arg == "graph":
      graphs += 1
      kernels += sum(1 for c in ast.src[0].src if c.src[0].op is Ops.PROGRAM)
      copies += sum(1 for c in ast.src[0].src if c.src[0].op is Ops.COPY)
    elif ast.op is Ops.PROGRAM: kernels += 1
    elif ast.op is Ops.COPY: copies += 1
  return {"kernels": kernels, "launches": launches, "graphs": graphs, "copies": copies}

def counters(step: Step) -> dict[str, int]:
  """tinygrad's counters over one replay: kernel_count (a graph launch counts 1), global_mem and global_ops (its estimates)."""
  a = step.args(0)
  GlobalCounters.reset()
  step.sync(step.fn(*a))
  return {"counter_kernels": GlobalCounters.kernel_count, "est_bytes": int(GlobalCounters.global_mem), "est_ops": int(GlobalCounters.global_ops)}

def measure(step: Step, count: int, rounds: int, beam: int | None = None) -> dict:
  warm(step, beam)
  res = combine_rounds(time_step(step, count, rounds))
  res.update(kernel_counts(jit_of(step)), **counters(step))
  if step.target != "upstream": res.update(host_and_pipelined(step, count))
  res.update(target=step.target, per=step.per, n_blocks=step.n_blocks, weight_bytes=step.weights["total"], weight_parts=step.weights,
             cache_bytes=step.cache)
  res["ms"] = res["median"] * 1e3
  res["tokens"] = step.tokens
  if step.per == "block": res["ms_per_block"] = res["ms"] / step.n_blocks
  else: res["tok_s"] = step.tokens * 1e3 / res["ms"]
  return res

# ---------------------------------------------------------------- device bandwidth

def _copy_kernel(n4: int):
  """out = a + 1 over n4 float4s, one per thread (wide loads and stores: what a device copy runs at)."""
  from apps.kernels import SourceKernel, Param
  body = f"""  int i = GID_X * 256 + LID_X;
  if (i < {n4}) {{ float4 v = ((const GLOBAL float4*)a)[i]; ((GLOBAL float4*)out)[i] = FLOAT4(v.x + 1.0f, v.y + 1.0f, v.z + 1.0f, v.w + 1.0f); }}"""
  return SourceKernel(f"copy_{n4}", (Param("out", dtypes.float32, True), Param("a", dtypes.float32)), body, (-(-n4 // 256), 1, 1), (256, 1, 1))

def copy_bandwidth(device: str, mib: int, count: int = 10) -> float:
  """Device copy bandwidth in bytes/s, counting bytes read plus written: 4 chained copies of a `mib` MiB buffer per step
  (a hand-written float4 copy where the device compiles source kernels; tinygrad's elementwise kernel elsewhere, which on
  the H100 reaches ~55% of it)."""
  from apps.kernels import language_of, program
  n = mib * 2**20 // 4
  a = Tensor.ones(n, device=device).contiguous().realize()
  fxn = program(_copy_kernel(n // 4), device) if language_of(device) and n % 4 == 0 else None
  def copies(a: Tensor) -> Tensor:
    for _ in range(4): a = Tensor.empty(n, device=device).custom_kernel(a, fxn=fxn)[0] if fxn else (a + 1.0).contiguous()
    return a.realize()
  s = Step("copy", TinyJit(copies), lambda i: (a,), lambda out: Device[device].synchronize(), 0, {"total": 0}, 0, "step")
  warm(s)
  t = median(time_step(s, count)[0])
  return 4 * 2 * n * 4 / t

def default_copy_mib(device: str) -> int: return 64 if device.split(":")[0] in ("CPU", "PYTHON", "NULL") else 1024

# ---------------------------------------------------------------- header

def git_rev() -> str:
  try: return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=5).stdout.strip() or "-"
  except (OSError, subprocess.SubprocessError): return "-"

def header(m: Transformer | None, path: Path | None, **extra) -> dict:
  dev = Device[Device.DEFAULT if m is None else m.device]
  ren = dev.renderer
  h = {"device": dev.device, "renderer": type(ren).__name__, "arch": getattr(ren, "arch", None) or getattr(dev, "arch", None),
       "tinygrad_series": apps.SERIES, "git": git_rev(), "BEAM": BEAM.value, "JITBEAM": getenv("JITBEAM", BEAM.value),
       "NOOPT": NOOPT.value, "JIT": JIT.value, "python": sys.version.split()[0]}
  if m is not None:
    h.update(model=path.name if path else None, n_layer=m.cfg.n_layer, dim=m.cfg.dim, n_expert=m.cfg.n_expert, n_expert_used=m.cfg.n_expert_used,
             act_dtype=str(m.act_dtype), cache_dtype=str(m.caches[0].dtype), max_context=m.max_context,
             split_mask=m.blocks[0].split_mask, split_names=mask_names(m.blocks[0].split_mask))
  h.update(extra)
  return h

def header_lines(h: dict) -> list[str]:
  lines = [f"device {h['device']} ({h['renderer']}{', ' + str(h['arch']) if h.get('arch') else ''})  tinygrad series {h['tinygrad_series']}"
           f"  git {h['git']}  BEAM={h['BEAM']} JITBEAM={h['JITBEAM']} NOOPT={h['NOOPT']} JIT={h['JIT']}"]
  if "model" in h:
    lines.append(f"model {h['model']}  {h['n_layer']} blocks, dim {h['dim']}, experts {h['n_expert_used']}/{h['n_expert']}  act {h['act_dtype']}"
                 f"  cache {h['cache_dtype']}  split mask {h['split_mask']} ({h['split_names']})")
  if "count" in h:
    lines.append(f"pos {h['pos']}  count {h['count']} x rounds {h['rounds']}  bank {h['bank']}  copy bandwidth {h['bandwidth_GBps']:.1f} GB/s"
                 f" ({h['bandwidth_source']})")
  return lines

def table(results: dict[str, dict], bw: float) -> list[str]:
  mb = lambda b: f"{b / 1e6:9.2f}"
  out = [f"{'target':8s} {'per':>9s} {'median':>10s} {'p10':>9s} {'p90':>9s} {'IQR':>8s} {'MAD':>8s} {'spread':>6s} {'kernels':>7s} {'launch':>6s}"
         f" {'weights MB':>10s} {'est MB':>9s} {'cache MB':>9s} {'floor ms':>9s} {'of floor':>8s}  tok/s"]
  for t, r in results.items():
    n = r["n_blocks"] if r["per"] == "block" else 1
    med, p10, p90 = (r["median"] * 1e3 / n, percentile([x["p10"] for x in r["rounds"]], 50) * 1e3 / n,
                     percentile([x["p90"] for x in r["rounds"]], 50) * 1e3 / n)
    iqr, mad = (median([x["iqr"] for x in r["rounds"]]) * 1e3 / n, median([x["mad"] for x in r["rounds"]]) * 1e3 / n)
    floor = (r["weight_bytes"] + r["cache_bytes"]) / n / bw * 1e3
    per = f"block/{r['n_blocks']}" if r["per"] == "block" else f"chunk/{r['tokens']}" if r["per"] == "chunk" else "token"
    out.append(f"{t:8s} {per:>9s} {med:7.3f} ms {p10:9.3f} {p90:9.3f} {iqr:8.3f} {mad:8.3f} {100 * r['spread']:5.1f}% {r['kernels'] // n:7d}"
               f" {r['launches'] // n if n == 1 else '-':>6} {mb(r['weight_bytes'] / n):>10s} {mb(r['est_bytes'] / n)} {mb(r['cache_bytes'] / n)}"
               f" {floor:9.3f} {100 * floor / med:7.1f}%" + (f"  {r.get('tokens', 1) * 1e3 / med:.1f}" if r["per"] != "block" else ""))
  return out

def markdown(runs: Sequence[dict]) -> list[str]:
  """Journal rows (one per run and target) from bench_block --json outputs."""
  out = ["| model | device | series | mask | target | ms | p10-p90 | spread | tok/s | kernels/launches | weights MB | floor ms | of floor |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
  for run in runs:
    h = run["header"]
    for t, r in run["results"].items():
      n = r["n_blocks"] if r["per"] == "block" else 1
      p10, p90 = (median([x[k] for x in r["rounds"]]) * 1e3 / n for k in ("p10", "p90"))
      ms, floor = r["ms"] / n, r["floor_ms"] / n
      label = f"{t} (per block of {n})" if r["per"] == "block" else t
      tok_s = f"{r['tok_s']:.1f}" if "tok_s" in r else "-"
      launches = r["launches"] if n == 1 else "-"
      out.append(f"| {h['model'].split('-seed')[0]} | {h['device']} {h.get('arch') or ''} | {h['tinygrad_series'][:8]} | {h['split_mask']} |"
                 f" {label} | {ms:.3f} | {p10:.3f}-{p90:.3f} | {100 * r['spread']:.1f}% | {tok_s} | {r['kernels'] // n}/{launches} |"
                 f" {r['weight_bytes'] / n / 1e6:.2f} | {floor:.3f} | {100 * floor / ms:.1f}% |")
  return out

# ---------------------------------------------------------------- search2 interface

@dataclass
class _Session:
  model_arg: str | None = None
  mix: str = "release"
  target: str = "stack"
  pos: int = 128
  bank: int = 8
  max_context: int = 4096
  kernels: str = "hand"
  path: Path | None = None
  model: Transformer | None = None
  bench: Bench | None = None
  calls: list = field(default_factory=list)

_S = _Session()

def _session_parser() -> argparse.ArgumentParser:
  ap = argparse.ArgumentParser(prog="bench_block (search2 module options)", add_help=False)
  ap.add_argument("--model", default=None, help="GGUF path or preset (default: glm-4.7-flash on a GPU, its -tiny variant on CPU)")
  ap.add_argument("--mix", default="release")
  ap.add_argument("--target", default="stack", choices=DEFAULT_TARGETS)
  ap.add_argument("--pos", type=int, default=128)
  ap.add_argument("--bank", type=int, default=8)
  ap.add_argument("--max-context", type=int, default=4096)
  ap.add_argument("--kernels", default="hand", choices=KERNEL_PATHS)
  return ap

def setup(argv: Sequence[str] = ()) -> None:
  """Configure what bench_mask measures (model, target, pos, bank, kernels); loading happens on first use."""
  a = _session_parser().parse_args(list(argv))
  new = (a.model, a.mix, a.target, a.pos, a.bank, a.max_context, a.kernels)
  if (_S.model_arg, _S.mix, _S.target, _S.pos, _S.bank, _S.max_context, _S.kernels) != new or _S.model is None:
    _S.model_arg, _S.mix, _S.target, _S.pos, _S.bank, _S.max_context, _S.kernels = new
    _S.model = _S.bench = None

def default_model() -> str:
  return "glm-4.7-flash-tiny" if Device.DEFAULT.split(":")[0] in ("CPU", "PYTHON", "NULL") else "glm-4.7-flash"

def _ensure() -> Bench:
  if _S.bench is None:
    _S.path = resolve_model(_S.model_arg or default_model(), _S.mix)
    _S.model = load_model(_S.path, max(_S.max_context, _S.pos + 1), DEFAULT_SPLIT_MASK, kernels=_S.kernels)
    _S.bench = Bench(_S.model, _S.pos, _S.bank)
  return _S.bench

def cache_key() -> str:
  """What a bench_mask number depends on besides (mask, beam): search2 keys its on-disk results by it."""
  b = _ensure()
  return f"{_S.path.name}|{_S.target}|pos{_S.pos}|bank{len(b.bank)}|{b.dev}|{_S.kernels}|{apps.SERIES}|{git_rev()}"

def bench_mask(mask: int, iters: int = 20, beam: int = 0) -> float:
  """Median ms of one step of the configured target with the given split mask and BEAM level; the loaded weights are reused."""
  b = _ensure()
  set_split_mask(b.m, mask)
  step = b.step(_S.target)
  warm(step, beam)
  ms = median(time_step(step, iters)[0]) * 1e3
  _S.calls.append((mask, beam, ms))
  return ms

def graph_key(mask: int) -> str:
  """Identity of the kernels a mask gives: the kernel ASTs (before optimization), in order, of one decode token through the
  first block of each kind (dense, MoE) chained; only scheduled, nothing compiled or run. Equal keys: equal programs."""
  import hashlib
  b = _ensure()
  set_split_mask(b.m, mask)
  kinds = [next(blk for blk in b.m.blocks if blk.moe == moe) for moe in (False, True) if any(blk.moe == moe for blk in b.m.blocks)]
  x = b.xs[0]
  args = b.m.rope_args(b.v_pos, 1)
  for blk in kinds: x = blk(x, b.m.caches[blk.i], *args)
  linear, _ = x.linear_with_vars()
  return hashlib.sha256(b"".join(c.src[0].key for c in linear.src)).hexdigest()[:16]

def kernel_graph(mask: int, target: str | None = None) -> list[str]:
  """Names of the kernels one step of the target runs with this split mask, in order (for tests and reports)."""
  b = _ensure()
  set_split_mask(b.m, mask)
  step = b.step(target or _S.target)
  warm(step, extra=0)
  return [c.src[0].arg.name if c.src[0].op is Ops.PROGRAM else str(c.src[0].arg) for c in program_calls(jit_of(step))]

# ---------------------------------------------------------------- CLI

def main(argv: Sequence[str] | None = None) -> int:
  ap = argparse.ArgumentParser(prog="bench_block.py", description=__doc__.split("\n\n")[0],
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("count", nargs="?", type=int, default=20, help="timed steps per round (default 20)")
  ap.add_argument("--model", default=None, help="GGUF path or synthetic preset (default: glm-4.7-flash on a GPU, its -tiny variant on CPU)")
  ap.add_argument("--mix", default="release", help=f"quant mix of a synthetic preset ({', '.join(synth.MIXES)})")
  ap.add_argument("--rounds", type=int, default=3, help="loops of `count` steps; the headline is the median of round medians")
  ap.add_argument("--only", default=",".join(DEFAULT_TARGETS), help=f"comma list of targets ({', '.join(TARGETS)})")
  ap.add_argument("--pos", type=int, default=128, help="start_pos of the decode token (cache rows attended: pos + 1), or of the fill / prompt chunk")
  ap.add_argument("--bank", type=int, default=8, help="distinct blocks chained per step for block/ffn/attn")
  ap.add_argument("--mask", type=int, default=DEFAULT_SPLIT_MASK, help=f"split mask over {', '.join(SPLIT_POINTS)} (bit i = point i)")
  ap.add_argument("--max-context", type=int, default=4096, help="KV cache length (as the app's default)")
  ap.add_argument("--bandwidth", type=float, default=None, help="device copy bandwidth in GB/s (default: measured)")
  ap.add_argument("--copy-mib", type=int, default=None, help="buffer size of the bandwidth measurement")
  ap.add_argument("--kernels", default="hand", choices=KERNEL_PATHS, help="hand-written kernels where the device has them (default), "
                  "or tinygrad's generated kernels only")
  ap.add_argument("--json", action="store_true", help="one JSON object on stdout instead of the table")
  ap.add_argument("--markdown", nargs="+", metavar="JSON", help="print journal table rows from saved --json outputs, measure nothing")
  a = ap.parse_args(argv)
  if a.markdown:
    try: runs = [json.loads(Path(p).read_text()) for p in a.markdown]
    except (OSError, json.JSONDecodeError) as e: raise SystemExit(f"bench: cannot read {e}")
    print("\n".join(markdown(runs)))
    return 0
  targets = [t.strip() for t in a.only.split(",") if t.strip()]
  for t in targets:
    if t not in TARGETS: ap.error(f"unknown target '{t}' (choose from {', '.join(TARGETS)})")
  if a.count < 1 or a.rounds < 1: ap.error("count and --rounds must be >= 1")
  if not 0 <= a.mask < 1 << len(SPLIT_POINTS): ap.error(f"--mask must be in 0..{(1 << len(SPLIT_POINTS)) - 1}")
  a.model = a.model or default_model()
  path = resolve_model(a.model, a.mix)
  t0 = time.perf_counter()
  m = load_model(path, max(a.max_context, a.pos + 1), a.mask, verbose=not a.json and sys.stderr.isatty(), kernels=a.kernels)
  load_s = time.perf_counter() - t0
  if a.bandwidth: bw, bw_src = a.bandwidth * 1e9, "given"
  else: bw, bw_src = copy_bandwidth(m.device, a.copy_mib or default_copy_mib(m.device)), "measured"
  bench = Bench(m, a.pos, a.bank)
  h = header(m, path, pos=a.pos, count=a.count, rounds=a.rounds, bank=len(bench.bank), bandwidth_GBps=bw / 1e9, bandwidth_source=bw_src,
             load_s=round(load_s, 2))
  if not a.json: print("\n".join(header_lines(h)), flush=True)
  results = {}
  for t in targets:
    results[t] = r = measure(upstream_step(path, m, a.pos) if t == "upstream" else bench.step(t), a.count, a.rounds)
    r["floor_ms"] = (r["weight_bytes"] + r["cache_bytes"]) / bw * 1e3
    if not a.json: print(table({t: r}, bw)[-1] if len(results) > 1 else "\n".join(table({t: r}, bw)), flush=True)
  if a.json: print(json.dumps({"header": h, "results": results}, default=str))
  else:
    for t in ("stack", "decode", "upstream"):
      if t in results:
        r = results[t]
        mb = (r["weight_bytes"] + r["cache_bytes"]) / 1e6
        print(f"{t}: {r['ms']:.3f} ms/token, {r['tok_s']:.1f} tok/s; floor {r['floor_ms']:.3f} ms ({mb:.1f} MB"
              f" at {bw / 1e9:.1f} GB/s), {r['kernels']} kernels in {r['launches']} launches per token" +
              (f"; host {r['host_ms']:.3f} ms of it, {r['pipelined_ms']:.3f} ms/token pipelined" if "host_ms" in r else ""))
    for t in ("fill", "prompt"):
      if t in results:
        r = results[t]
        print(f"{t}: {r['ms']:.3f} ms per prefill chunk of {r['tokens']} tokens at pos {a.pos}, {r['tok_s']:.1f} tok/s;"
              f" {r['kernels']} kernels in {r['launches']} launches; all weights once: {r['floor_ms']:.3f} ms")
  return 0

if __name__ == "__main__": sys.exit(main())
