"""The one seam between the layers and the kernels: a KernelSpec says what a product must compute, kernel_for picks who
computes it (a registered hand-written provider, else the portable UOp kernel), and run / run_sum launch calls of one
input side by side or summed in one kernel. A spec carries the model's choices: its kernel path, its fusions
(apps.kernels.Fusions: side_by_side and sum are decided here) and the modules the hand-written kernels come from
(apps.kernels.KernelModules); the kernel cache keys on all of them.

Kernels: out[b, (j,) n] = sum over chunks R and the chunk's inner weights of float(x) * w, accumulated in fp32 and stored
in x's dtype. On GPUs (plan_opts) the inner ranges are unrolled (a uint4 load of quant words, nibbles from registers), a
row's chunks are spread over up to 32 threads (coalesced, reduced in shared memory), each thread does 4 rows (x read once
for them) and a workgroup 4 row groups; expert ids are read in the kernel and clamped to [0, n_expert). On the CPU
tinygrad's heuristics choose. Shapes must be concrete: a symbolic batch (prefill chunk) is padded to its bound and sliced.
"""
from __future__ import annotations
import math, weakref
from dataclasses import dataclass, field, replace
from typing import Callable
from apps import KERNEL_PATHS
from apps.gguf import GGMLType
from apps.kernels import Fusions, KernelModules, cached
from tinygrad import Tensor, dtypes, Device, UOp
from tinygrad.dtype import DType
from tinygrad.helpers import prod
from tinygrad.uop.ops import KernelInfo, AxisType, Ops
from tinygrad.codegen.opt import Opt, OptOps
from apps.packed import Format

# ---------------------------------------------------------------- kernels: the dispatch seam

@dataclass(frozen=True)
class KernelSpec:
  """What a kernel must compute. op: 'linear' out (B, N) = x (B, K) @ W (N, K).T;
  'experts' out (B, J, N) = W[sel[b, j]] @ x[b] (x (B, K)) or x[b, j] (x (B, J, K)); 'batched' out (B, E, N) = W[e] @ x[b, e];
  'rows' out (B, K) = W[ids[b]] (or W[b] without ids)."""
  op: str
  fmt: Format
  B: int
  J: int          # experts per token (experts), n_expert (batched), 1 otherwise
  N: int
  K: int
  E: int          # experts in the weight (experts, batched), rows in the table (rows), 1 for linear
  x_per_slot: bool
  has_index: bool
  device: str
  # fused into the kernel (only kernels that say they can do them get such a spec; the layers do the rest in separate ops):
  norm: bool = False        # x -> rms_norm(x) * norm_w (eps below) before the product
  residual: bool = False    # out += residual
  glu: bool = False         # W rows are [gate; up] (2N): out = silu(gate . x) * (up . x)
  mix: bool = False         # experts: out (B, N) = sum_j mix[b, j] * (W[sel[b, j]] . x[b, j])
  per_tile: bool = False    # experts: sel (B,), one expert a row of J entries: out[b, j] = W[sel[b]] . x[b, j] (a tile of a
                            # chunk's entries routed to one expert: each weight serves the tile)
  eps: float = 0.0
  x_dtype: DType = dtypes.float32
  x_stride: int = 0         # elements between x rows (slots); 0: K. Wider rows: the first K are the input
  x_row: int = 0            # per-slot x: elements between x's rows, whose J slots sit x_stride apart (0: J * x_stride);
                            # the heads of q inside a stacked [q; kv_a] output, read in place (the decode matvecs only)
  kernels: str = "hand"     # KERNEL_PATHS: "generated" asks tinygrad's code generator alone (no source, no planned opts)
  fusions: Fusions = Fusions()  # the model's: side_by_side and sum decide run / run_sum, trigger the hand-written source
  modules: KernelModules = field(default_factory=KernelModules)  # the modules the hand-written matvecs and GEMMs come from
  opts: tuple | None = None  # a tinygrad-generated product's opts instead of the heuristics' (a measurement's variants)

  @property
  def fused(self) -> bool: return self.norm or self.residual or self.glu or self.mix or bool(self.x_stride or self.x_row)

