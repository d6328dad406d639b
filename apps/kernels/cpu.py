"""The CPU's hand-written Q4_0 product: out[t, n] = W[n] . x[t] (+ residual[t, n]) for T tokens (a decode step's one
token or its batch of sequences, a prompt's chunk), in C that clang compiles with its vector extensions (the CPU device's
compiler; 16-lane vectors are one AVX-512 register, two AVX2 ones, four NEON ones); per slot, out[t, j, n] = W[j, n] .
x[t, j] over J slots each with its own weights and input (MLA's per-head k_b and v_b).

tinygrad's generated product splits every operation into scalars and clang regroups them only as wide as a row's 16-byte
loads, about 2 instructions a weight at 3-5 GB/s. Here a lane takes a word of 4 consecutive blocks of one row (64
contiguous bytes: one stream of memory a row) and x is permuted to match once a call, so each nibble position is one
vector shift, mask and multiply-add for 16 words: 4.4x the generated kernel on this project's 2-core AVX-512 machine
(runs/2026-11-30-cpu-simd, OPTIMIZATION_JOURNAL.md). For several tokens a thread unpacks 4 rows at a time, a chunk of K
at a time, into scaled fp32 vectors on its stack (in L1), and a tile of 4 tokens takes them: 16 accumulators in
registers, each load of x serving 4 rows and each weight 4 tokens (~300 GFLOPS on that machine where the generated 8 x 8
tile makes ~95: runs/2026-11-30-cpu-rows); a short row (MLA's per-head k_b, K 128) puts 16 tokens in a vector instead, as
a horizontal sum an output would cost as much as its row. The packed layout is the apps' own (apps/packed.py: d (N, nb) fp16, qs (N, nb,
4) words, byte i of a block in bits 8 (i % 4) of word i / 4); the rows are split over the CPU device's threads (its
core_id), each thread permuting x into its own stack, again where its rows enter another slot.

Beside them, the Q5_K and Q6_K products (the MoE models' output head and shared experts) in the same two forms, and MLA's
decode attention of one new token of each of B sequences (`mla_decode_attention`, mla_attention.py's
contract and math in one kernel): a thread takes a share of the (sequence, head) pairs and reads each of a sequence's
cached latent rows once for all of its heads of it; and the causal attention of a prefill chunk over the latent rows
(`mla_prefill_attention`): a unit of a few tokens and heads reads each key row once for all of them.
"""
from __future__ import annotations
import functools, math
from tinygrad import Device, Tensor, dtypes
from apps.kernels import Param, source_program

XP_FLOATS = 1 << 16   # a panel of tokens' x, permuted, on a thread's stack: up to 256 KB (in L2 with the rest)
ROWS = 4              # rows a thread unpacks at once into a buffer for many tokens (4 x a tile of accumulators in registers)
CHUNK = 64            # 16-float vectors of K the unpacked rows hold at a time (4 x 4 KB: they and a tile's x stay in L1)

def few(T: int, K: int) -> bool:
  """Whether a row's words, unpacked in registers, serve all T tokens at once: one or two tokens, or up to 8 whose x stays
  in L1 (32 KB); else the rows go through a buffer a group of ROWS at a time (full-size Youtu-LLM-2B's batched steps on the
  2-core machine: 2 tokens 95 -> 56 ms a step; 4, its K of 2048 1.28 -> 1.09 ms, of 6144 0.67 -> 1.09; 8 tokens 180 -> 217 ms)."""
  return T <= 2 or (T <= 8 and T * K <= 8192)

