"""The deepseek2-family transformer: token embedding, MLA + MoE blocks (apps/mla.py), output head, KV caches,
chunked prefill and TinyJit decode with on-device sampling.

  model = Transformer.from_gguf("model.gguf", max_context=4096)   # or "fit": the longest context the device holds
  model.logits([1, 2, 3])                  # float32 (T, vocab) numpy logits of a fresh context
  for tok in model.generate(ids, 32): ...  # greedy (or sampled) continuation; one host read per token

  model = Transformer.from_gguf("model.gguf", slots=8)    # eight sequences, each its own max_context of latent cache
  first = model.start(3, ids, params)       # prefill a prompt into slot 3 (its cached prefix reused): its first token
  model.step([3, 5])                        # one batched decode step of slots 3 and 5: their next tokens
"""
from __future__ import annotations
import ctypes, functools, os, sys, time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Callable, Iterator, Sequence
import numpy as np
from tinygrad import Tensor, TinyJit, UOp, Device, GlobalCounters, dtypes
from apps.gguf import GGUFFile
from apps.mla import Block, Config, Rows, DEFAULT_SPLIT_MASK, expands_latents, flash_prefills
from apps import KERNEL_PATHS, CACHE_TYPES
from apps.kernels import Fusions, KernelModules, has_mma
from apps.quantized import QuantizedEmbedding, QuantizedExpertWeights, QuantizedLinear, load_tensor, block_product_bytes, int8_tensor_cores
from apps import sampling
from apps.readback import Readback, device_full, to_device, trim, upload, upload_many
from apps import captures

class ContextOverflow(ValueError):
  """A prompt plus generation that does not fit in max_context."""

@dataclass
class Step:
  """A launched batched decode step (Transformer.launch): its slots and the queued read of their tokens; `first`: the slot
  whose prompt's last chunk the step took as rows, whose first token it samples (its last entry of slots, read at the
  entry after the step's padded rows), or None."""
  slots: list[int]
  read: Readback
  first: int | None = None
  rows: int = 0   # the step's rows, padding included

@dataclass
class Prompt:
  """A prompt being prefilled into a slot (Transformer.begin), chunk by chunk (fill_chunk, or rows of launch's steps): its
  ids, its sampler's parameters and how many of its tokens are in the slot's cache or queued into it."""
  slot: int
  ids: list[int]
  params: sampling.Params
  done: int

MAX_SLOTS = 64      # sequences of one model at most (batched decode steps of up to that many rows)
# Prefill chunk lengths (Transformer.set_prefill_chunks). One sequence on the tensor cores' hand-written path whose chunks
# of 2048 attend in the flash form takes them: its flash attention expands the context's rows a quarter as often as with
# chunks of 512 (H200: prompts of 4k / 16k tokens 1.14-1.33x / 1.32-1.65x faster, OPTIMIZATION_JOURNAL.md), and a model
# whose chunks of 512 attend over the latent rows (GLM-4.7-Flash) attends in the flash form's fewer FLOPs. A model of
# several sequences (a server) keeps 512, a chunk it runs between the others' decode steps.
PREFILL_CHUNKS = (512, 128, 32)
LONG_PREFILL_CHUNKS = (2048, *PREFILL_CHUNKS)
FIT_RESERVE = 2**30  # device memory the steps' activations and scratch may take beyond what fit_context counts

def free_bytes(device: str) -> int | None:
  """Device memory still free, where the backend tells: CUDA (the driver), Metal (the recommended working set less what
  tinygrad holds), the CPU (the host's available memory); None elsewhere."""
  base = device.split(":")[0]
  try:
    if base == "CUDA":
      from tinygrad.runtime.autogen import cuda
      cuda.cuCtxSetCurrent(Device[device].context)
      free, total = ctypes.c_uint64(), ctypes.c_uint64()
      return free.value if cuda.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)) == 0 else None
    if base == "METAL": return int(Device[device].sysdevice.recommendedMaxWorkingSetSize()) - GlobalCounters.mem_used
  except (AttributeError, TypeError, ctypes.ArgumentError): return None   # a backend build without the query: the default
  if base == "CPU":
    try:
      with open("/proc/meminfo") as f: return next(int(ln.split()[1]) * 1024 for ln in f if ln.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError): pass   # no /proc (macOS): the default
  return None

def fit_context(cfg: Config, cache_itemsize: int, free: int | None, chunk: int, slots: int = 1, scores: bool = True) -> int:
  """The longest context of each of `slots` sequences, up to the model's trained length, whose memory fits in `free` bytes
  (with FIT_RESERVE and a tenth kept back): every block's cache row of every slot, the rope tables' row and the prompt
  buffer's entry a token, and what a prefill chunk's attention holds per key: with `scores` (the tensor-op attention of the
  generated path; the tensor cores' kernels hold none) its scores (chunk x heads x fp32, twice) and, where it expands the
  latent rows, their keys and values (heads x (qk_nope + rope + v_head): fp32 tensors with `scores`; without, the flash
  kernel's buffers, an fp16 cache's fp16 and an fp32 cache's fp16 pairs or fp32 rows: the cache's bytes an element). 4096
  where the free memory is unknown."""
  if free is None: return min(4096, cfg.context_length)
  per_token = slots * cfg.n_layer * (cfg.kv_lora_rank + cfg.qk_rope) * cache_itemsize + 4 * cfg.qk_rope + 4 + 2 * 4 * chunk * cfg.n_head * scores
  if expands_latents(cfg, chunk): per_token += (4 if scores else cache_itemsize) * cfg.n_head * (cfg.qk_nope + cfg.qk_rope + cfg.v_head)
  n = (int(free * 0.9) - FIT_RESERVE) // per_token // 256 * 256
  if n < 256: raise ValueError(f"{free / 2**20:.0f} MiB free on the device after the weights: no room for a context (pass a smaller --max-context)")
  return min(n, cfg.context_length)