# custom_kernel body: (out, x / ids, [sel], [mix], [norm_w], [residual], *parts) -> SINK or PROGRAM. One with an attribute
# x_form = (elements, dtype, body) reads x as what that body makes of it: (out (elements,), x, [norm_w]) -> PROGRAM, run just
# before (with the spec's norm, which it then does: the kernel itself takes no norm_w); x_form_glu, where it has one, makes
# the same from a split SwiGLU product's slices instead of its result (launch)
KernelFn = Callable[..., UOp]
_PROVIDERS: list[Callable[[KernelSpec], KernelFn | None]] = []

def register_kernel(provider: Callable[[KernelSpec], KernelFn | None]) -> None:
  """Add a kernel provider (e.g. hand-written CUDA for Q4_0 decode); it returns a kernel body or None to pass.
  Newer providers are asked first; the portable UOp-DSL kernels serve whatever none of them takes."""
  _PROVIDERS.insert(0, provider)

def kernel_for(spec: KernelSpec) -> KernelFn | None:
  """The one place that decides which kernel serves a given op, type, shape and device. None for a fused spec that no
  kernel does (the layer then runs the same math as separate ops around the plain kernel)."""
  if spec.kernels not in KERNEL_PATHS: raise ValueError(f"kernels {spec.kernels!r}: choose one of {', '.join(KERNEL_PATHS)}")
  providers = _PROVIDERS if spec.kernels == "hand" else []
  for p in providers:
    if (k := p(spec)) is not None: return k
  if not spec.fused: return _portable_kernel(spec)
  # a fusion the portable kernel does, where no provider serves the plain product either (else that one runs, the
  # fusion around it as separate ops)
  plain = replace(spec, residual=False)
  return _portable_kernel(spec) if portable_fuses(spec) and all(p(plain) is None for p in providers) else None

def hand_written(spec: KernelSpec) -> bool:
  """Whether a registered hand-written kernel serves `spec` (on the hand-written path)."""
  return spec.kernels == "hand" and any(p(spec) is not None for p in _PROVIDERS)

def portable_fuses(spec: KernelSpec) -> bool:
  """The fusion the portable kernel does: a decode product's residual, added at the store (an elementwise kernel fewer a
  product). Measured slower, so not done: the same in a prefill chunk's product, and the norm, the glu and the experts'
  mix inside a decode product (journal, 2026-11-27)."""
  return spec.op == "linear" and spec.B <= 4 and spec.residual and not (spec.norm or spec.glu or spec.mix or spec.x_stride)

def _matvec_shape(spec: KernelSpec):
  """The hand-written decode matvec (apps/kernels/matvec.py) shape for `spec`, or None where none serves it."""
  from apps.kernels import language_of
  matvec = spec.modules.matvec
  if spec.op not in ("linear", "experts", "batched") or spec.per_tile or spec.x_dtype != dtypes.float32: return None
  if not matvec.available(spec.device): return None
  # an expert mix whose plain product the GEMM serves (a batched step's routed down): that product, the mix as tensor ops
  if spec.mix and spec.modules.gemm is not None and spec.modules.gemm.provider(replace(spec, mix=False, residual=False)) is not None: return None
  if spec.fmt.type not in matvec.TYPES or spec.fmt.block != matvec.TYPES[spec.fmt.type].block: return None
  shape = matvec.MatvecShape(spec.op, spec.fmt.type, spec.B, spec.J, spec.N, spec.K, spec.E, spec.x_per_slot,
                             spec.norm, spec.residual, spec.glu, spec.mix, spec.x_stride, spec.x_row)
  return shape if matvec.supports(shape, language_of(spec.device)) else None

def _trigger(spec: KernelSpec) -> tuple:
  """The trigger argument of the matvec builders: none where it is on (their default form: one cache entry), else False."""
  return () if spec.fusions.trigger else (False,)

def _source_matvec(spec: KernelSpec) -> KernelFn | None:
  """Hand-written decode matvecs (apps/kernels/matvec.py) on devices that compile CUDA or Metal source."""
  return None if (shape := _matvec_shape(spec)) is None else spec.modules.matvec.kernel(shape, spec.eps, spec.device, *_trigger(spec))
_PROVIDERS.append(_source_matvec)