def tiles(T: int, K: int) -> tuple[int, int]:
  """(tile, panel) of T tokens that few() leaves to the buffer: tokens whose sums take a group of unpacked rows at once (their ROWS x tile
  accumulators in registers) and tokens whose permuted x sits on the stack at once (a multiple of the tile)."""
  tile = next(t for t in (4, 2, 1) if T % t == 0)
  return tile, tile * max(1, min(T // tile, XP_FLOATS // (tile * K)))

def supports(N: int, K: int, group: int = 32) -> bool:
  """Shapes the products take: K in whole blocks (Q4_0: 32 weights, read a group of 4 blocks a 16-word load, a short last
  group padded; Q5_K / Q6_K: 256), a token's x (K fp32 values) on the stack."""
  return K % group == 0 and 0 < K <= 32768 and N > 0

_HEAD = """typedef unsigned int u16v __attribute__((ext_vector_type(16)));
typedef unsigned int u16v_a4 __attribute__((ext_vector_type(16), aligned(4)));   /* the weights' loads: no alignment assumed */
typedef float f16v __attribute__((ext_vector_type(16)));
typedef float f8v __attribute__((ext_vector_type(8)));
typedef float f4v __attribute__((ext_vector_type(4)));
/* a row's 16 lanes as a tree (halves added twice, then pairs): 4 dependent adds where a chain is 16 (short rows end often) */
static inline float hsum(f16v v) { f8v h = v.lo + v.hi; f4v q = h.lo + h.hi; return (q[0] + q[1]) + (q[2] + q[3]); }
/* 16 words of packed weights, and a prefetch of the words 8 KB on (the next rows: a thread walks its rows in order). Some
   machines' hardware prefetchers do not keep a stream of such loads in flight: on a 2-core Xeon VM a product streamed its
   weights from memory at 4.6 GB/s on one thread without it, 10.9 with it (runs/2026-12-01-gen/cpu/prefetch.sh) */
static inline u16v words(const unsigned int* p) { __builtin_prefetch(p + 2048, 0, 3); return *(const u16v_a4*)p; }
"""
# x in the lanes' order: xp[g][h][b][l] = x[(4g + l / 4) * 32 + 16h + 4 (l % 4) + b], the input of the weight of nibble h of
# byte 4 (l % 4) + b of block 4g + l / 4, where lane l of a 16-word load of a row holds word l of 4 consecutive blocks ({stride}:
# the transposed form's tokens, each a column of a table whose rows are PS floats apart)
_PERMUTE = "for (int g = 0; g < {G}; g++) for (int h = 0; h < 2; h++) for (int b = 0; b < 4; b++) for (int l = 0; l < 16; l++) " \
           "{dst}[(((g * 2 + h) * 4 + b) * 16 + l){stride}] = 4 * g + l / 4 < {nb} ? {src}[(4 * g + l / 4) * 32 + 16 * h + 4 * (l % 4) + b] : 0.0f;"
# (u | 0x4B000000) as fp32 is 2^23 + u: the nibble q as q - 8 without an int -> float convert
_NIBBLE = "(__builtin_bit_cast(f16v, ((w >> (unsigned)(8 * b + 4 * h)) & 15u) | 0x4B000000u) - 8388616.0f)"
_SCALES = "f4v d4 = {{{d0}, {d1}, {d2}, {d3}}};\n" \
          "f16v ds = __builtin_shufflevector(d4, d4, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);"

def _tail_words(nb: int) -> str:
  """Where a row's blocks are not a whole number of groups of 4: the last group's words, the lanes past the row zero."""
  return "" if nb % 4 == 0 else f"""static inline u16v tail_words(const unsigned int* q) {{
  u16v w = 0;
  for (int l = 0; l < {4 * (nb % 4)}; l++) w[l] = q[l];
  return w;
}}
"""
def _words(nb: int) -> str: return "words(q + g * 16)" if nb % 4 == 0 else f"(g < {nb // 4} ? words(q + g * 16) : tail_words(q + g * 16))"
def _scales(nb: int) -> str:
  dq = lambda i: f"(float)dn[4 * g + {i}]" if nb % 4 == 0 else f"(4 * g + {i} < {nb} ? (float)dn[4 * g + {i}] : 0.0f)"
  return _SCALES.format(d0=dq(0), d1=dq(1), d2=dq(2), d3=dq(3))

def _tiles_of_tokens(K: int, tile: int, panel: int, count: str = "pt") -> str:
  """The microkernel of the buffer form: ROWS unpacked rows' vectors c0..c1 - 1 (wb, a row CHUNK vectors apart) times a
  tile of tokens at a time of the `count` tokens of the panel it computes (xp, a token K floats apart), into their sums so
  far (ab, a row `panel` apart)."""
  R, V, C = ROWS, K // 16, CHUNK
  acc = [(i, t) for i in range(R) for t in range(tile)]
  return f"""        for (int t0 = 0; t0 < {count}; t0 += {tile}) {{
          const f16v* xv = (const f16v*)(xp + (long)t0 * {K});
          f16v {", ".join(f"a{i}{t} = ab[{i} * {panel} + t0 + {t}]" for i, t in acc)};
          for (int v = c0; v < c1; v++) {{
            f16v {", ".join(f"w{i} = wb[{i * C} + v - c0]" for i in range(R))};
            f16v {", ".join(f"x{t} = xv[{t * V} + v]" for t in range(tile))};
            {" ".join(f"a{i}{t} += w{i} * x{t};" for i, t in acc)}
          }}
          {" ".join(f"ab[{i} * {panel} + t0 + {t}] = a{i}{t};" for i, t in acc)}
        }}"""

def _row_groups(N: int, T: int, P: int, expert: str, xrow, fill_x: str, tokens: str = "pt") -> str:
  """The loops of both buffer forms: panels of P tokens, each walking the thread's rows in groups of r (up to ROWS, of one
  slot) from row n, with fill_x (token p0 + t's x at xj) run for each of the slot's pts tokens of the panel (`tokens`, a C
  expression after `expert`: all pt of them, or fewer) where the rows enter a slot. The caller's code for the group
  follows, then `n += r; } }`."""
  return f"""
  for (int p0 = 0; p0 < {T}; p0 += {P}) {{
    const int pt = {T} - p0 < {P} ? {T} - p0 : {P};
    int pts = pt;
    slot = -1;
    for (int n = n0; n < n1;) {{
      if (n / {N} != slot) {{
        slot = n / {N};
        {expert}
        pts = {tokens};
        for (int t = 0; t < pts; t++) {{
          const float* xj = x + {xrow("p0 + t")};
          {fill_x}
        }}
      }}
      const int e1 = n1 < (slot + 1) * {N} ? n1 : (slot + 1) * {N}, r = e1 - n < {ROWS} ? e1 - n : {ROWS};"""

def _unpack_rows(nb: int, stride: int, c0: str, c1: str) -> str:
  """The group's r rows' vectors c0..c1 - 1 of K (8 a group of 4 blocks) unpacked and scaled into wb, a row `stride`
  vectors apart from vector c0 on."""
  return f"""for (int i = 0; i < r; i++) {{
          const unsigned int* q = qs + (long)(wbase + n + i) * {nb * 4};
          const __fp16* dn = d + (long)(wbase + n + i) * {nb};
          f16v* wr = wb + i * {stride} - {c0};
          for (int g = {c0} / 8; g < {c1} / 8; g++) {{
            u16v w = {_words(nb)};
            {_scales(nb)}
            for (int h = 0; h < 2; h++) for (int b = 0; b < 4; b++) wr[g * 8 + h * 4 + b] = {_NIBBLE} * ds;
          }}
        }}"""

def source(name: str, N: int, K: int, residual: bool, threads: int, J: int = 1, xs: int = 0, T: int = 1, routed: tuple = ()) -> str:
  """T tokens, J slots of N rows each: out[t, j, n] = W[j N + n] . x[t, j] (+ residual[t, n] where J is 1), x[t, j] at
  x + (t J + j) xs (xs: 0 is K). Routed (a routed expert's rows a slot, its id sel[j] clamped to [0, E), no residual):
  ("entries", E, k, per_slot): one token, J entries of tokens' k experts each (out[j, n] = W[sel[j] N + n] . x[j // k], or
  x[j] per slot); ("tiles", E): J tiles of T tokens routed to one expert each (out[j, t, n] = W[e N + n] . x[j, t] for
  sel[j] = e + E * pad: the tile's last pad tokens are padding, whose outputs are not written; a tile of T of them takes no
  work, and the threads share the rows of the tiles up to the last that has tokens).
  A thread takes a share of the J N rows. few() tokens: a row at a time, its words unpacked in registers into every
  token's multiply-adds (the weights streamed once, as a decode product is bound by them). More: ROWS rows at a time, a
  chunk of K at a time, unpacked and scaled into a buffer on the stack, then a tile of tokens at a time takes them (an fp32
  microkernel: a load of x serves ROWS rows, a load of a weight `tile` tokens); where K is short (up to LANES_K) and the
  tokens 16 or more, 16 tokens a vector instead (_lanes_of_tokens)."""
  nb, rows, xs = K // 32, -(-J * N // threads), xs or K
  KP = -(-nb // 4) * 128   # K in whole groups of 4 blocks: a short last group's lanes past the row are zero weights and x
  kind = routed[0] if routed else ""
  if kind == "entries": xrow, orow = (lambda t: f"(long)slot{f' / {routed[2]}' if not routed[3] else ''} * {K}"), (lambda t: "0")
  elif kind == "tiles": xrow, orow = (lambda t: f"((long)slot * {T} + {t}) * {K}"), (lambda t: f"((long)slot * {T} + {t} - slot) * {N}")
  else: xrow, orow = (lambda t: f"((long)({t}) * {J} + slot) * {xs}"), (lambda t: f"(long)({t}) * {J * N}")
  args = f"float* restrict out, const float* restrict x, {'const int* restrict sel, ' if routed else ''}" \
         f"{'const float* restrict residual, ' if residual else ''}const __fp16* restrict d, const unsigned int* restrict qs, const int core_id"
  # a slot's weight rows start at row wbase + slot N: its expert's, where routed
  expert = f"int e = sel[slot]; e = e < 0 ? 0 : e > {routed[1] - 1} ? {routed[1] - 1} : e; wbase = (e - slot) * {N};" if routed else ""
  res = " + residual[o]" if residual else ""
  split = f"const int n0 = core_id * {rows}, n1 = (core_id + 1) * {rows} < {J * N} ? (core_id + 1) * {rows} : {J * N};"
  tokens = "pt"
  if kind == "tiles":   # sel = expert + E x the tile's padding tokens: the rows of the tiles that hold tokens, the tokens a slot holds
    E = routed[1]
    expert = f"const int sv = sel[slot] < 0 ? 0 : sel[slot]; int e = sv % {E}, pad = sv / {E} < {T} ? sv / {E} : {T}; wbase = (e - slot) * {N};"
    split = f"""int used = 0;   /* tiles up to the last that holds tokens */
  for (int j = 0; j < {J}; j++) if (sel[j] < {E * T}) used = j + 1;
  const int per = (used * {N} + {threads - 1}) / {threads}, n0 = core_id * per, n1 = n0 + per < used * {N} ? n0 + per : used * {N};"""
    mt = tiles(T, KP)[0]   # the microkernel's tokens: a slot's entries rounded up to them
    tokens = f"{T} - pad - p0 <= 0 ? 0 : {T} - pad - p0 >= pt ? pt : ({T} - pad - p0 + {mt - 1}) / {mt} * {mt}"
  head = _HEAD + _tail_words(nb) + f"""void {name}({args}) {{
  {split}
  int slot = -1, wbase = 0;"""
  if few(T, K):
    return head + f"""
  float xp[{T * KP}] __attribute__((aligned(64)));   /* the tokens' x, permuted */
  for (int n = n0; n < n1; n++) {{
    if (n / {N} != slot) {{
      slot = n / {N};
      {expert}
      for (int t = 0; t < {T}; t++) {{
        const float* xj = x + {xrow("t")};
        float* xt = xp + t * {KP};
        {_PERMUTE.format(G=KP // 128, nb=nb, dst="xt", src="xj", stride="")}
      }}
    }}
    const unsigned int* q = qs + (long)(wbase + n) * {nb * 4};
    const __fp16* dn = d + (long)(wbase + n) * {nb};
    f16v {", ".join(f"a{t} = 0" for t in range(T))};
    for (int g = 0; g < {KP // 128}; g++) {{
      u16v w = {_words(nb)};
      f16v wv[8];
      for (int h = 0; h < 2; h++) for (int b = 0; b < 4; b++) wv[h * 4 + b] = {_NIBBLE};
      {_scales(nb)}
{chr(10).join(f"      {{ const f16v* xv = (const f16v*)(xp + {t * KP} + g * 128); f16v s = 0; " +
              f"for (int k = 0; k < 8; k++) s += xv[k] * wv[k]; a{t} += s * ds; }}" for t in range(T))}
    }}
{chr(10).join(f"    {{ const long o = {orow(t)} + n; out[o] = hsum(a{t}){res}; }}" for t in range(T))}
  }}
}}
"""
  if KP <= LANES_K and T >= 16: return head + _lanes_of_tokens(N, KP, nb, T, xrow, orow, expert, residual)
  tile, panel = tiles(T, KP)
  R, V, C = ROWS, KP // 16, CHUNK
  return head + f"""
  float xp[{panel * KP}] __attribute__((aligned(64)));   /* a panel's tokens, permuted */
  f16v wb[{R * C}], ab[{R * panel}];                     /* a chunk of ROWS rows unpacked and scaled; their sums so far */
  for (int v = 0; v < {R * C}; v++) wb[v] = 0.0f;        /* (a group of fewer rows computes the rest on zeros) */
  {_row_groups(N, T, panel, expert, xrow, f"float* xt = xp + t * {KP}; " + _PERMUTE.format(G=KP // 128, nb=nb, dst="xt", src="xj", stride=""),
                tokens)}
      for (int v = 0; v < {R * panel}; v++) ab[v] = 0.0f;   /* (a row's sums `panel` apart: all of them, in a short last panel too) */
      for (int c0 = 0; c0 < {V}; c0 += {C}) {{   /* a chunk of K: its unpacked rows stay in L1 for every tile of tokens */
        const int c1 = c0 + {C} < {V} ? c0 + {C} : {V};
        {_unpack_rows(nb, C, "c0", "c1")}
{_tiles_of_tokens(KP, tile, panel, "pts")}
      }}
      for (int i = 0; i < r; i++) for (int t = 0; t < pts; t++) {{
        const long o = {orow("p0 + t")} + n + i;
        out[o] = hsum(ab[i * {panel} + t]){res};
      }}
      n += r;
    }}
  }}
}}
"""

LANES_K = 256   # K up to which several tokens' products put the tokens across the lanes (no horizontal sums)

def _lanes_of_tokens(N: int, KP: int, nb: int, T: int, xrow, orow, expert: str, residual: bool) -> str:
  """The buffer form for a short K (MLA's per-head k_b, K 128-192): a row's sum is a few vectors, so a horizontal sum an
  output would cost as much as the row (40 GFLOPS at K 128). Instead 16 tokens a vector: a panel of tokens' x, permuted as
  the lanes' words are, is transposed on the stack (xt[k][t]); ROWS rows are unpacked and scaled into a buffer as before,
  and each scaled weight, broadcast, multiplies the x of 32 tokens (two vectors) into 2 x ROWS accumulators: no
  horizontal sums, each load of x serves ROWS rows. A k's tokens are PS floats apart, 16 more than the panel's P: a
  power-of-two stride would put every k's x in the same few sets of L1."""
  R, V, P = ROWS, KP // 16, min(-(-T // 32) * 32, (XP_FLOATS // KP - 16) // 32 * 32)
  PS, acc = P + 16, [(i, u) for i in range(R) for u in range(2)]
  return f"""
  float xt[{KP * PS}] __attribute__((aligned(64)));  /* a panel's tokens' x, permuted, transposed: xt[k * {PS} + t] */
  f16v wb[{R * V}];                                     /* ROWS rows unpacked and scaled */
  for (int v = 0; v < {R * V}; v++) wb[v] = 0.0f;       /* (a group of fewer rows computes the rest, not stored) */
  for (int v = 0; v < {KP * PS}; v++) xt[v] = 0.0f;     /* (lanes past a short last panel's tokens: finite, not stored) */
  {_row_groups(N, T, P, expert, xrow, "float* xc = xt + t; " + _PERMUTE.format(G=KP // 128, nb=nb, dst="xc", src="xj", stride=f" * {PS}"))}
      {_unpack_rows(nb, V, "0", str(V))}
      const float* ws = (const float*)wb;
      for (int u0 = 0; u0 < pt; u0 += 32) {{
        const f16v* xv = (const f16v*)(xt + u0);
        f16v {", ".join(f"a{i}{u} = 0" for i, u in acc)};
        for (int k = 0; k < {KP}; k++) {{
          f16v x0 = xv[k * {PS // 16}], x1 = xv[k * {PS // 16} + 1];
          {" ".join(f"a{i}{u} += ws[{i * KP} + k] * x{u};" for i, u in acc)}
        }}
        for (int l = 0; l < 32 && u0 + l < pt; l++) {{
          const long o = {orow("p0 + u0 + l")} + n;
{chr(10).join(f"          if ({i} < r) out[o + {i}] = (l < 16 ? a{i}0[l] : a{i}1[l - 16])" + (f" + residual[o + {i}];" if residual else ";")
              for i in range(R))}
        }}
      }}
      n += r;
    }}
  }}
}}
"""

@functools.lru_cache(maxsize=None)
def kernel(N: int, K: int, residual: bool, device: str, J: int = 1, xs: int = 0, T: int = 1, routed: tuple = ()):
  """A custom_kernel body (out, x, [sel], [residual], d, qs) running the product on `device` (a CPU device) on all its
  threads: T tokens, out (T, N); J > 1: out (T, J, N) of J slots, slot j's x at x + (t J + j) xs (0: K) and its weights rows
  j N.. of d and qs (no residual); routed: source()'s, a routed expert's rows a slot."""
  assert (J == 1 and not routed) or not residual
  threads = max(1, min(Device[device].renderer.global_max[0], J * N))
  kind = routed[0] if routed else "batched" if J > 1 else ""
  name = (f"cpu_q4_0_{kind}_{J}_{N}_{K}" if kind else f"cpu_q4_0_linear_{N}_{K}") + ("_residual" if residual else "") + \
         (f"_xs{xs}" if xs else "") + (f"_t{T}" if T > 1 else "") + ("_x" if kind == "entries" and routed[3] else "")
  params = (Param("out", dtypes.float32, True), Param("x", dtypes.float32), *([Param("sel", dtypes.int32)] if routed else []),
            *([Param("residual", dtypes.float32)] if residual else []), Param("d", dtypes.float16), Param("qs", dtypes.uint32))
  fxn = source_program(name, params, source(name, N, K, residual, threads, J, xs, T, routed), (threads, 1, 1), (1, 1, 1), device,
                       core_id=threads)
  fxn.tile_padding = kind == "tiles"   # its sel is each tile's expert + E x its padding tokens (quantized.expert_tiles' count)
  return fxn

K_TOKENS = 8   # the most tokens the Q5_K / Q6_K products take a row at a time (their sums in registers beside a half-block's
               # unpacked weights); more go through the buffer form

_K_HEAD = _HEAD + """typedef unsigned int u8v __attribute__((ext_vector_type(8)));
typedef unsigned int u8v_a4 __attribute__((ext_vector_type(8), aligned(4)));
typedef float f2v __attribute__((ext_vector_type(2)));
"""
_UP = "const u16v up = {0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2};   /* lanes 8-15: their high bits two places up */"

def _k_signature(name: str, residual: bool, parts: str) -> str:
  res = "const float* restrict residual, " if residual else ""
  return f"void {name}(float* restrict out, const float* restrict x, {res}{parts}, const int core_id) {{"

def _k_source(name: str, N: int, K: int, residual: bool, threads: int, T: int, parts: str, place: str, setup: str, block: str) -> str:
  """A K-quant product of T tokens a row at a time, its x permuted once a call: x[t][k] goes to lane `L` of position b = k %
  4 of 64-float group `c` of xp[t] (place: C declaring c and L from k), the sums of each token in a{t}; `block` adds a
  block's products (o: its index in the rows' blocks)."""
  rows = -(-N // threads)
  res = lambda t: f" + residual[{t * N} + n]" if residual else ""
  return _K_HEAD + f"""{_k_signature(name, residual, parts)}
  float xp[{T * K}] __attribute__((aligned(64)));
  for (int t = 0; t < {T}; t++) for (int k = 0; k < {K}; k++) {{
    {place}
    xp[t * {K} + (c * 4 + k % 4) * 16 + L] = x[t * {K} + k];
  }}
  {setup}
  {_UP}
  const int n0 = core_id * {rows}, n1 = (core_id + 1) * {rows} < {N} ? (core_id + 1) * {rows} : {N};
  for (int n = n0; n < n1; n++) {{
    f16v {", ".join(f"a{t} = 0" for t in range(T))};
    for (int blk = 0; blk < {K // 256}; blk++) {{
      const long o = (long)n * {K // 256} + blk;
{block}
    }}
{chr(10).join(f"    out[{t * N} + n] = hsum(a{t}){res(t)};" for t in range(T))}
  }}
}}
"""

def _k_buffer_source(name: str, N: int, K: int, residual: bool, threads: int, T: int, parts: str, place: str, unpack: str) -> str:
  """A K-quant product of more than K_TOKENS tokens in the Q4_0 product's buffer form: ROWS rows at a time, a chunk of
  CHUNK vectors (4 blocks) of K at a time, unpacked and scaled into wb on the stack by `unpack` (block `o` of the rows'
  blocks into wr[blk * 16 + 0..15], in the order `place` permutes x to), then the tiles of tokens take them."""
  rows, (tile, panel), R, V, C = -(-N // threads), tiles(T, K), ROWS, K // 16, CHUNK
  res = f" + residual[(long)(p0 + t) * {N} + n + i]" if residual else ""
  return _K_HEAD + f"""{_k_signature(name, residual, parts)}
  const int n0 = core_id * {rows}, n1 = (core_id + 1) * {rows} < {N} ? (core_id + 1) * {rows} : {N};
  {_UP}
  float xp[{panel * K}] __attribute__((aligned(64)));   /* a panel's tokens, permuted */
  f16v wb[{R * C}], ab[{R * panel}];                     /* a chunk of ROWS rows unpacked and scaled; their sums so far */
  for (int v = 0; v < {R * C}; v++) wb[v] = 0.0f;        /* (a group of fewer rows computes the rest on zeros) */
  for (int p0 = 0; p0 < {T}; p0 += {panel}) {{
    const int pt = {T} - p0 < {panel} ? {T} - p0 : {panel};
    for (int t = 0; t < pt; t++) for (int k = 0; k < {K}; k++) {{
      {place}
      xp[t * {K} + (c * 4 + k % 4) * 16 + L] = x[(long)(p0 + t) * {K} + k];
    }}
    for (int n = n0; n < n1;) {{
      const int r = n1 - n < {R} ? n1 - n : {R};
      for (int v = 0; v < {R * panel}; v++) ab[v] = 0.0f;   /* (a row's sums `panel` apart: all of them, in a short last panel too) */
      for (int c0 = 0; c0 < {V}; c0 += {C}) {{   /* a chunk of K: its unpacked rows stay in L1 for every tile of tokens */
        const int c1 = c0 + {C} < {V} ? c0 + {C} : {V};
        for (int i = 0; i < r; i++) {{
          f16v* wr = wb + i * {C} - c0;
          for (int blk = c0 / 16; blk < c1 / 16; blk++) {{
            const long o = (long)(n + i) * {K // 256} + blk;
{unpack}
          }}
        }}
{_tiles_of_tokens(K, tile, panel)}
      }}
      for (int i = 0; i < r; i++) for (int t = 0; t < pt; t++) out[(long)(p0 + t) * {N} + n + i] = hsum(ab[i * {panel} + t]){res};
      n += r;
    }}
  }}
}}
"""

def _k_product(name: str, N: int, K: int, residual: bool, threads: int, T: int, parts: str, place: str, setup: str, block: str,
               group: str, q: str, qv: str, w: str, sums: str) -> str:
  """A K-quant product in the form its T takes. `block` is a block's loops down to one 64-weight group `group` of 4 vector
  positions, with `{use}` where its positions go; at byte position b the u16v `q` holds the 16 weights' quants, `qv`
  their values as fp32 (before the scales) and `w` (a format of qv) the scaled weights. A row at a time: each position
  unpacked once for the T tokens' partial sums, then `sums` (a format of t and tx, token t's first group) adds them to a{t}
  with the scales; in the buffer form, the weights into the row's buffer."""
  if T > K_TOKENS:
    unpack = f"for (int b = 0; b < 4; b++) {{ const u16v q = {q}; wr[({group}) * 4 + b] = {w.format(qv=qv)}; }}"
    return _k_buffer_source(name, N, K, residual, threads, T, parts, place, block.format(use=unpack))
  tok = f"""const int c = {group};
          const f16v* xv = (const f16v*)(xp + c * 64);
          f16v {", ".join(f"b{t} = 0" for t in range(T))};
          for (int b = 0; b < 4; b++) {{
            const u16v q = {q};
            const f16v wq = {qv};
            {" ".join(f"b{t} += xv[{t * K // 16} + b] * wq;" for t in range(T))}
          }}
          {" ".join(sums.format(t=t, tx=t * K // 64) for t in range(T))}"""
  return _k_source(name, N, K, residual, threads, T, parts, place, setup, block.format(use=tok))

def source_q6_k(name: str, N: int, K: int, residual: bool, threads: int, T: int = 1) -> str:
  """The Q6_K product of T tokens, out[t, n] = W[n] . x[t] (+ residual[t, n]): a lane takes a word of a half-block's low
  nibbles (ql) and its pair of high bits (qh, the 8 words of the half twice, lanes 8-15 two bits up), so a (nibble, byte)
  position is one vector of 16 weights; a half's two scale vectors are 4 int8 scales 4 lanes each, times d; q - 32 is
  (2^23 + q) - (2^23 + 32) in fp32. Up to K_TOKENS a vector is unpacked once for all the tokens' sums, more go through the
  buffer form. xp[t][blk][h][s][b][L] = x[t][256 blk + 128 h + 64 s + 4 L + b] (the weight of byte b,
  nibble s of word L of half h)."""
  block = """      const float dd = (float)d[o];
      for (int h = 0; h < 2; h++) {{
        const u16v lo = words(ql + o * 32 + h * 16);
        const u8v h8 = *(const u8v_a4*)(qh + o * 16 + h * 8);
        const u16v hi = __builtin_shufflevector(h8, h8, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7);
        for (int s = 0; s < 2; s++) {{
          const unsigned int w = sc[o * 4 + h * 2 + s];
          f4v s4 = {{(float)(signed char)w, (float)(signed char)(w >> 8), (float)(signed char)(w >> 16), (float)(signed char)(w >> 24)}};
          s4 *= dd;
          const f16v sv = __builtin_shufflevector(s4, s4, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
          {use}
        }}
      }}"""
  return _k_product(name, N, K, residual, threads, T,
                    "const unsigned int* restrict ql, const unsigned int* restrict qh, const unsigned int* restrict sc, const __fp16* restrict d",
                    "const int c = k / 64, L = k / 4 % 16;", "", block, "blk * 4 + h * 2 + s",
                    "((lo >> (unsigned)(8 * b + 4 * s)) & 15u) | (((hi >> ((unsigned)(8 * b + 4 * s) + up)) & 3u) << 4)",
                    "(__builtin_bit_cast(f16v, q | 0x4B000000u) - 8388640.0f)", "{qv} * sv", "a{t} += b{t} * sv;")

def source_q5_k(name: str, N: int, K: int, residual: bool, threads: int, T: int = 1) -> str:
  """The Q5_K product of T tokens, as source_q6_k's: a lane a word of a half-block's nibbles (qs) beside its high bit (qh:
  the block's 8 words twice, lanes 8-15 two sub-blocks up), a (nibble, byte) position one vector of 16 weights q in 0..31,
  w = d sc q - dmin m with a sub-block's 6-bit scale and min (the apps' packed scm: 8 scales, then 8 mins, a byte each); a
  row at a time sum x w = d sc (sum x q) - dmin m (sum x), the sums of x per lane taken once a call. The high bits are
  shifted to their lanes' and half's place once (hj), so each weight's shift is a constant the compiler makes an immediate
  (a shift by a lane vector a weight made the product 1.34x slower).
  xp[t][blk][j][h][b][L] = x[t][256 blk + 128 j + 64 (L / 8) + 32 h + 4 (L % 8) + b]."""
  setup = f"""f16v xs[{T * K // 64}];   /* per (token, 64-float group): the lanes' sums of x over the 4 bytes */
  for (int v = 0; v < {T * K // 64}; v++) {{
    const f16v* xv = (const f16v*)(xp + v * 64);
    xs[v] = xv[0] + xv[1] + xv[2] + xv[3];
  }}"""
  block = """      const float d = (float)dm[2 * o], dmin = (float)dm[2 * o + 1];
      const u8v h8 = *(const u8v_a4*)(qh + o * 8);
      const u16v hi = __builtin_shufflevector(h8, h8, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7) >> up;
      for (int j = 0; j < 2; j++) {{
        const u16v lo = words(qs + o * 32 + j * 16), hj = hi >> (unsigned)(4 * j);
        const unsigned int sw = scm[o * 4 + j], mw = scm[o * 4 + 2 + j];
        for (int h = 0; h < 2; h++) {{
          f2v s2 = {{(float)((sw >> (8 * h)) & 255u), (float)((sw >> (8 * h + 16)) & 255u)}};
          f2v m2 = {{(float)((mw >> (8 * h)) & 255u), (float)((mw >> (8 * h + 16)) & 255u)}};
          s2 *= d; m2 *= dmin;
          const f16v sv = __builtin_shufflevector(s2, s2, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
          const f16v mv = __builtin_shufflevector(m2, m2, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
          {use}
        }}
      }}"""
  return _k_product(name, N, K, residual, threads, T,
                    "const __fp16* restrict dm, const unsigned int* restrict scm, const unsigned int* restrict qh, const unsigned int* restrict qs",
                    "const int c = k / 128 * 2 + k / 32 % 2, L = k / 64 % 2 * 8 + k / 4 % 8;", setup, block,
                    "(blk * 2 + j) * 2 + h",
                    "((lo >> (unsigned)(8 * b + 4 * h)) & 15u) | (((hj >> (unsigned)(8 * b + h)) & 1u) << 4)",
                    "(__builtin_bit_cast(f16v, q | 0x4B000000u) - 8388608.0f)", "{qv} * sv - mv", "a{t} += b{t} * sv - xs[{tx} + c] * mv;")

@functools.lru_cache(maxsize=None)
def kernel_k(typ: str, N: int, K: int, residual: bool, device: str, T: int = 1):
  """A custom_kernel body (out, x, [residual], *the type's parts) running the Q5_K or Q6_K product (typ "q5_k" / "q6_k")
  of T tokens on all of `device`'s threads: up to K_TOKENS a row at a time, more through the buffer form."""
  threads = max(1, min(Device[device].renderer.global_max[0], N))
  name = f"cpu_{typ}_linear_{N}_{K}" + ("_residual" if residual else "") + (f"_t{T}" if T > 1 else "")
  parts = {"q5_k": (("dm", dtypes.float16), ("scm", dtypes.uint32), ("qh", dtypes.uint32), ("qs", dtypes.uint32)),
           "q6_k": (("ql", dtypes.uint32), ("qh", dtypes.uint32), ("sc", dtypes.uint32), ("d", dtypes.float16))}[typ]
  params = (Param("out", dtypes.float32, True), Param("x", dtypes.float32), *([Param("residual", dtypes.float32)] if residual else []),
            *(Param(n, dt) for n, dt in parts))
  src = (source_q5_k if typ == "q5_k" else source_q6_k)(name, N, K, residual, threads, T)
  return source_program(name, params, src, (threads, 1, 1), (1, 1, 1), device, core_id=threads)

_ATTN_HEAD = _HEAD + """typedef float f16v_a4 __attribute__((ext_vector_type(16), aligned(4)));
static inline float ex2(float x) {   /* 2^x for x <= 0: Cephes' exp2f polynomial on [-0.5, 0.5] */
  if (x < -126.0f) return 0.0f;
  float n = __builtin_floorf(x + 0.5f), t = x - n;
  float p = 1.535336188e-4f;
  p = p * t + 1.339887440e-3f; p = p * t + 9.618437357e-3f; p = p * t + 5.550332471e-2f; p = p * t + 2.402264791e-1f;
  p = p * t + 6.931472028e-1f; p = p * t + 1.0f;
  return p * __builtin_bit_cast(float, ((int)n + 127) << 23);
}
/* one key row kt of a query q's attention, an online softmax in base 2: their dot (DV vectors: two chains, then the 16 lanes
   as a tree), the running max m and sum l rescaled where it is the new max, and acc += its weight x the row's first LV vectors */
static inline __attribute__((always_inline)) void attend_key(const f16v* restrict q, const f16v_a4* restrict kt, f16v* restrict acc,
                                                             float* restrict m, float* restrict l, const int DV, const int LV) {
  f16v d0 = 0.0f, d1 = 0.0f;
  for (int v = 0; v + 1 < DV; v += 2) { d0 += q[v] * kt[v]; d1 += q[v + 1] * kt[v + 1]; }
  if (DV % 2) d0 += q[DV - 1] * kt[DV - 1];
  const float s = hsum(d0 + d1);
  if (s > *m) {
    const float c = ex2(*m - s);
    *l *= c;
    for (int v = 0; v < LV; v++) acc[v] *= c;
    *m = s;
  }
  const float w = ex2(s - *m);
  *l += w;
  for (int v = 0; v < LV; v++) acc[v] += w * kt[v];
}
"""

def attention_source(name: str, n_head: int, kv_lora: int, qk_nope: int, qk_rope: int, scale: float, eps: float, kv_offset: int,
                     threads: int, B: int = 1, q_stride: int = 0, kv_stride: int = 0) -> str:
  """MLA's decode attention of the new tokens of B sequences (apps/kernels/mla_attention.py's math, one kernel): row b at
  position pos[b][0] of the sequence whose cache rows start at pos[b][1], its q_raw and kv_raw rows q_stride and kv_stride
  apart. The B x n_head (row, head) pairs are split over the threads; a thread makes the new latent row (rms norm, rope) of
  each row it has heads of, and the one with the row's head 0 stores it; it walks the row's cached rows 0..pos once, each
  serving all of its heads of that row, with an online softmax in base 2 (the new row its own, never read back). exp2 is a
  polynomial here: the CPU kernels link no libm."""
  L, R, H = kv_lora, qk_rope, n_head
  D, KQ, UT = L + R, qk_nope + qk_rope, -(-B * n_head // threads)
  HT = min(H, UT)
  f, qs = (lambda x: f"{x:.9e}f"), f"{scale * math.log2(math.e):.9e}f"   # the queries' factor: scale and log2 e
  return _ATTN_HEAD + f"""/* heads h0..h1-1 of row b */
static void attend(float* restrict out, float* restrict cache, const float* restrict q_lat, const float* restrict q_raw,
                   const float* restrict kv_raw, const float* restrict kv_norm_w, const float* restrict rope_cos,
                   const float* restrict rope_sin, const int* restrict pos, const int b, const int h0, const int h1) {{
  const int p = pos[2 * b];
  float* rows = cache + (long)pos[2 * b + 1] * {D};
  const float* cs = rope_cos + (long)p * {R // 2};
  const float* sn = rope_sin + (long)p * {R // 2};
  f16v row[{D // 16}], q[{HT}][{D // 16}], acc[{HT}][{L // 16}];
  float m[{HT}], l[{HT}];
  /* the new row: [rms_norm(kv[:L]) * w, rope(kv[L:])] (the rotated even lanes first, then the odd ones) */
  const float* kv = kv_raw + (long)b * {kv_stride} + {kv_offset};
  float ss = 0.0f;
  for (int i = 0; i < {L}; i++) ss += kv[i] * kv[i];
  const float inv = 1.0f / __builtin_sqrtf(ss / {L}.0f + {f(eps)});
  float* rf = (float*)row;
  for (int i = 0; i < {L}; i++) rf[i] = kv[i] * inv * kv_norm_w[i];
  for (int i = 0; i < {R // 2}; i++) {{
    float x0 = kv[{L} + 2 * i], x1 = kv[{L} + 2 * i + 1];
    rf[{L} + i] = x0 * cs[i] - x1 * sn[i];
    rf[{L} + {R // 2} + i] = x1 * cs[i] + x0 * sn[i];
  }}
  if (h0 == 0) for (int i = 0; i < {D}; i++) rows[(long)p * {D} + i] = rf[i];
  /* the queries, scale and log2 e folded in */
  for (int h = h0; h < h1; h++) {{
    float* qf = (float*)q[h - h0];
    for (int i = 0; i < {L}; i++) qf[i] = q_lat[((long)b * {H} + h) * {L} + i] * {qs};
    const float* qr = q_raw + (long)b * {q_stride} + h * {KQ} + {qk_nope};
    for (int i = 0; i < {R // 2}; i++) {{
      float x0 = qr[2 * i], x1 = qr[2 * i + 1];
      qf[{L} + i] = (x0 * cs[i] - x1 * sn[i]) * {qs};
      qf[{L} + {R // 2} + i] = (x1 * cs[i] + x0 * sn[i]) * {qs};
    }}
    m[h - h0] = -3.0e38f; l[h - h0] = 0.0f;
    for (int v = 0; v < {L // 16}; v++) acc[h - h0][v] = 0.0f;
  }}
  for (int t = 0; t <= p; t++) {{
    const f16v_a4* kt = t == p ? (const f16v_a4*)row : (const f16v_a4*)(rows + (long)t * {D});   /* read in place */
    for (int j = 0; j < h1 - h0; j++) attend_key(q[j], kt, acc[j], &m[j], &l[j], {D // 16}, {L // 16});
  }}
  for (int h = h0; h < h1; h++) {{
    const float r = 1.0f / l[h - h0];
    const float* af = (const float*)acc[h - h0];
    for (int i = 0; i < {L}; i++) out[((long)b * {H} + h) * {L} + i] = af[i] * r;
  }}
}}
void {name}(float* restrict out, float* restrict cache, const float* restrict q_lat, const float* restrict q_raw,
            const float* restrict kv_raw, const float* restrict kv_norm_w, const float* restrict rope_cos,
            const float* restrict rope_sin, const int* restrict pos, const int core_id) {{
  const int u1 = (core_id + 1) * {UT} < {B * H} ? (core_id + 1) * {UT} : {B * H};
  for (int u = core_id * {UT}; u < u1;) {{   /* (row, head) pairs: a row's heads at a time */
    const int b = u / {H}, h0 = u % {H}, h1 = h0 + (u1 - u) < {H} ? h0 + (u1 - u) : {H};
    attend(out, cache, q_lat, q_raw, kv_raw, kv_norm_w, rope_cos, rope_sin, pos, b, h0, h1);
    u += h1 - h0;
  }}
}}
"""

def attention_supports(n_head: int, kv_lora: int, qk_rope: int, cache: Tensor) -> bool:
  """Shapes the decode attention takes: 16-lane vectors over the latent and rope parts, an fp32 cache, on the stack."""
  return cache.dtype == dtypes.float32 and kv_lora % 16 == 0 and qk_rope % 32 == 0 and n_head <= 128 and kv_lora <= 1024

@functools.lru_cache(maxsize=None)
def attention_kernel(n_head: int, kv_lora: int, qk_nope: int, qk_rope: int, scale: float, eps: float, kv_offset: int, device: str,
                     B: int = 1, q_stride: int = 0, kv_stride: int = 0):
  threads = max(1, min(Device[device].renderer.global_max[0], B * n_head))
  name = f"cpu_mla_decode_attention_{n_head}_{kv_lora}_{qk_rope}" + (f"_rows{B}" if B > 1 else "")
  params = (Param("out", dtypes.float32, True), Param("cache", dtypes.float32, True, read=True), *(Param(n, dtypes.float32) for n in
            ("q_lat", "q_raw", "kv_raw", "kv_norm_w", "rope_cos", "rope_sin")), Param("pos", dtypes.int32))
  src = attention_source(name, n_head, kv_lora, qk_nope, qk_rope, scale, eps, kv_offset, threads, B, q_stride, kv_stride)
  return source_program(name, params, src, (threads, 1, 1), (1, 1, 1), device, core_id=threads)

def mla_decode_attention(q_lat: Tensor, q_raw: Tensor, kv_raw: Tensor, kv_norm_w: Tensor, cache: Tensor, rope_cos: Tensor,
                         rope_sin: Tensor, pos: Tensor, *, n_head: int, kv_lora: int, qk_nope: int, qk_rope: int, scale: float,
                         eps: float, kv_offset: int = 0) -> Tensor:
  """kernels.mla_attention.mla_decode_attention's contract on the CPU (an fp32 cache), its arguments as that one checks
  them: q_lat (B, n_head, kv_lora), q_raw and kv_raw (B, row) rows, pos (B, 2). The attention output (B, n_head, kv_lora)
  and each row's latent row written into the cache by the same kernel."""
  if not attention_supports(n_head, kv_lora, qk_rope, cache): raise ValueError(f"cpu.mla_decode_attention: shape or cache {cache.dtype} not taken")
  B = pos.shape[0]
  strides = (B, q_raw.shape[-1], kv_raw.shape[-1]) if B > 1 else ()
  fxn = attention_kernel(n_head, kv_lora, qk_nope, qk_rope, float(scale), float(eps), kv_offset, q_lat.device, *strides)
  flat = lambda t: t.reshape(-1)
  return Tensor.empty(B, n_head, kv_lora, device=q_lat.device).custom_kernel(
    cache, flat(q_lat), flat(q_raw), flat(kv_raw), kv_norm_w, rope_cos, rope_sin, flat(pos), fxn=fxn)[0]

PREFILL_TOKENS = 2   # a prefill chunk's tokens a unit of work takes: each key row read once serves them and a few heads

def prefill_heads(n_head: int) -> int:
  """Heads a unit of a chunk's attention takes (with PREFILL_TOKENS tokens, their queries and sums in L1: 8 of each)."""
  return next(h for h in (4, 2, 1) if n_head % h == 0)

def prefill_attention_source(name: str, n_head: int, kv_lora: int, qk_rope: int, scale: float, tokens: int, max_context: int,
                             threads: int) -> str:
  """MLA's causal attention of a prefill chunk (mla_attention.mla_prefill_attention's contract, absorbed: the queries against
  the latent rows, the values their first kv_lora) over an fp32 cache that holds the chunk's rows already. Units of
  PREFILL_TOKENS tokens x prefill_heads heads go round the threads (the later tokens have more keys); a unit walks the
  sequence's rows 0..its last token's position once, each key row serving every (token, head) of it that may see it, with
  an online softmax in base 2. A token's keys end at its position or at the sequence's last row (the rows of a chunk's
  padding past its length are computed and dropped)."""
  L, R, H, TB, HB = kv_lora, qk_rope, n_head, PREFILL_TOKENS, prefill_heads(n_head)
  D, units = L + R, -(-tokens // TB) * (H // HB)
  qs = f"{scale * math.log2(math.e):.9e}f"   # the queries' factor: scale and log2 e
  return _ATTN_HEAD + f"""/* tokens i0..i1-1 (at most {TB}) and heads h0..h0+{HB - 1} */
static void attend(float* restrict out, const float* restrict cache, const float* restrict q, const float* restrict q_pe,
                   const int* restrict pos, const int i0, const int i1, const int h0) {{
  const float* rows = cache + (long)pos[1] * {D};
  f16v qv[{TB * HB}][{D // 16}], acc[{TB * HB}][{L // 16}];
  float m[{TB * HB}], l[{TB * HB}];
  int last[{TB}];
  for (int i = i0; i < i1; i++) {{
    const int p = pos[0] + i;
    last[i - i0] = p < {max_context - 1} ? p : {max_context - 1};
    for (int hh = 0; hh < {HB}; hh++) {{
      const int u = (i - i0) * {HB} + hh;
      float* qf = (float*)qv[u];
      const float* ql = q + ((long)i * {H} + h0 + hh) * {L};
      const float* qr = q_pe + ((long)i * {H} + h0 + hh) * {R};
      for (int c = 0; c < {L}; c++) qf[c] = ql[c] * {qs};
      for (int c = 0; c < {R}; c++) qf[{L} + c] = qr[c] * {qs};
      m[u] = -3.0e38f; l[u] = 0.0f;
      for (int v = 0; v < {L // 16}; v++) acc[u][v] = 0.0f;
    }}
  }}
  for (int t = 0; t <= last[i1 - 1 - i0]; t++) {{
    const f16v_a4* kt = (const f16v_a4*)(rows + (long)t * {D});
    for (int j = 0; j < i1 - i0; j++) {{
      if (t > last[j]) continue;
      for (int u = j * {HB}; u < (j + 1) * {HB}; u++) attend_key(qv[u], kt, acc[u], &m[u], &l[u], {D // 16}, {L // 16});
    }}
  }}
  for (int i = i0; i < i1; i++) for (int hh = 0; hh < {HB}; hh++) {{
    const int u = (i - i0) * {HB} + hh;
    const float r = 1.0f / l[u];
    const float* af = (const float*)acc[u];
    float* o = out + ((long)i * {H} + h0 + hh) * {L};
    for (int c = 0; c < {L}; c++) o[c] = af[c] * r;
  }}
}}
void {name}(float* restrict out, const float* restrict q, const float* restrict q_pe, const float* restrict cache,
            const int* restrict pos, const int core_id) {{
  for (int u = core_id; u < {units}; u += {threads}) {{
    const int i0 = u / {H // HB} * {TB}, h0 = u % {H // HB} * {HB};
    attend(out, cache, q, q_pe, pos, i0, i0 + {TB} < {tokens} ? i0 + {TB} : {tokens}, h0);
  }}
}}
"""

@functools.lru_cache(maxsize=None)
def prefill_attention_kernel(n_head: int, kv_lora: int, qk_rope: int, scale: float, tokens: int, max_context: int, device: str):
  units = -(-tokens // PREFILL_TOKENS) * (n_head // prefill_heads(n_head))
  threads = max(1, min(Device[device].renderer.global_max[0], units))
  name = f"cpu_mla_prefill_attention_{n_head}_{kv_lora}_{qk_rope}_t{tokens}"
  params = (Param("out", dtypes.float32, True), *(Param(n, dtypes.float32) for n in ("q", "q_pe", "cache")), Param("pos", dtypes.int32))
  src = prefill_attention_source(name, n_head, kv_lora, qk_rope, scale, tokens, max_context, threads)
  return source_program(name, params, src, (threads, 1, 1), (1, 1, 1), device, core_id=threads)

def mla_prefill_attention(q: Tensor, q_pe: Tensor, cache: Tensor, pos: Tensor, *, kv_lora: int, qk_rope: int, scale: float,
                          max_context: int) -> Tensor:
  """kernels.mla_attention.mla_prefill_attention's contract on the CPU (an fp32 cache), for a concrete chunk length T (that
  one checks the arguments and slices a symbolic chunk back): q (T, n_head, kv_lora), q_pe (T, n_head, qk_rope) roped, pos
  (2,) int32 [start, first row]. The output (T, n_head, kv_lora)."""
  T, n_head = q.shape[0], q.shape[1]
  if not attention_supports(n_head, kv_lora, qk_rope, cache): raise ValueError(f"cpu.mla_prefill_attention: shape or cache {cache.dtype} not taken")
  fxn = prefill_attention_kernel(n_head, kv_lora, qk_rope, float(scale), T, max_context, q.device)
  return Tensor.empty(T, n_head, kv_lora, device=q.device).custom_kernel(q, q_pe, cache, pos, fxn=fxn)[0]