def rope_tables(cfg: Config, n: int) -> tuple[np.ndarray, np.ndarray]:
  """cos and sin (n, qk_rope / 2) fp32 of every position's angles (float64 angles: positions up to 2e5 times a frequency of
  1 need them), in spans on host threads (numpy's trig lets go of the GIL: a 200k context's tables take 0.5 s on one core)."""
  freqs, mag = cfg.rope_freqs()[None, :], cfg.rope_mag
  cos, sin = np.empty((n, freqs.shape[1]), np.float32), np.empty((n, freqs.shape[1]), np.float32)
  def span(a: int) -> None:
    ang = np.arange(a, min(a + 8192, n), dtype=np.float64)[:, None] * freqs
    cos[a:a + len(ang)], sin[a:a + len(ang)] = np.cos(ang) * mag, np.sin(ang) * mag
  with ThreadPoolExecutor(min(16, os.cpu_count() or 1)) as ex: list(ex.map(span, range(0, n, 8192)))
  return cos, sin

class Transformer:
  def __init__(self, gf: GGUFFile, max_context: int | str | None = None, device: str | None = None, split_mask: int = DEFAULT_SPLIT_MASK,
               prefill_chunks: Sequence[int] | None = None, progress: Callable[[int, int], None] | None = None, kernels: str = "hand",
               fusions: Fusions = Fusions(), kernel_modules: KernelModules | None = None, capture_dir: Path | None = None,
               cache_type: str = "f32", slots: int = 1):
    if cache_type not in CACHE_TYPES: raise ValueError(f"cache type {cache_type!r}: choose one of {', '.join(CACHE_TYPES)}")
    if not isinstance(slots, int) or not 1 <= slots <= MAX_SLOTS: raise ValueError(f"slots {slots!r}: need 1 to {MAX_SLOTS} sequences")
    self.cfg = cfg = Config.from_gguf(gf)
    self.path, self.split_mask = Path(gf.path), split_mask
    self.device = Device.canonicalize(device)
    tensor_cores = kernels == "hand" and has_mma(self.device)
    if prefill_chunks is None:
      prefill_chunks = LONG_PREFILL_CHUNKS if tensor_cores and slots == 1 and flash_prefills(cfg, LONG_PREFILL_CHUNKS[0]) else PREFILL_CHUNKS
    # Activations and latents stay float32 on every device: decode reads weights, not activations, so fp16 would save
    # almost nothing, while one fp16 rounding per layer moves logits of a 27-block random model by ~1e-2 (measured, and
    # the same as llama.cpp's default f16 KV cache on that file). Weights are dequantized in registers either way.
    self.act_dtype = dtypes.float32
    self.cache_dtype = {"f32": dtypes.float32, "f16": dtypes.float16}[cache_type]   # the latent cache (apps.CACHE_TYPES)
    self.token_embd = QuantizedEmbedding.from_gguf(gf, "token_embd.weight", self.device)
    self.output_norm = load_tensor(gf, "output_norm.weight", self.device)
    # tied embeddings: no output.weight means the head reads the same packed token_embd (one copy on the device)
    self.output = QuantizedLinear.from_gguf(gf, "output.weight", self.device) if "output.weight" in gf.tensors else QuantizedLinear(self.token_embd.w)
    self.blocks: list[Block] = []
    for i in range(cfg.n_layer):
      self.blocks.append(Block(gf, i, cfg, self.device, self.cache_dtype, split_mask, fusions))
      if progress: progress(i + 1, cfg.n_layer)
    trim(self.device)  # the staging memory the load grew goes back (before "fit" counts what is free)
    # "fit": the longest context the memory left after the weights holds (fit_context), else max_context or 4096
    if max_context == "fit":
      free = free_bytes(self.device)
      # the generated path's chunk products on the int8 tensor cores make a block's weights as int8 quants each chunk
      if free is not None and kernels == "generated" and int8_tensor_cores(self.device): free -= block_product_bytes(gf)
      self.max_context = fit_context(cfg, self.cache_dtype.itemsize, free, max(prefill_chunks), slots, scores=not tensor_cores)
    else: self.max_context = min(max_context or 4096, cfg.context_length)
    # the latent cache of every block: `slots` sequences of max_context rows each, one after the other
    self.slots = slots
    # the model's state, made without a schedule (readback.device_full): a second process's first step replays its
    # captured steps and would otherwise schedule for the first time here
    zeros = lambda *shape, dtype=dtypes.int32: device_full(shape, 0, dtype, self.device)
    self.caches = [zeros(slots * self.max_context, cfg.kv_lora_rank + cfg.qk_rope, dtype=self.cache_dtype) for _ in self.blocks]
    cos, sin = rope_tables(cfg, self.max_context)
    self.rope_cos, self.rope_sin = to_device(cos, self.device), to_device(sin, self.device)
    self.expanded: tuple[Tensor, Tensor] | None = None   # the flash prefill's keys and values (_size_expanded)
    self._pos_zero = zeros(3)
    # the last sampled id lives on the device: the decode step reads it and overwrites it (a JIT input would be copied)
    self.token = zeros(1)
    self._tokens = zeros(self.max_context)  # a prompt, padded
    # batched decode (step()): each slot's last sampled id, and a step's rows: their slots and [position, first cache row]
    # (a mixed step's rows are followed by a prompt's chunk, whose slot and sampled token take one entry more)
    self.slot_tokens, self._row_slots, self._row_pos, self._row_out = zeros(slots), zeros(slots + 1), zeros(slots, 2), zeros(slots + 1)
    self._read: Readback | None = None  # made on the first generate()
    self.slot_cached: list[list[int]] = [[] for _ in range(slots)]  # per slot: tokens whose latents are in its cache rows, in order
    self.slot_last: list[int | None] = [None] * slots                # per slot: its last sampled token (not in the cache yet)
    self._v_pos = UOp.variable("start_pos", 0, self.max_context - 1)
    self._v_slot = UOp.variable("slot", 0, slots - 1) if slots > 1 else None
    self._v_rows: dict[int, tuple[tuple[UOp, ...], tuple[UOp, ...]]] = {}   # per step size: the rows' position and slot variables
    self._pending, self._launched = [0] * slots, 0                    # per slot, and in all: steps launched and not collected
    self._fresh: set[int] = set()          # slots whose first token a launched step samples (their slot_last not known yet)
    self._buffered: Prompt | None = None   # the prompt whose ids _tokens holds
    self._reads = [Readback(self._row_out), Readback(self._row_out)]
    self.sampler = sampling.Sampler(cfg.vocab_size, self.device, slots)
    # the captured steps, kept in capture_dir across processes (apps/captures.py): ("step", sampler structure, the last prefill
    # chunk's length or 0: decode), ("fill", chunk length), feed()'s ("logits", chunk length or 0) and the batched decode
    # steps' ("rows", rows, the rows' merged sampler structure) and ("mixed", rows, chunk length, the prompt's last chunk or
    # not, the merged structure)
    self.captures = captures.Captures(self, capture_dir, self._capture_key)
    self.kernels, self.fusions, self.kernel_modules = kernels, fusions, kernel_modules or KernelModules()
    self.set_prefill_chunks(*prefill_chunks)
    self.set_kernels(kernels)

  def set_kernels(self, kernels: str) -> None:
    """Which kernels compute the model (apps.KERNEL_PATHS): "hand", the hand-written kernels where the device
    compiles them (CUDA, Metal; the default), or "generated", tinygrad's own code generator for every kernel (heuristics,
    or BEAM), as on a device without hand-written kernels. The captures are redone."""
    if kernels not in KERNEL_PATHS: raise ValueError(f"kernels {kernels!r}: choose one of {', '.join(KERNEL_PATHS)}")
    self.kernels = kernels
    self._size_expanded()
    self._configure_layers()

  def set_fusions(self, fusions: Fusions) -> None:
    """The fusions the model makes from now on (apps.kernels.Fusions; the captures are redone). stack_q decides how a
    direct attn_q loads (stacked with kv_a or not): a model with one (q_lora_rank 0) keeps the stack_q it was loaded with
    (ValueError: load one with the other, Transformer.from_gguf(..., fusions=...))."""
    if fusions.stack_q != self.fusions.stack_q and self.cfg.q_lora_rank == 0:
      raise ValueError(f"stack_q={fusions.stack_q}: this model's direct attn_q loaded with stack_q={self.fusions.stack_q}; "
                       "load the model with the fusions instead (Transformer.from_gguf(..., fusions=...))")
    self.fusions = fusions
    self._configure_layers()

  def set_kernel_modules(self, kernel_modules: KernelModules) -> None:
    """The modules the hand-written kernels are built from (apps.kernels.KernelModules: another version of one, or no
    prefill GEMM); the captures are redone."""
    self.kernel_modules = kernel_modules
    self._configure_layers()

  def _configure_layers(self) -> None:
    """The model's kernel path, fusions and kernel modules on every block and layer (they read them as they build their
    kernels); the captures are redone."""
    layers = [self.output] + [layer for b in self.blocks for layer in b.layers()]
    for x in [*self.blocks, *layers]: x.kernels, x.fusions, x.kernel_modules = self.kernels, self.fusions, self.kernel_modules
    self.token_embd.fusions = self.fusions
    self.drop_captures()

  def set_prefill_chunks(self, *lengths: int) -> None:
    """Prefill prompts in chunks of these lengths: the longest that the tokens left fill, and the rest, shorter than all of
    them, as one chunk of the shortest (padded to it: a chunk's kernels run its length's bound). The long chunk reads each
    expert's weights once per 512 tokens (DeepSeek-V2-Lite +18% on a 512-token prompt), the short ones keep a short prompt
    from paying for 512 or 128 (on a CPU a 16-token prompt's chunk of 32 takes a third of the time of one of 128:
    OPTIMIZATION_JOURNAL.md). Each length has its own captured steps, made when a prompt first needs it; the captures are
    redone."""
    if not lengths or min(lengths) < 1: raise ValueError(f"prefill chunks {lengths}: need lengths of at least 1 token")
    self.prefill_chunks = tuple(sorted({min(n, self.max_context) for n in lengths}, reverse=True))
    self._v_len = {n: UOp.variable(f"n_tokens_{n}", 1, n) for n in self.prefill_chunks}
    self._size_expanded()
    self.drop_captures()

  def _size_expanded(self) -> None:
    """The buffers of a long chunk's keys and values expanded per head, a row a position, where a chunk of the hand-written
    path on the tensor cores takes the flash kernel (apps/mla.py flash_prefills) and its kernels take the attention's shape
    (flash_supports: else the chunk attends over the latent rows), else none; in the kernel's form for the
    cache (flash_form: an fp16 cache's rows expand to fp16 ones, an fp32 cache's to fp16 (hi, lo) pairs, twice as wide,
    where a stage of them fits, else to fp32 ones). Zeroed once, so the rows past a chunk that a padded query reaches are
    finite; fit_context counts them (the cache's bytes an element: fp16 rows 2, the pairs and fp32 rows 4)."""
    cfg, mod = self.cfg, self.kernel_modules.mla_attention
    if not (self.kernels == "hand" and has_mma(self.device) and any(flash_prefills(cfg, c) for c in self.prefill_chunks) and
            mod.flash_supports(cfg.n_head, cfg.qk_nope, cfg.qk_rope, cfg.v_head, cfg.kv_lora_rank, self.cache_dtype)): self.expanded = None
    elif self.expanded is None:
      dqk, dv = cfg.qk_nope + cfg.qk_rope, cfg.v_head
      form = mod.flash_form(dqk, dv, self.cache_dtype)
      dtype, wide = (self.cache_dtype, 1) if form != "split" else (dtypes.float16, 2)
      self.expanded = tuple(device_full((self.max_context, cfg.n_head, wide * w), 0, dtype, self.device) for w in (dqk, dv))

  def _capture_key(self) -> str:
    modules = tuple((f.name, getattr(m, "__file__", None), Path(m.__file__).read_bytes() if getattr(m, "__file__", None) else None)
                    for f in fields(self.kernel_modules) if (m := getattr(self.kernel_modules, f.name)) is not None)
    settings = (self.max_context, self.slots, self.prefill_chunks, self.kernels, self.fusions, self.split_mask, self.act_dtype, self.cache_dtype,
                modules)
    return captures.model_key(self.path, settings, self.device)

  @staticmethod
  def from_gguf(path: str | Path, max_context: int | str | None = None, device: str | None = None, **kw) -> Transformer:
    gf = GGUFFile(path)
    try:
      gf.prefetch()
      if kw.pop("verbose", False):
        t0 = time.perf_counter()
        def progress(i, n):
          print(f"\rloading {Path(path).name}: block {i}/{n} ({time.perf_counter() - t0:.1f} s)", end="" if i < n else "\n",
                file=sys.stderr, flush=True)
        kw["progress"] = progress
      return Transformer(gf, max_context, device, **kw)
    finally: gf.close()

  # ---- the network
  def hidden(self, tokens: Tensor, start_pos: int | UOp, slot: int | UOp | None = None) -> Tensor:
    """The residual stream (T, dim) after the last block for tokens (T,) placed at start_pos.. of slot `slot` (None: 0)
    (their latents go into the caches); the output norm is fused into the head (`head`)."""
    x = self.token_embd(tokens).float()
    args = self.rope_args(start_pos, tokens.shape[0], slot)
    for block, cache in zip(self.blocks, self.caches): x = block(x, cache, *args)
    return x

  def rope_args(self, start_pos: int | UOp, T, slot: int | UOp | None = None) -> tuple:
    """What every block takes besides x and its cache: start_pos, the rope rows of the T positions, the whole tables with
    [start_pos, the slot's first cache row, T] in a device buffer (for the attention kernels, which read them on the device)
    and the expanded keys' and values' buffers (or None), and that first row."""
    cos, sin = self.rope_cos[start_pos:start_pos + T], self.rope_sin[start_pos:start_pos + T]
    base = 0 if slot is None else slot * self.max_context
    pos = (self._pos_zero + Tensor.stack(*(Tensor(v, device=self.device) for v in (start_pos, base, T))).cast(dtypes.int32)).contiguous()
    return start_pos, cos, sin, (self.rope_cos, self.rope_sin, pos, self.expanded), base

  def head(self, x: Tensor) -> Tensor:
    """Logits (T, vocab) fp32 of residual-stream rows x (T, dim): output(output_norm(x))."""
    return self.output(x, norm=(self.output_norm, self.cfg.norm_eps)).float()

  # A prefill chunk's captures take the whole token buffer and slice the chunk out themselves: a symbolic slice made by
  # the caller is rebuilt by tinygrad's symbolic rewrites on every replay, 2-3 ms of host time before the first kernel
  # launches (Youtu-LLM-2B's 512-token prefill is 13% faster without it, OPTIMIZATION_JOURNAL.md); inside the capture it
  # is traced once.
  def _fill(self, buf: Tensor, start_pos: int | UOp, length: int | UOp, *slot: UOp) -> Tensor:
    """Prefill the chunk buf[start_pos:start_pos + length] (of slot `slot`: a model of several), whose logits nobody needs:
    only its latents matter."""
    return self.hidden(buf[start_pos:start_pos + length], start_pos, *slot)[-1:].realize()

  def _prompt(self, structure: tuple, buf: Tensor, start_pos: int | UOp, length: int | UOp, *slot: UOp) -> Tensor:
    """Prefill a prompt's last chunk buf[start_pos:start_pos + length] and sample the token after it into self.token (and
    into the slot's entry of slot_tokens: a model of several)."""
    h = self.hidden(buf[start_pos:start_pos + length], start_pos, *slot)[-1:]
    if not slot: return self.sampler.sample(self.head(h), into=self.token, structure=structure)
    s = Tensor(slot[0], device=self.device).cast(dtypes.int32).reshape(1)
    tok = self.sampler.sample(self.head(h), into=self.token, slots=s, structure=structure)
    mine = Tensor.arange(self.slots) == s
    return Tensor.realize(tok, self.slot_tokens.assign(mine.where(tok, self.slot_tokens)))[0]

  def _decode(self, structure: tuple, start_pos: int | UOp) -> Tensor:
    """One decode step: self.token, placed at start_pos (of slot 0), is replaced by the token after it."""
    h = self.hidden(self.token, start_pos, *((0,) if self.slots > 1 else ()))
    return self.sampler.sample(self.head(h), into=self.token, structure=structure)

  def _rows(self, B: int, row_vars: tuple) -> tuple[Tensor, Rows, Tensor, Tensor]:
    """A batched step's B rows: row b continues slot _row_slots[b] from its last token (slot_tokens) at position
    _row_pos[b, 0]. Their tokens, their Rows and their rope rows (cos, sin). row_vars: the rows' positions and slots as
    bound variables (the tensor-op attention slices with them; the hand-written kernel reads _row_pos)."""
    hit = self._row_slots[:B].reshape(B, 1) == Tensor.arange(self.slots).reshape(1, -1)            # (B, slots)
    tokens = hit.where(self.slot_tokens.reshape(1, -1), 0).sum(1).cast(dtypes.int32)
    pos = row_vars[:B] or (0,) * B
    base = tuple(v * self.max_context for v in row_vars[B:]) or (0,) * B
    cos, sin = self.rope_cos[pos[0]:pos[0] + 1].cat(*[self.rope_cos[p:p + 1] for p in pos[1:]]), \
               self.rope_sin[pos[0]:pos[0] + 1].cat(*[self.rope_sin[p:p + 1] for p in pos[1:]])
    return tokens, Rows(pos, base, self._row_pos[:B]), cos, sin

  def _sample_rows(self, h: Tensor, structure: tuple) -> tuple[Tensor, Tensor]:
    """The tokens after the n residual-stream rows h (n, dim), row b sampled with slot _row_slots[b]'s state into
    _row_out[b], and slot_tokens with each slot's new token (rows of one slot carry the same token: max picks it): both
    to realize, the tokens first."""
    n = h.shape[0]
    slots = self._row_slots[:n]
    hit = slots.reshape(n, 1) == Tensor.arange(self.slots).reshape(1, -1)
    tok = self.sampler.sample(self.head(h), into=self._row_out[:n], slots=slots, structure=structure)
    new = hit.where(tok.reshape(n, 1), -1).max(0)
    return tok, self.slot_tokens.assign(hit.any(0).where(new, self.slot_tokens))

  def _step_rows(self, B: int, structure: tuple, *row_vars: UOp) -> Tensor:
    """One batched decode step of B sequences (_rows); every row's next token goes into slot_tokens and _row_out[:B]."""
    tokens, rows, cos, sin = self._rows(B, row_vars)
    x = self.token_embd(tokens).float()
    for block, cache in zip(self.blocks, self.caches): x = block(x, cache, 0, cos, sin, (self.rope_cos, self.rope_sin, rows.table), rows=rows)
    return Tensor.realize(*self._sample_rows(x, structure))[0]

  def _step_mixed(self, B: int, last: bool, structure: tuple, buf: Tensor, start_pos: UOp, length: UOp, slot: UOp, *row_vars: UOp) -> Tensor:
    """A batched decode step of B rows (_step_rows) with the prompt chunk buf[start_pos:start_pos + length] of slot `slot`
    as further rows: one pass of the blocks over both (Block.attention's `chunk`). With `last` (the prompt's last chunk)
    its last row's token is sampled too (row B of _row_slots holds the slot: into _row_out[B] and slot_tokens)."""
    tokens, rows, cos, sin = self._rows(B, row_vars)
    chunk = self.rope_args(start_pos, length, slot)
    x = self.token_embd(tokens.cat(buf[start_pos:start_pos + length])).float()
    for block, cache in zip(self.blocks, self.caches):
      x = block(x, cache, 0, cos, sin, (self.rope_cos, self.rope_sin, rows.table), rows=rows, chunk=chunk)
    # the chunk's last row: its token's logits after the last chunk; else realized alone, so the chunk's latents are stored
    if last: return Tensor.realize(*self._sample_rows(x[:B].cat(x[-1:]), structure))[0]
    return Tensor.realize(*self._sample_rows(x[:B], structure), x[-1:])[0]

  @property
  def start_pos(self) -> UOp:
    """The symbolic start position the decode and prefill kernels are traced with (bind it to run them)."""
    return self._v_pos

  def decode_jit(self, params: sampling.Params | None = None, prefill: int = 0) -> TinyJit:
    """The TinyJit generate() replays for sampling params of this structure: the decode step (start_pos only: it reads and
    writes self.token), or with `prefill` (a chunk length) the last prefill chunk (token buffer, start_pos, length)."""
    structure = (params or sampling.Params()).structure
    return self.captures.jit(("step", structure, prefill), functools.partial(self._prompt if prefill else self._decode, structure))

  # ---- bytes of weights, for bandwidth numbers
  @staticmethod
  def _nbytes(w) -> int:
    if isinstance(w, Tensor): return w.nbytes()
    if isinstance(w, QuantizedExpertWeights): return sum(g.nbytes for g in w.groups)
    if isinstance(w, tuple): return sum(Transformer._nbytes(x) for x in w)  # an unstacked (gate, up) pair
    return w.w.nbytes  # QuantizedLinear, QuantizedEmbedding: one PackedTensor

  def weight_bytes(self) -> int:
    """Device bytes of all weights (packed as loaded)."""
    tops = [self.token_embd, self.output_norm] + ([] if self.output.w is self.token_embd.w else [self.output])
    return sum(self._nbytes(w) for w in tops) + sum(self._nbytes(w) for b in self.blocks for w in vars(b).values()
                                                    if isinstance(w, (Tensor, QuantizedLinear, QuantizedExpertWeights, tuple)))

  def active_weight_bytes(self) -> int:
    """Bytes of weights one decode step reads: every dense weight, n_expert_used/n_expert of each routed expert tensor,
    one row of the embedding table (latents in the KV cache are not weights and are not counted)."""
    total = self._nbytes(self.output_norm) + self._nbytes(self.output) + self._nbytes(self.token_embd) // self.cfg.vocab_size
    for b in self.blocks:
      for name, w in vars(b).items():
        if isinstance(w, QuantizedExpertWeights) and name.endswith("_exps"):
          total += self._nbytes(w) * self.cfg.n_expert_used // self.cfg.n_expert
        elif isinstance(w, (Tensor, QuantizedLinear, QuantizedExpertWeights, tuple)): total += self._nbytes(w)
    return total

  # ---- cache bookkeeping
  @property
  def cached(self) -> list[int]:
    """The tokens whose latents are in slot 0's cache rows (generate(), feed(), fill() and logits() run in slot 0)."""
    return self.slot_cached[0]
  @cached.setter
  def cached(self, ids: list[int]) -> None: self.slot_cached[0] = ids

  def reset(self, slot: int = 0) -> None:
    self.slot_cached[slot], self.slot_last[slot] = [], None
    self._fresh.discard(slot)

  def drop_captures(self) -> None:
    """Forget the captured prefill and decode steps: the next calls trace and capture again (after the kernels that layers
    get changed, e.g. an A/B of kernel providers)."""
    self.captures.clear()

  def _check_fits(self, n: int) -> None:
    if n > self.max_context:
      raise ContextOverflow(f"{n} tokens do not fit in the context of {self.max_context} tokens (raise --max-context, up to "
                            f"{self.cfg.context_length} for this model, or shorten the prompt)")

  def _token_buffer(self, ids: list[int], owner: Prompt | None = None) -> Tensor:
    """ids padded to max_context in the model's one token buffer, so every JIT call sees the same input (the chunk is a
    symbolic slice of it); written in queue order, after the prefill that read it last. owner: the prompt they are."""
    padded = np.zeros(self.max_context, np.int32)   # (a context of 200k tokens: a list this long would cost ~10 ms a call)
    padded[:len(ids)] = ids
    upload(self._tokens, padded)
    self._buffered = owner
    return self._tokens

  def _chunks(self, n: int, start: int, longest: Callable[[], int | None] | None = None) -> Iterator[tuple[int, int, int]]:
    """(start, tokens, chunk length) of each prefill chunk of tokens start..n-1: the longest length the tokens left fill,
    at most longest() where given (asked before each chunk), else the shortest."""
    while start < n:
      cap = n - start
      if longest is not None and (bound := longest()) is not None: cap = min(cap, bound)
      length = next((L for L in self.prefill_chunks if L <= cap), self.prefill_chunks[-1])
      yield start, (m := min(length, n - start)), length
      start += m

  def _prefill(self, buf: Tensor, n: int, start: int, params: sampling.Params, slot: int = 0,
               longest: Callable[[], int | None] | None = None) -> Iterator[tuple[int, int, int]]:
    """Queue the prefill of tokens start..n-1 of buf (_token_buffer) into slot `slot` chunk by chunk (_chunks), each chunk's
    (start, tokens, length) yielded once queued: its captured fill step, the last chunk's step samples the first token into
    self.token (and the slot's slot_tokens entry)."""
    which = (self._v_slot.bind(slot),) if self.slots > 1 else ()
    for start, m, L in self._chunks(n, start, longest):
      pos, length = self._v_pos.bind(start), self._v_len[L].bind(m)
      (self.captures.jit(("fill", L), self._fill) if start + m < n else self.decode_jit(params, prefill=L))(buf, pos, length, *which)
      yield start, m, L

  def _readback(self) -> Readback:
    if self._read is None: self._read = Readback(self.token)
    return self._read

  # ---- public API
  def feed(self, token_ids: list[int]) -> np.ndarray:
    """Append tokens to the cached context; float32 logits (T, vocab) for each of them. A chunk of one token runs the
    decode step's kernels, a longer one its prefill chunk's (the kernels generate() runs), each captured like them."""
    ids = list(token_ids)
    self._check_fits(len(self.cached) + len(ids))
    buf = self._token_buffer(self.cached + ids)
    out = []
    for start, n, L in self._chunks(len(self.cached) + len(ids), len(self.cached)):
      jit, pos = self.captures.jit(("logits", L if n > 1 else 0), self._logits), self._v_pos.bind(start)
      out.append(jit(buf, pos).numpy() if n == 1 else jit(buf, pos, self._v_len[L].bind(n)).numpy()[:n])
    self.cached += ids
    self.captures.save()
    return np.concatenate(out) if out else np.zeros((0, self.cfg.vocab_size), np.float32)

  def fill(self, token_ids: list[int]) -> None:
    """Append tokens to the cached context without their logits: the prefill chunks' fill steps (generate()'s), which
    compute only the latents (a long context's logits cost a (T, vocab) head product nobody reads)."""
    ids = list(token_ids)
    self._check_fits(len(self.cached) + len(ids))
    buf, which = self._token_buffer(self.cached + ids), (self._v_slot.bind(0),) if self.slots > 1 else ()
    for start, m, L in self._chunks(len(self.cached) + len(ids), len(self.cached)):
      self.captures.jit(("fill", L), self._fill)(buf, self._v_pos.bind(start), self._v_len[L].bind(m), *which)
    self.cached += ids
    self.captures.save()

  def _logits(self, buf: Tensor, start_pos: int | UOp, length: int | UOp = 1) -> Tensor:
    """Logits of the chunk buf[start_pos:start_pos + length]; of a symbolic length in the first rows of a (chunk bound,
    vocab) buffer, since a capture returns one shape."""
    logits = self.head(self.hidden(buf[start_pos:start_pos + length], start_pos))
    if isinstance(length, int): return logits.realize()
    rows = Tensor.empty(length.vmax, self.cfg.vocab_size, dtype=dtypes.float32, device=self.device)
    return Tensor(rows.uop.after(rows[:length].uop.store(logits.uop))).realize()

  def logits(self, token_ids: list[int]) -> np.ndarray:
    """float32 logits (T, vocab) of token_ids in a fresh context."""
    self.reset()
    return self.feed(token_ids)

  def generate(self, token_ids: list[int], max_new_tokens: int, params: sampling.Params | None = None,
               stop: Callable[[int], bool] | None = None) -> Iterator[int]:
    """Yield up to max_new_tokens ids continuing token_ids. Latents of a cached prefix are reused (chat turns);
    the prompt is prefilled in chunks; each decode step is one TinyJit replay and one read of the token id, queued one
    step ahead where the device allows (apps/readback.py)."""
    ids = list(token_ids)
    if not ids: raise ValueError("generate needs at least one prompt token")
    self._check_fits(len(ids) + 1)
    params = params or sampling.Params()
    self.sampler.configure(params, ids)
    # reuse the longest cached prefix, but always recompute the last prompt token (its logits start generation)
    keep = 0
    for a, b in zip(ids[:-1], self.cached):
      if a != b: break
      keep += 1
    self.cached = ids[:keep]
    buf, decode = self._token_buffer(ids), self.decode_jit(params)
    for _ in self._prefill(buf, len(ids), keep, params): pass
    self.cached = ids
    read = self._readback()
    read.capture()
    try: yield from self._decode_loop(read, decode, max_new_tokens, stop)
    finally: self.captures.save()  # the steps this generation captured, for the next process (once each)

  # ---- batched decode: several sequences, each in its own slot of the caches
  @property
  def step_sizes(self) -> tuple[int, ...]:
    """The batch sizes step() runs (each its own capture): powers of two up to the slots, and all the slots; a step of
    fewer rows runs the next size up, its extra rows repeating the first row (the same token at the same place: the same
    result written twice)."""
    return tuple(sorted({min(2**i, self.slots) for i in range(MAX_SLOTS.bit_length())}))

  def begin(self, slot: int, token_ids: list[int], params: sampling.Params | None = None) -> Prompt:
    """A prompt for slot `slot`, to prefill chunk by chunk: the longest prefix already in that slot's cache is reused (the
    last prompt token always recomputed), the slot's sampler set. Its chunks run alone (fill_chunk) or as rows of other
    slots' steps (launch); after its last, the slot continues in step()."""
    ids = list(token_ids)
    if not 0 <= slot < self.slots: raise ValueError(f"slot {slot}: the model has {self.slots} slots")
    if not ids: raise ValueError("start needs at least one prompt token")
    if self._pending[slot]: raise ValueError(f"start: slot {slot} has launched steps not collected yet")
    self._check_fits(len(ids) + 1)
    params = params or sampling.Params()
    keep = 0
    for a, b in zip(ids[:-1], self.slot_cached[slot]):
      if a != b: break
      keep += 1
    self.slot_cached[slot], self.slot_last[slot] = ids[:keep], None
    self.sampler.configure(params, ids, slot)
    p = Prompt(slot, ids, params, keep)
    self._token_buffer(ids, p)
    return p

  def _next_chunk(self, prompt: Prompt, longest: Callable[[], int | None] | None) -> tuple[int, bool, tuple]:
    """The prompt's next chunk (_chunks: longest() bounds its length), its ids in _tokens: (its length bound, whether it is
    the prompt's last, its arguments: the token buffer, start position and length bound); the prompt and its slot's cached
    tokens move past it."""
    if prompt.done >= len(prompt.ids): raise ValueError(f"the prompt of slot {prompt.slot} is prefilled already")
    if self._buffered is not prompt: self._token_buffer(prompt.ids, prompt)
    start, m, L = next(self._chunks(len(prompt.ids), prompt.done, longest))
    prompt.done = start + m
    self.slot_cached[prompt.slot] = prompt.ids[:prompt.done]
    return L, prompt.done >= len(prompt.ids), (self._tokens, self._v_pos.bind(start), self._v_len[L].bind(m))

  def fill_chunk(self, prompt: Prompt, longest: Callable[[], int | None] | None = None) -> int | None:
    """Queue the prompt's next chunk alone (_chunks: longest() bounds its length): None, or after its last chunk the first
    generated token (waiting for it)."""
    L, last, args = self._next_chunk(prompt, longest)
    which = (self._v_slot.bind(prompt.slot),) if self.slots > 1 else ()
    (self.decode_jit(prompt.params, prefill=L) if last else self.captures.jit(("fill", L), self._fill))(*args, *which)
    if not last: return None
    read = self._readback()
    read.capture()
    self.slot_last[prompt.slot] = t = read.value()
    self.captures.save()
    return t

  def start(self, slot: int, token_ids: list[int], params: sampling.Params | None = None,
            longest: Callable[[], int | None] | None = None) -> Iterator[int | None]:
    """Prefill a prompt into slot `slot` (begin) one chunk per next() (fill_chunk): None while chunks remain, then the first
    generated token, after which the slot continues in step(). Chunks can go between other slots' steps; longest() (asked
    before each chunk) bounds its length (_chunks)."""
    p = self.begin(slot, token_ids, params)
    while (t := self.fill_chunk(p, longest)) is None: yield None
    yield t

  def step(self, slots: Sequence[int]) -> list[int]:
    """One batched decode step: each slot's last token (from start() or the step before) goes into its cache at the next
    position and the token after it is sampled with the slot's parameters; the new tokens, in the order of `slots`."""
    return self.collect(self.launch(slots))

  def launch(self, slots: Sequence[int], prompt: Prompt | None = None, chunk: int | None = None) -> Step:
    """Queue step(slots) on the device and return at once; collect() gives its tokens. Another launch may come first (a
    step of the same or other slots, queued after this one: the device holds each slot's last token itself), so the
    host reads a step's tokens while the next one runs; start() waits for a slot's steps to be collected.
    With `prompt` (begin) the step takes the prompt's next chunk as further rows (a mixed step: one read of the weights
    for both), of at most `chunk` tokens (default the shortest prefill chunk); after its last chunk the step samples the
    prompt's first token too (the Step's `first`), and the slot may join the next launch at once."""
    slots = list(slots)
    if not slots: raise ValueError("step: no slots")
    if self._launched >= 2: raise ValueError("step: two launched steps are not collected yet")
    if len(set(slots)) != len(slots) or not all(0 <= s < self.slots for s in slots): raise ValueError(f"step: slots {slots} of {self.slots}")
    if prompt is not None and prompt.slot in slots: raise ValueError(f"step: the prompt of slot {prompt.slot} is a row of the step")
    pos = []
    for s in slots:
      if self.slot_last[s] is None and s not in self._fresh: raise ValueError(f"step: slot {s} has no token to continue (start() it first)")
      # a fresh slot's first token is still to be collected: it is the one this step stores, at the prompt's end
      pos.append(len(self.slot_cached[s]) + self._pending[s] - (s in self._fresh))
      self._check_fits(pos[-1] + 1)
    B = next(b for b in self.step_sizes if b >= len(slots))
    rows, pos = slots + [slots[0]] * (B - len(slots)), pos + [pos[0]] * (B - len(slots))
    first = None
    if prompt is None:
      structure = sampling.merged([self.sampler.params[s].structure for s in slots])
      self.captures.jit(("rows", B, structure), functools.partial(self._step_rows, B, structure))(*self.place_rows(pos, rows))
    else:
      L, last, args = self._next_chunk(prompt, lambda: chunk or self.prefill_chunks[-1])
      structure = sampling.merged([self.sampler.params[s].structure for s in slots + [prompt.slot] * last])
      self.captures.jit(("mixed", B, L, last, structure), functools.partial(self._step_mixed, B, last, structure))(
        *args, self._v_slot.bind(prompt.slot), *self.place_rows(pos, rows, prompt.slot))
      if last:
        first = prompt.slot
        self._fresh.add(first)
        slots.append(first)
    self._reads = self._reads[1:] + self._reads[:1]   # two in turn: a step's read is queued before the next step overwrites _row_out
    read = self._reads[0]
    read.capture()
    for s in slots: self._pending[s] += 1
    self._launched += 1
    return Step(slots, read, first, B)

  def place_rows(self, pos: Sequence[int], rows: Sequence[int], chunk_slot: int | None = None) -> tuple[UOp, ...]:
    """Set up a step of len(rows) rows, row b continuing slot rows[b] at position pos[b] (and a mixed step's chunk of slot
    chunk_slot after them): the tables _step_rows reads (_row_slots, _row_pos) uploaded, and its row_vars returned bound:
    none where the hand-written attention reads the table, else each row's position and slot (the tensor ops slice the
    caches with them)."""
    B, pad = len(rows), [0] * (self.slots - len(rows))
    upload_many([(self._row_slots, list(rows) + [chunk_slot or 0] + pad),
                 (self._row_pos, [[p, s * self.max_context] for p, s in zip(pos, rows)] + [[0, 0]] * len(pad))])
    if self.blocks[0].hand_written(self.device): return ()
    if B not in self._v_rows:
      self._v_rows[B] = (tuple(UOp.variable(f"row_pos_{b}", 0, self.max_context - 1) for b in range(B)),
                         tuple(UOp.variable(f"row_slot_{b}", 0, self.slots - 1) for b in range(B)) if self.slots > 1 else ())
    pv, sv = self._v_rows[B]
    return (*[v.bind(p) for v, p in zip(pv, pos)], *[v.bind(s) for v, s in zip(sv, rows)])

  def forget_steps(self) -> None:
    """Forget the launched steps that will not be collected (after a failure): every slot can start again."""
    self._pending, self._launched, self._fresh = [0] * self.slots, 0, set()

  def collect(self, step: Step) -> list[int]:
    """The tokens of a launched step (waiting for it), in the order of its slots; its slots' bookkeeping moves on. Steps
    are collected in the order they were launched."""
    out = step.read.values()[:step.rows + 1]
    out = out[:len(step.slots) - 1] + out[-1:] if step.first is not None else out[:len(step.slots)]
    for s, t in zip(step.slots, out):
      if s == step.first: self._fresh.discard(s)   # its prompt is in the cache already: t is its first token
      else: self.slot_cached[s].append(self.slot_last[s])
      self.slot_last[s], self._pending[s] = t, self._pending[s] - 1
    self._launched -= 1
    self.captures.save()
    return out

  def _decode_loop(self, read: Readback, decode: TinyJit, max_new_tokens: int, stop: Callable[[int], bool] | None) -> Iterator[int]:
    for i in range(max_new_tokens):
      # the step after this token, unless the budget or the context ends here (a stop token is known only once read)
      more = i + 1 < max_new_tokens and len(self.cached) < self.max_context
      # one step ahead where the read is in queue order (apps/readback.py): the device runs the next step while the host
      # waits, yields and detokenizes; if this token stops generation that step is wasted, and harmless (its latent lands
      # past self.cached)
      ahead = more and read.in_queue_order
      if ahead: decode(self._v_pos.bind(len(self.cached)))
      t = read.value()
      if more and not ahead: decode(self._v_pos.bind(len(self.cached)))
      if more: read.capture()
      yield t
      if (stop is not None and stop(t)) or not more: return
      self.cached.append(t)