def _source_cpu(spec: KernelSpec) -> KernelFn | None:
  """The CPU's hand-written Q4_0 product (apps/kernels/cpu.py) of any number of tokens (a decode step's sequences, a
  prompt's chunk): its residual in the store, its per-slot form (slot j's own weights and input, the input's slots x_stride
  apart), and the routed experts' products, an entry (a token's expert) at a time or in tiles of entries an expert; and
  the Q5_K and Q6_K products of any number of tokens (the MoE models' output head and shared experts)."""
  from apps.kernels import cpu
  if base_device(spec.device) != "CPU" or not isinstance(spec.B, int) or spec.norm or spec.glu or spec.mix or spec.x_row or \
     spec.x_dtype != dtypes.float32:
    return None
  if spec.fmt.type in (GGMLType.Q5_K, GGMLType.Q6_K):
    if spec.op != "linear" or spec.x_stride or not cpu.supports(spec.N, spec.K, 256): return None
    return cpu.kernel_k(spec.fmt.type.name.lower(), spec.N, spec.K, spec.residual, spec.device, *((spec.B,) if spec.B > 1 else ()))
  if spec.fmt.type != GGMLType.Q4_0 or not cpu.supports(spec.N, spec.K): return None
  T = (1, spec.x_stride, spec.B) if spec.B > 1 else ()   # one token: one kernel whatever its row's stride (it reads the first K)
  if spec.op == "linear": return cpu.kernel(spec.N, spec.K, spec.residual, spec.device, *T)
  if spec.op == "batched" and spec.J == spec.E and spec.x_per_slot and not spec.residual:
    return cpu.kernel(spec.N, spec.K, False, spec.device, spec.J, spec.x_stride, *T[2:])
  if spec.op != "experts" or spec.residual or spec.x_stride: return None
  if spec.per_tile: return cpu.kernel(spec.N, spec.K, False, spec.device, spec.B, 0, spec.J, ("tiles", spec.E))
  return cpu.kernel(spec.N, spec.K, False, spec.device, spec.B * spec.J, 0, 1, ("entries", spec.E, spec.J, spec.x_per_slot))
_PROVIDERS.append(_source_cpu)

def _source_gemm(spec: KernelSpec) -> KernelFn | None:
  """Hand-written prefill GEMMs (apps/kernels/gemm.py): the products of more tokens than the decode matvecs take (none
  where the model runs without a GEMM: KernelModules.gemm None; nor tiles of routed entries: they group entries themselves).
  They never trigger their dependents early."""
  return None if spec.modules.gemm is None or spec.per_tile else spec.modules.gemm.provider(spec)
_PROVIDERS.insert(0, _source_gemm)

def base_device(device: str) -> str: return device.split(":")[0]

def _scheduler_view(sink: UOp, ren):
  """The kernel as codegen's Scheduler sees it before optimizing: codegen splits ranges used with `%` and merges ranges
  whose indices allow it, so the axes opts refer to are read from here (same rewrites as full_rewrite_to_sink)."""
  from tinygrad.uop.ops import graph_rewrite
  from tinygrad.uop.symbolic import sym
  from tinygrad.codegen.simplify import pm_simplify_ranges, pm_flatten_range, pm_split_ranges, pm_load_collapse
  from tinygrad.schedule.multi import multi_pm
  from tinygrad.schedule.rangeify import pm_mops
  from tinygrad.codegen.opt.postrange import Scheduler
  s = graph_rewrite(sink, multi_pm)
  s = graph_rewrite(s, pm_mops, bottom_up=True)
  s = graph_rewrite(s, pm_load_collapse)
  s = graph_rewrite(s, pm_split_ranges + pm_flatten_range, ctx={})
  s = graph_rewrite(s, sym + pm_flatten_range)
  s = graph_rewrite(s, pm_flatten_range + pm_simplify_ranges, ctx={})
  k = Scheduler(s, ren)
  k.convert_loop_to_global()
  return k

# measured on the H100 for the GLM decode shapes (tools/bench_quantized.py): 4 rows per thread halved most times; Q6_K's
# 64-weight chunks of 96 bytes do better with 16 threads per row
_PLAN_BY_TYPE: dict[GGMLType, dict[str, int]] = {GGMLType.Q6_K: {"group": 16}}

def plan_opts(spec: KernelSpec, sink: UOp, group: int = 32, rows: int = 4, rows_per_thread: int = 4) -> tuple[Opt, ...] | None:
  """Optimizations for the matvec kernels on devices with local memory: the inner ranges of a chunk unrolled (one wide
  load of quant words, each word's nibbles used from registers), consecutive chunks of a row spread over a group of up to
  `group` threads (coalesced loads, reduction through shared memory), `rows_per_thread` output rows per thread (x
  loaded once for all of them), `rows` row groups per workgroup, and for T>1 a few tokens per thread so a dequantized
  weight is reused from registers. None (tinygrad's heuristics) elsewhere."""
  from tinygrad.codegen.opt import KernelOptError
  ren = Device[spec.device].renderer
  if spec.op == "rows" or not (ren.has_local and ren.has_shared): return None
  k = _scheduler_view(sink, ren)
  def attempt(opt: Opt) -> bool:
    try: k.apply_opt(opt)
    except KernelOptError: return False
    return True
  red = k.axes_of(AxisType.REDUCE)
  if not red: return ()
  sizes = [int(k.full_shape[a]) for a in red]
  outer_id = k.rngs[red[sizes.index(max(sizes))]].arg[0]  # the chunk axis (maybe merged with an inner one); the rest are inner
  axis_of = lambda rid: next(i for i, r in enumerate(k.rngs) if r.arg[0] == rid)
  for rid in [k.rngs[a].arg[0] for a in red]:
    if rid != outer_id: attempt(Opt(OptOps.UNROLL, k.unrollable_dims.index(axis_of(rid)), 0))
  outer = axis_of(outer_id)
  for g in (32, 16, 8, 4, 2):
    if g <= group and int(k.full_shape[outer]) % g == 0 and attempt(Opt(OptOps.GROUP, k.axes_of(AxisType.REDUCE).index(outer), g)): break
  glob = k.axes_of(AxisType.GLOBAL)
  if glob:
    for u in (4, 2):
      if u <= rows_per_thread and attempt(Opt(OptOps.UPCAST, glob[-1], u)): break
    for l in (8, 4, 2):
      if l <= rows and attempt(Opt(OptOps.LOCAL, glob[-1], l)): break
  if spec.B > 1 and spec.op in ("linear", "batched") and len(glob) > 1:
    for u in (4, 2):
      if attempt(Opt(OptOps.UPCAST, glob[0], u)): break
  return tuple(k.applied_opts)

def _portable_kernel(spec: KernelSpec) -> KernelFn:
  fmt, planned = spec.fmt, []
  n_chunks, cpb = spec.K // fmt.block * fmt.cpb, fmt.cpb
  name = f"{fmt.type.name.lower()}_{spec.op}_{spec.B}_{spec.J}_{spec.N}_{spec.K}" + \
         ("_residual" if spec.residual else "")

  def chunk(parts: dict[str, UOp], rows: tuple[UOp, ...], R: UOp, inner: list[UOp], split: bool = False) -> tuple[UOp, UOp]:
    # chunk coordinates from R by floor division only, which keeps R one range (the one-token matvec rule groups one whole
    # range); split, as (R // step) % dim, the codegen splits R into the block's ranges and indexes them without the div /
    # mod arithmetic the first form leaves (a product of several tokens, whose rule groups a chunk's words: +16-29% on the
    # generated 16-token prompts, OPTIMIZATION_JOURNAL.md)
    blk, c = R // cpb if cpb > 1 else R, []
    rest = R - blk * cpb
    for i in range(len(fmt.chunk)):
      step = math.prod(fmt.chunk[i + 1:])
      c.append((R // step if step > 1 else R) % fmt.chunk[i] if split else rest // step if step > 1 else rest)
      rest = rest - c[-1] * step
    kin, v = fmt.value(lambda pname, i: parts[pname][(*rows, blk, i)], tuple(c), inner)
    return blk * fmt.block + kin, v

  def ranges(first_id: int, axis_type: AxisType) -> tuple[UOp, list[UOp]]:
    R = UOp.range(n_chunks, first_id, axis_type)
    return R, [UOp.range(s, first_id + 1 + i, axis_type) for i, s in enumerate(fmt.inner)]

  if spec.op == "rows":
    def rows_kernel(out: UOp, *srcs: UOp) -> UOp:
      ids, plist = (srcs[0], srcs[1:]) if spec.has_index else (None, srcs)
      parts = {pname: p for (pname, _, _), p in zip(fmt.parts, plist)}
      b = UOp.range(spec.B, 0)
      row = ids[b].cast(dtypes.weakint).maximum(0).minimum(spec.E - 1) if ids is not None else b
      R, inner = ranges(1, AxisType.WEAK)
      k, v = chunk(parts, (row,), R, inner)
      return out[b, k].store(v.cast(out.dtype)).end(b, R, *inner).sink(arg=KernelInfo(name=name))
    return rows_kernel

  def mv_kernel(out: UOp, x: UOp, *srcs: UOp) -> UOp:
    sel, srcs = (srcs[0], srcs[1:]) if spec.op == "experts" else (None, srcs)
    residual, plist = (srcs[0], srcs[1:]) if spec.residual else (None, srcs)
    parts = {pname: p for (pname, _, _), p in zip(fmt.parts, plist)}
    b, n = UOp.range(spec.B, 0), UOp.range(spec.N, 2)
    if spec.op == "linear": j, rows, outs = None, (n,), (b, n)
    else:
      j = UOp.range(spec.J, 1)
      e = (sel[b] if spec.per_tile else sel[b, j]).cast(dtypes.weakint).maximum(0).minimum(spec.E - 1) if sel is not None else j
      rows, outs = (e, n), (b, j, n)
    R, inner = ranges(3, AxisType.REDUCE)
    k, v = chunk(parts, rows, R, inner, split=spec.B > 1)
    xv = x[b, j, k] if spec.x_per_slot else x[b, k]
    # a factor of the weight that is one number a chunk (Q4_0's, Q5_0's and Q8_0's d) multiplies the chunk's sum once, not
    # each weight: an instruction fewer a weight where a one-token product issues more than it reads (Nsight Compute). Not
    # for more tokens: their heuristic groups a chunk's words, which tinygrad cannot do inside the sum over chunks
    scale, v = _chunk_factor(v, inner) if spec.B == 1 else (None, v)
    xq = xv.cast(dtypes.float32) * v
    acc = (xq.reduce(*inner, arg=Ops.ADD) * scale).reduce(R, arg=Ops.ADD) if scale is not None else xq.reduce(R, *inner, arg=Ops.ADD)
    if residual is not None: acc = acc + residual[outs].cast(dtypes.float32)
    sink = out[outs].store(acc.cast(out.dtype)).end(*outs).sink(arg=KernelInfo(name=name))
    if not planned: planned.append(plan_opts(spec, sink, **_PLAN_BY_TYPE.get(fmt.type, {})) if spec.kernels == "hand" else None)
    return sink.replace(arg=KernelInfo(name=name, opts_to_apply=spec.opts if spec.opts is not None else planned[0]))
  return mv_kernel

def _chunk_factor(v: UOp, inner: list[UOp]) -> tuple[UOp | None, UOp]:
  """v = a * b where a uses none of a chunk's inner ranges: (a, b); else (None, v)."""
  if v.op is Ops.MUL:
    ins = set(inner)
    for a, b in (v.src, v.src[::-1]):
      if ins.isdisjoint(a.toposort()): return a, b
  return None, v

@cached
def kernel_cached(spec: KernelSpec) -> KernelFn: return kernel_for(spec)

def _norm_w_index(spec: KernelSpec) -> int:
  """Where norm_w is (or would be) among a kernel's buffers: out, x, [sel], [mix], [norm_w], [residual], parts."""
  return 2 + (spec.op == "experts") + spec.mix

# a split SwiGLU product's result -> its slices (S, rows, 2N). A next product whose x form reads such slices (x_form_glu: their
# shape -> the body, or None) makes its x from them, and the sum kernel, left without readers, is never scheduled
_GLU_SLICES: weakref.WeakKeyDictionary[UOp, Tensor] = weakref.WeakKeyDictionary()

def _unreshaped(x: Tensor) -> UOp:
  u = x.uop
  while u.op is Ops.RESHAPE: u = u.src[0]
  return u

def _glu_slices(x: Tensor) -> Tensor | None: return _GLU_SLICES.get(_unreshaped(x))

# x -> its forms made so far, by (K, stride, elements, norm_w, eps): products that read the same x in the same form (a MoE
# block's shared and routed gate_up, both of the normed h) share one x quantization
_X_FORMS: weakref.WeakKeyDictionary[UOp, dict[tuple, Tensor]] = weakref.WeakKeyDictionary()

def launch(spec: KernelSpec, out: Tensor, *srcs: Tensor) -> Tensor:
  fxn = kernel_cached(spec)
  if (form := getattr(fxn, "x_form", None)) is not None:  # the kernel reads x in a form of its own, which a kernel makes first
    size, dtype, make = form
    nw = _norm_w_index(spec) - 1                 # norm_w among srcs (out is apart): the norm goes into x's form
    xsrc = (srcs[0], srcs[nw]) if spec.norm else (srcs[0],)
    if (glu := getattr(fxn, "x_form_glu", None)) is not None and (part := _glu_slices(srcs[0])) is not None and \
       (from_slices := glu(part.shape)) is not None: xsrc, make = (part,), from_slices
    forms = _X_FORMS.setdefault(_unreshaped(srcs[0]), {})
    key = (spec.K, spec.x_stride, size, *((srcs[nw].uop, spec.eps) if spec.norm else ()))
    if key not in forms: forms[key] = Tensor.empty(size, dtype=dtype, device=out.device).custom_kernel(*xsrc, fxn=make)[0]
    srcs = (forms[key], *(srcs[1:nw] + srcs[nw + 1:] if spec.norm else srcs[1:]))
  if (split := getattr(fxn, "split", None)) is not None:   # K in slices: their sums added up here, then SwiGLU and the residual
    (S, rows), res = split, (srcs[1] if spec.residual else None)
    part = Tensor.empty(S, *out.shape[:-1], rows, device=out.device).custom_kernel(*srcs[:1], *srcs[1 + spec.residual:], fxn=fxn)[0]
    y = part[..., :spec.N].sum(0).silu() * part[..., spec.N:].sum(0) if spec.glu else part.sum(0)
    # a buffer of its own, as the kernels' outputs are: [q_a; kv_a]'s is read whole by the decode attention kernel and sliced
    # by q_b's (tinygrad 0.14 without patches/0061 handed such a slice of a lazy tensor the whole tensor's buffer)
    y = (y + res.reshape(y.shape) if res is not None else y).reshape(out.shape).contiguous()
    if spec.glu: _GLU_SLICES[y.uop] = part
    return y
  return out.custom_kernel(*srcs, fxn=fxn)[0]

@cached
def _gather_kernel(R: int, C: int, S: int):
  def gather(out: UOp, src: UOp, idx: UOp) -> UOp:
    r, c = UOp.range(R, 0), UOp.range(C, 1)
    return out[r, c].store(src[idx[r].cast(dtypes.weakint).maximum(0).minimum(S - 1), c]).end(r, c).sink(arg=KernelInfo(name=f"gather_rows_{R}_{C}"))
  return gather

def gather_rows(src: Tensor, idx: Tensor) -> Tensor:
  """src (S, C), idx int (R,) -> src[idx] (R, C): one load a value (tinygrad's indexing by a tensor reduces a one-hot mask)."""
  (S, C), R = src.shape, idx.shape[0]
  return Tensor.empty(R, C, dtype=src.dtype, device=src.device).custom_kernel(src, idx, fxn=_gather_kernel(R, C, S))[0]

@dataclass(frozen=True)
class KernelCall:
  """The kernel launch a layer makes for one call: its spec, its buffers (the output first) and what turns the kernel's
  output into the layer's result. Layers' `call` methods return one (or the result, when no kernel does the whole op), so
  that `run` can launch several calls on one input as one kernel."""
  spec: KernelSpec
  srcs: tuple[Tensor, ...]
  finish: Callable[[Tensor], Tensor]

def _matvec_shapes(specs: tuple[KernelSpec, ...]) -> tuple | None:
  """The decode matvec shapes of specs that the hand-written matvecs serve (the provider the seam picks for each), or None."""
  if any(sp.kernels != "hand" or next((p for p in _PROVIDERS if p(sp) is not None), None) is not _source_matvec for sp in specs): return None
  return tuple(_matvec_shape(sp) for sp in specs)

def matvecs_serve(specs: tuple[KernelSpec, ...]) -> bool:
  """Whether the hand-written decode matvecs serve every one of specs (the provider the seam picks for each)."""
  return _matvec_shapes(specs) is not None

def _one_model(specs: tuple[KernelSpec, ...]) -> bool:
  """The specs' layers run with one set of fusions and kernel modules (one model's), which a kernel of all of them keeps."""
  return len({(sp.fusions, sp.modules) for sp in specs}) == 1

def _side_by_side(specs: tuple[KernelSpec, ...]) -> KernelFn | None:
  """One kernel for several specs, side by side (hand-written decode matvecs), or None (also where the model runs without
  the fusion: Fusions.side_by_side)."""
  if not _one_model(specs) or not specs[0].fusions.side_by_side or (shapes := _matvec_shapes(specs)) is None: return None
  return specs[0].modules.matvec.kernel_side_by_side(shapes, tuple(sp.eps for sp in specs), specs[0].device, *_trigger(specs[0]))

def run(*calls: KernelCall | Tensor) -> list[Tensor]:
  """The results of layer calls (their `call` methods' returns): kernel calls on one device in one launch where the
  device's kernels can run them side by side (two matvecs of one input: one dependency edge less in a decode step's
  chain, and both in flight together), else one launch each; a Tensor (a call no kernel served) is its own result."""
  kc = [c for c in calls if isinstance(c, KernelCall)]
  fxn = _side_by_side(tuple(c.spec for c in kc)) if len(kc) > 1 and len({c.spec.device for c in kc}) == 1 else None
  if fxn is None: return [c if isinstance(c, Tensor) else c.finish(launch(c.spec, *c.srcs)) for c in calls]
  srcs = [t for c in kc for t in c.srcs]
  outs, first, done = srcs[0].custom_kernel(*srcs[1:], fxn=fxn), 0, {}
  for c in kc: done[id(c)], first = c.finish(outs[first]), first + len(c.srcs)  # each call's output is its first buffer
  return [c if isinstance(c, Tensor) else done[id(c)] for c in calls]

def _summed(specs: tuple[KernelSpec, ...]) -> KernelFn | None:
  """One kernel computing the sum of several specs' products (hand-written decode matvecs), or None (also where the model
  runs without the fusion: Fusions.sum)."""
  from apps.kernels import language_of
  if not _one_model(specs) or not specs[0].fusions.sum: return None
  matvec = specs[0].modules.matvec
  if (terms := _matvec_shapes(specs)) is None or not matvec.supports(terms, language_of(specs[0].device)): return None
  return matvec.kernel(terms, specs[0].eps, specs[0].device, *_trigger(specs[0]))

def run_sum(*calls: KernelCall | Tensor) -> Tensor:
  """The sum of layer calls' results of one shape (a routed experts' down + mix + residual and a shared expert's down):
  one kernel where the device's matvecs can sum them (one output row in one warp's registers, both weights' loads in
  flight together, one launch less), else each call run in order with the sum so far as its residual (added in its
  kernel where one does that, as the layers' residual= would)."""
  kc = [c for c in calls if isinstance(c, KernelCall)]
  fxn = _summed(tuple(c.spec for c in kc)) if len(kc) == len(calls) > 1 and len({c.spec.device for c in kc}) == 1 else None
  if fxn is not None:
    srcs = [*kc[0].srcs, *(t for c in kc[1:] for t in c.srcs[1:])]  # one output: the first call's
    return kc[0].finish(srcs[0].custom_kernel(*srcs[1:], fxn=fxn)[0])
  total = run(calls[0])[0]
  for c in calls[1:]: total = run(_with_residual(c, total))[0] if isinstance(c, KernelCall) else total + c
  return total

def _with_residual(c: KernelCall, r: Tensor) -> KernelCall | Tensor:
  """Call c adding r to its result: its kernel's residual where one does it (r in the residual's place among the buffers:
  out, x, [sel], [mix], [norm_w], [residual], parts), else c's result + r."""
  spec, out = replace(c.spec, residual=True), c.srcs[0]
  if c.spec.residual or kernel_cached(spec) is None or not isinstance(rows := prod(r.shape[:-1]), int) or rows != out.shape[0]:
    return c.finish(launch(c.spec, *c.srcs)) + r
  i = _norm_w_index(spec) + spec.norm
  return KernelCall(spec, (*c.srcs[:i], r.reshape(out.shape), *c.srcs[i:]), c.finish)
