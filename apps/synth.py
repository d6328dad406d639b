"""Synthetic deepseek2-family GGUF models: the published architecture, metadata, tensor layout and quant mix of
GLM-4.7-Flash, DeepSeek-V2-Lite and Youtu-LLM-2B (plus small '-tiny' variants of the same structure), with random weights.

No real weights can be downloaded where this project is built and tested, so tests, benchmarks and the default model of
apps/llm.py use these files. They are written the way current llama.cpp writes these models (MLA-absorbed attn_k_b /
attn_v_b, expert tensors stacked expert-major, the deepseek2.* keys), carry the real DeepSeek-LLM BPE tokenizer padded to
the preset's vocabulary, and load in llama.cpp unchanged (tools/check_llamacpp_load.py proves it).

Determinism: every tensor draws from its own PCG64 stream seeded from (seed, tensor name), and only the bit generator's raw
output and exact IEEE arithmetic (no transcendental functions) shape the values, so the same preset, mix and seed give a
byte-identical file on any machine and numpy version, whatever order or thread the tensors are made in.

  python -m apps.synth glm-4.7-flash --mix release        # -> .cache/models/..., cached
  python -m apps.synth deepseek-v2-lite-tiny --mix f32 -o /tmp/x.gguf
  python -m apps.synth --list                              # presets with parameter counts and file sizes

This module imports only the stdlib, numpy, apps.gguf and apps.vocab: it must also run on the GPU machine (no network).
"""
from __future__ import annotations
import argparse, dataclasses, functools, hashlib, math, os, sys, time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
import numpy as np
from apps.gguf import BLOCK, GGMLType, GGUFFile, GGUFWriter, ValueType, tensor_nbytes
from apps.vocab import cache_dir, cache_lock, vocab_file

GENERATOR_VERSION = 1  # bump whenever the bytes a preset/mix/seed produces change: cached files are keyed by it
ARCH = "deepseek2"
TEMPLATES = Path(__file__).resolve().parent / "chat_templates"

# ---------------------------------------------------------------- presets

@dataclass(frozen=True)
class Preset:
  name: str
  title: str            # general.name of the real model
  template: str         # apps/chat_templates/<template>.jinja and its special tokens (SPECIALS)
  n_layer: int          # main blocks (block_count = n_layer + n_nextn)
  n_embd: int
  n_head: int
  n_vocab: int
  q_lora: int           # 0: no q compression, a direct attn_q (DeepSeek-V2-Lite)
  kv_lora: int
  qk_nope: int
  qk_rope: int
  v_head: int
  n_ff: int             # dense FFN width (the leading dense blocks, or every block when n_expert == 0)
  n_dense_lead: int     # leading_dense_block_count
  n_expert: int = 0     # routed experts (0: dense model)
  n_expert_used: int = 0
  n_ff_exp: int = 0     # routed and shared expert width
  n_shared: int = 0
  gating: str = "softmax"          # expert_gating_func: softmax | sigmoid
  exp_probs_b: bool = False        # selection bias (noaux_tc routing)
  weights_norm: bool = False       # renormalize the top-k weights
  weights_scale: float | None = None
  n_group: int | None = None
  topk_group: int | None = None
  rope_theta: float = 10000.0
  yarn: tuple[float, int, float, float, float] | None = None  # (factor, original ctx, mscale_all_dim, beta_fast, beta_slow)
  n_ctx: int = 4096
  rms_eps: float = 1e-6
  tied: bool = False    # no output.weight: the output reuses token_embd
  n_nextn: int = 0      # appended MTP (nextn) blocks
  @property
  def is_moe(self) -> bool: return self.n_expert > 0
  @property
  def n_block(self) -> int: return self.n_layer + self.n_nextn

def _tiny(p: Preset, **kw) -> Preset: return dataclasses.replace(p, name=p.name + "-tiny", n_ctx=8192, **kw)

# Full presets: the published configs (config.json of each model; see apps/chat_templates/SOURCES.md for provenance).
_GLM = Preset("glm-4.7-flash", "GLM-4.7-Flash", "glm-4.7-flash", n_layer=47, n_embd=2048, n_head=20, n_vocab=154880, q_lora=768,
              kv_lora=512, qk_nope=192, qk_rope=64, v_head=256, n_ff=10240, n_dense_lead=1, n_expert=64, n_expert_used=4, n_ff_exp=1536,
              n_shared=1, gating="sigmoid", exp_probs_b=True, weights_norm=True, weights_scale=1.8, n_group=1, topk_group=1,
              rope_theta=1e6, n_ctx=202752, rms_eps=1e-5)
_DSV2 = Preset("deepseek-v2-lite", "DeepSeek-V2-Lite", "deepseek-v2-lite", n_layer=27, n_embd=2048, n_head=16, n_vocab=102400, q_lora=0,
               kv_lora=512, qk_nope=128, qk_rope=64, v_head=128, n_ff=10944, n_dense_lead=1, n_expert=64, n_expert_used=6, n_ff_exp=1408,
               n_shared=2, gating="softmax", weights_scale=1.0, n_group=1, topk_group=1, rope_theta=10000.0,
               yarn=(40.0, 4096, 0.707, 32.0, 1.0), n_ctx=163840, rms_eps=1e-6)
# rope_theta of Youtu-LLM-2B is not confirmed here: 10000 is transformers' YoutuConfig default
_YOUTU = Preset("youtu-llm-2b", "Youtu-LLM-2B", "youtu-llm-2b", n_layer=32, n_embd=2048, n_head=16, n_vocab=128256, q_lora=1536,
                kv_lora=512, qk_nope=128, qk_rope=64, v_head=128, n_ff=6144, n_dense_lead=32, rope_theta=10000.0, n_ctx=131072,
                rms_eps=1e-6, tied=True)

# Tiny variants: same structure and features at small dims. ne[0] of every matrix is a multiple of 256 where the real model's
# is, so K-quants apply (and fall back exactly where the real model's do); the real DeepSeek-LLM vocabulary is kept whole.
# llama.cpp reads q_lora_rank unless block_count is 26 or 27, so the direct-attn_q DeepSeek-V2-Lite-tiny keeps 27 blocks.
PRESETS: dict[str, Preset] = {p.name: p for p in (
  _GLM, _DSV2, _YOUTU,
  _tiny(_GLM, n_layer=5, n_embd=256, n_head=4, n_vocab=102464, q_lora=256, kv_lora=256, qk_nope=96, qk_rope=32, v_head=64, n_ff=512,
        n_expert=8, n_expert_used=2, n_ff_exp=256),
  _tiny(_DSV2, n_layer=27, n_embd=256, n_head=4, n_vocab=102400, kv_lora=256, qk_nope=64, qk_rope=32, v_head=64, n_ff=512,
        n_expert=8, n_expert_used=3, n_ff_exp=128),
  _tiny(_YOUTU, n_layer=4, n_embd=256, n_head=4, n_vocab=102464, q_lora=256, kv_lora=256, qk_nope=64, qk_rope=32, v_head=64, n_ff=512,
        n_dense_lead=4),
)}
TINY = tuple(n for n in PRESETS if n.endswith("-tiny"))

# Special tokens each chat template needs as single tokens: (text, id in the full model, token type). Full presets place them
# at the real model's ids inside the padding above the 102400 DeepSeek-LLM tokens; tiny presets pack them from 102400 on.
NORMAL, CONTROL, USER_DEFINED, UNUSED = 1, 3, 4, 5
_GLM_SPECIALS = [(t, 151329 + i, CONTROL) for i, t in enumerate((
  "<|endoftext|>", "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>", "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>",
  "<|begin_of_image|>", "<|end_of_image|>", "<|begin_of_video|>", "<|end_of_video|>", "<|begin_of_audio|>", "<|end_of_audio|>",
  "<|begin_of_transcription|>", "<|end_of_transcription|>", "<|code_prefix|>", "<|code_middle|>", "<|code_suffix|>"))]
_GLM_SPECIALS += [(t, 151350 + i, USER_DEFINED) for i, t in enumerate((
  "<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<arg_key>", "</arg_key>",
  "<arg_value>", "</arg_value>", "/nothink"))]
_GLM_SPECIALS += [(t, 151361 + i, CONTROL) for i, t in enumerate(("<|begin_of_box|>", "<|end_of_box|>", "<|image|>", "<|video|>"))]
# Youtu-LLM-2B: bos/eos ids from transformers' YoutuConfig; texts and the role markers are a best-effort stand-in (SOURCES.md)
_YOUTU_SPECIALS = [("<|begin_of_text|>", 128000, CONTROL), ("<|end_of_text|>", 128001, CONTROL), ("<|System|>", 128002, CONTROL),
                   ("<|User|>", 128003, CONTROL), ("<|Assistant|>", 128004, CONTROL), ("<think>", 128005, USER_DEFINED),
                   ("</think>", 128006, USER_DEFINED)]
# template -> (added tokens, {role: token text}, add_bos). DeepSeek-V2's bos/eos are already in the DeepSeek-LLM vocabulary.
SPECIALS: dict[str, tuple[list, dict[str, str], bool]] = {
  "glm-4.7-flash": (_GLM_SPECIALS, {"bos": "[gMASK]", "eos": "<|endoftext|>", "eot": "<|user|>", "eom": "<|observation|>",
                                    "unknown": "<|endoftext|>", "padding": "<|endoftext|>"}, False),
  "deepseek-v2-lite": ([], {"bos": "<｜begin▁of▁sentence｜>", "eos": "<｜end▁of▁sentence｜>", "padding": "<｜end▁of▁sentence｜>"}, True),
  "youtu-llm-2b": (_YOUTU_SPECIALS, {"bos": "<|begin_of_text|>", "eos": "<|end_of_text|>", "padding": "<|end_of_text|>"}, True),
}

# ---------------------------------------------------------------- tensor plan and quant mixes

F32, F16, BF16 = GGMLType.F32, GGMLType.F16, GGMLType.BF16
Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 = GGMLType.Q4_0, GGMLType.Q4_1, GGMLType.Q5_0, GGMLType.Q5_1, GGMLType.Q8_0
Q4_K, Q5_K, Q6_K = GGMLType.Q4_K, GGMLType.Q5_K, GGMLType.Q6_K

MIXES = ("release", "f32", "q8_0", "q4_0", "kquant")
FILE_TYPE = {"release": 2, "f32": 0, "q8_0": 7, "q4_0": 2, "kquant": 15}  # LLAMA_FTYPE: MOSTLY_Q4_0, ALL_F32, MOSTLY_Q8_0, .., Q4_K_M

def _mix_type(mix: str, name: str, ne: tuple[int, ...]) -> GGMLType:
  # llama.cpp never quantizes 1-D tensors (norms, exp_probs_b) nor the router
  if len(ne) == 1 or ".ffn_gate_inp." in name or mix == "f32": return F32
  if mix == "q8_0": return Q8_0
  if mix == "q4_0": return Q4_0
  if mix == "release":  # the common Q4_0 release: Q4_0, shared expert gate/up Q5_K, shared down and output Q6_K
    if name == "output.weight" or ".ffn_down_shexp." in name: return Q6_K
    if "_shexp." in name: return Q5_K
    return Q4_0
  if mix == "kquant":   # Q4_K_M-like: Q4_K, the sensitive attention tensors Q5_K, every FFN down and the output Q6_K
    if name == "output.weight" or ".ffn_down" in name: return Q6_K
    if any(k in name for k in (".attn_k_b.", ".attn_v_b.", ".attn_output.")): return Q5_K
    return Q4_K
  raise ValueError(f"unknown quant mix '{mix}' (choose from {', '.join(MIXES)})")

# llama-quantize's fallback where a row (ne[0]) is not a multiple of the type's block: 256-blocks drop to a 32-block type, then F16
_FALLBACK = {Q4_K: Q5_0, Q5_K: Q5_1, Q6_K: Q8_0}

def _fit(typ: GGMLType, ne0: int) -> GGMLType:
  if ne0 % BLOCK[typ][0]: typ = _FALLBACK.get(typ, F16)
  return typ if ne0 % BLOCK[typ][0] == 0 else F16

def _shapes(p: Preset) -> list[tuple[str, tuple[int, ...]]]:
  """Tensor names and ggml shapes (ne, innermost first) in the order the file stores them, as llama.cpp's deepseek2 loader wants."""
  k_head = p.qk_nope + p.qk_rope
  out = [("token_embd.weight", (p.n_embd, p.n_vocab))]
  for i in range(p.n_block):
    b = f"blk.{i}."
    out.append((b + "attn_norm.weight", (p.n_embd,)))
    if p.q_lora: out += [(b + "attn_q_a_norm.weight", (p.q_lora,))]
    out.append((b + "attn_kv_a_norm.weight", (p.kv_lora,)))
    if p.q_lora: out += [(b + "attn_q_a.weight", (p.n_embd, p.q_lora)), (b + "attn_q_b.weight", (p.q_lora, p.n_head * k_head))]
    else: out.append((b + "attn_q.weight", (p.n_embd, p.n_head * k_head)))
    out += [(b + "attn_kv_a_mqa.weight", (p.n_embd, p.kv_lora + p.qk_rope)),
            (b + "attn_k_b.weight", (p.qk_nope, p.kv_lora, p.n_head)),   # per head: q_nope -> latent (absorbed into q)
            (b + "attn_v_b.weight", (p.kv_lora, p.v_head, p.n_head)),    # per head: latent -> v
            (b + "attn_output.weight", (p.n_head * p.v_head, p.n_embd)),
            (b + "ffn_norm.weight", (p.n_embd,))]
    if i < p.n_dense_lead or not p.is_moe:
      out += [(b + "ffn_gate.weight", (p.n_embd, p.n_ff)), (b + "ffn_up.weight", (p.n_embd, p.n_ff)), (b + "ffn_down.weight", (p.n_ff, p.n_embd))]
    else:
      out.append((b + "ffn_gate_inp.weight", (p.n_embd, p.n_expert)))
      if p.exp_probs_b: out.append((b + "exp_probs_b.bias", (p.n_expert,)))
      n_sh = p.n_ff_exp * p.n_shared
      out += [(b + "ffn_gate_exps.weight", (p.n_embd, p.n_ff_exp, p.n_expert)), (b + "ffn_up_exps.weight", (p.n_embd, p.n_ff_exp, p.n_expert)),
              (b + "ffn_down_exps.weight", (p.n_ff_exp, p.n_embd, p.n_expert))]
      if n_sh: out += [(b + "ffn_gate_shexp.weight", (p.n_embd, n_sh)), (b + "ffn_up_shexp.weight", (p.n_embd, n_sh)),
                       (b + "ffn_down_shexp.weight", (n_sh, p.n_embd))]
    if i >= p.n_layer:  # MTP block: the embedding and hidden state are normed, concatenated and projected back to n_embd
      out += [(b + "nextn.eh_proj.weight", (2 * p.n_embd, p.n_embd)), (b + "nextn.enorm.weight", (p.n_embd,)),
              (b + "nextn.hnorm.weight", (p.n_embd,)), (b + "nextn.shared_head_norm.weight", (p.n_embd,))]
  out.append(("output_norm.weight", (p.n_embd,)))
  if not p.tied: out.append(("output.weight", (p.n_embd, p.n_vocab)))
  return out

def get_preset(preset: str | Preset) -> Preset:
  if isinstance(preset, Preset): return preset
  if preset not in PRESETS: raise ValueError(f"unknown preset '{preset}' (choose from {', '.join(PRESETS)})")
  return PRESETS[preset]

def plan(preset: str | Preset, mix: str = "release") -> list[tuple[str, tuple[int, ...], GGMLType]]:
  """The file's tensors (name, ne, type) without data: parameter counts and sizes can be checked without writing GBs."""
  p = get_preset(preset)
  if mix not in MIXES: raise ValueError(f"unknown quant mix '{mix}' (choose from {', '.join(MIXES)})")
  return [(name, ne, _fit(_mix_type(mix, name, ne), ne[0])) for name, ne in _shapes(p)]

def param_counts(preset: str | Preset) -> dict[str, int]:
  """total: every weight in the file; active: weights one token touches (n_expert_used of the routed experts, no MTP block);
  embedding: token_embd (a lookup, which many 'active' figures leave out)."""
  p = get_preset(preset)
  total = active = emb = 0
  for name, ne in _shapes(p):
    n = math.prod(ne)
    total += n
    if name == "token_embd.weight": emb = n
    if name.startswith("blk.") and int(name.split(".")[1]) >= p.n_layer: continue
    active += n * p.n_expert_used // p.n_expert if "_exps." in name else n
  return {"total": total, "active": active, "embedding": emb}

def file_nbytes(preset: str | Preset, mix: str = "release") -> int:
  """Bytes of tensor data (the header adds a few MB of tokenizer)."""
  return sum(tensor_nbytes(ne, t) for _, ne, t in plan(preset, mix))

# ---------------------------------------------------------------- random values from the raw bit stream

def _bitgen(rng) -> np.random.BitGenerator: return rng.bit_generator if isinstance(rng, np.random.Generator) else rng

def _u32(bg: np.random.BitGenerator, n: int) -> np.ndarray:
  return bg.random_raw(-(-n // 2)).astype("<u8", copy=False).view("<u4")[:n]

def _bytes(bg: np.random.BitGenerator, n: int) -> np.ndarray:
  return bg.random_raw(-(-n // 8)).astype("<u8", copy=False).view(np.uint8)[:n]

def _sym(bg: np.random.BitGenerator, n: int) -> np.ndarray:
  """float32 uniform on (-1, 1) from 23 random bits; every step is exact, so the result is the same on every machine."""
  k = (_u32(bg, n) >> np.uint32(9)).astype(np.float32)
  return (k + np.float32(0.5)) * np.float32(2.0 ** -22) - np.float32(1.0)

def _ints(bg, n: int, lo: int, hi: int) -> np.ndarray: return (lo + _u32(bg, n) % np.uint32(hi - lo + 1)).astype(np.int32)
def _signs(bg, n: int) -> np.ndarray: return np.where(_u32(bg, n) & np.uint32(1), np.float32(-1), np.float32(1))
def _mag(bg, n: int) -> np.ndarray: return np.float32(1.0) + np.float32(0.5) * _sym(bg, n)  # block scale spread: uniform [0.5, 1.5)
def _f16(x: np.ndarray) -> np.ndarray: return np.asarray(x, np.float32).astype("<f2").view(np.uint8).reshape(-1, 2)

def _bf16(x: np.ndarray) -> np.ndarray:
  b = x.astype(np.float32).view("<u4").astype(np.uint64)
  return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype("<u2").view(np.uint8)  # round to nearest even

_E_MAG2 = 13 / 12  # E[r^2], r uniform on [0.5, 1.5)
def _e_sq(lo: int, hi: int) -> float: return float(np.mean(np.arange(lo, hi + 1, dtype=np.float64) ** 2))
# K-quant sub-block scale ranges: 6-bit unsigned for Q4_K/Q5_K (mins m chosen to cancel the mean), signed int8 magnitudes for Q6_K
_SC_K, _SC_6 = (16, 63), (4, 31)

def random_blocks(typ: GGMLType, n_weights: int, rng: np.random.Generator | np.random.BitGenerator, std: float) -> np.ndarray:
  """n_weights random weights of ggml type typ as raw bytes (uint8): random payload bytes with controlled fp16 scales, valid
  blocks whose dequantized values have mean ~0 and standard deviation ~std. Scales vary from block to block (and sub-block)
  so a kernel that mixes up scale indexing gives wrong numbers. Uses only rng's raw bit stream (stable across numpy versions)."""
  typ = GGMLType(typ)
  if typ not in BLOCK: raise ValueError(f"no block layout for {typ.name}")
  per, size = BLOCK[typ]
  if n_weights % per: raise ValueError(f"{n_weights} weights are not a whole number of {typ.name} blocks of {per}")
  if not (std > 0 and math.isfinite(std)): raise ValueError(f"std must be positive and finite, got {std}")
  bg, nb = _bitgen(rng), n_weights // per
  if typ in (F32, F16, BF16):
    x = _sym(bg, n_weights) * np.float32(std * math.sqrt(3))
    return x.view(np.uint8) if typ == F32 else x.astype("<f2").view(np.uint8) if typ == F16 else _bf16(x)
  out = _bytes(bg, nb * size).reshape(nb, size)  # random quants (and filler where scales go)
  # (q - offset) * d with random-sign d for the symmetric types; d*q + m with m = -mean(q)*d for the _1 types
  simple = {Q4_0: (21.5, True, None), Q5_0: (85.5, True, None), Q8_0: (5461.5, True, None), Q4_1: (21.25, False, 7.5), Q5_1: (85.25, False, 15.5)}
  if typ in simple:
    c, signed, mean_q = simple[typ]
    d = np.float32(std / math.sqrt(_E_MAG2 * c)) * _mag(bg, nb) * (_signs(bg, nb) if signed else np.float32(1))
    out[:, 0:2] = _f16(d)
    if mean_q is not None: out[:, 2:4] = _f16(-np.float32(mean_q) * out[:, 0:2].copy().view("<f2")[:, 0].astype(np.float32))
    return out.reshape(-1)
  if typ in (Q4_K, Q5_K):  # y = d*sc*q - dmin*m per 32-weight sub-block; dmin = 8d (16d) and m = round(mean(q)*sc/8 (16)) cancel the mean
    var_q, mean_q, ratio = (21.25, 7.5, 8) if typ == Q4_K else (85.25, 15.5, 16)
    d = np.float32(std / math.sqrt(_E_MAG2 * var_q * _e_sq(*_SC_K))) * _mag(bg, nb)
    sc = _ints(bg, nb * 8, *_SC_K).reshape(nb, 8)
    m = np.rint(sc * (mean_q / ratio)).astype(np.int32)
    s = np.empty((nb, 12), np.uint8)  # ggml's 6-bit packing (get_scale_min_k4)
    s[:, 0:4] = sc[:, 0:4] | ((sc[:, 4:8] >> 4) << 6)
    s[:, 4:8] = m[:, 0:4] | ((m[:, 4:8] >> 4) << 6)
    s[:, 8:12] = (sc[:, 4:8] & 0xF) | ((m[:, 4:8] & 0xF) << 4)
    out[:, 0:2], out[:, 2:4], out[:, 4:16] = _f16(d), _f16(d * np.float32(ratio)), s
    return out.reshape(-1)
  if typ == Q6_K:  # y = d * sc * (q - 32) per 16-weight sub-block, sc signed int8; layout ql[128] qh[64] scales[16] d
    d = np.float32(std / math.sqrt(_E_MAG2 * 341.5 * _e_sq(*_SC_6))) * _mag(bg, nb)
    sc = _ints(bg, nb * 16, *_SC_6) * _signs(bg, nb * 16).astype(np.int32)
    out[:, 192:208], out[:, 208:210] = sc.astype(np.int8).view(np.uint8).reshape(nb, 16), _f16(d)
    return out.reshape(-1)
  raise ValueError(f"random_blocks does not make {typ.name}")

def _seed_seq(seed: int, name: str) -> np.random.SeedSequence:
  h = hashlib.sha256(name.encode()).digest()
  return np.random.SeedSequence([int(seed) & 0xFFFFFFFF, int(seed) >> 32] + [int.from_bytes(h[i:i + 4], "little") for i in range(0, 16, 4)])

def _init(p: Preset, name: str, ne: tuple[int, ...]) -> tuple[float, float]:
  """(mean, std) of a tensor's weights: norms near 1, a small selection bias, matrices (the router too) 1/sqrt(fan-in) so
  activations keep their scale through any depth (fan-in is ne[0], the dimension ggml_mul_mat contracts)."""
  if len(ne) == 1: return (0.0, 0.05) if name.endswith(".bias") else (1.0, 0.05)
  return 0.0, 1.0 / math.sqrt(ne[0])  # token_embd too: small like trained embeddings, and tied output logits get std ~1

def tensor_data(preset: str | Preset, name: str, ne: tuple[int, ...], typ: GGMLType, seed: int = 0) -> np.ndarray:
  """One tensor's bytes, from its own stream: (seed, name) fixes it whatever else the file holds."""
  p = get_preset(preset)
  mean, std = _init(p, name, ne)
  rng = np.random.PCG64(_seed_seq(seed, name))
  if mean == 0.0: return random_blocks(typ, math.prod(ne), rng, std)
  if typ not in (F32, F16, BF16): raise ValueError(f"{name}: weights around {mean} are kept in a float type, not {typ.name}")
  x = random_blocks(F32, math.prod(ne), rng, std).view(np.float32) + np.float32(mean)
  return x.view(np.uint8) if typ == F32 else x.astype("<f2").view(np.uint8) if typ == F16 else _bf16(x)

# ---------------------------------------------------------------- tokenizer and metadata

@functools.lru_cache(maxsize=1)
def _base_vocab() -> tuple[tuple[str, ...], np.ndarray, tuple[str, ...]]:
  with GGUFFile(vocab_file("deepseek-llm")) as f:
    return (tuple(f.require("tokenizer.ggml.tokens")), f.require("tokenizer.ggml.token_type").astype(np.int32),
            tuple(f.require("tokenizer.ggml.merges")))

def template_text(preset: str | Preset) -> str:
  return (TEMPLATES / f"{get_preset(preset).template}.jinja").read_text(encoding="utf-8")

def vocab(preset: str | Preset) -> tuple[list[str], np.ndarray, list[str], dict[str, int], bool]:
  """(tokens, token types, merges, {role: id}, add_bos): the DeepSeek-LLM BPE vocabulary padded to the preset's size with
  '[PAD{id}]' UNUSED tokens, the template's special tokens placed in the padding."""
  p = get_preset(preset)
  tokens, types, merges = _base_vocab()
  tokens, types, merges = list(tokens), types.copy(), list(merges)
  n_real = len(tokens)
  added, roles, add_bos = SPECIALS[p.template]
  at_real_ids = max((i for _, i, _ in added), default=-1) < p.n_vocab  # full presets; tiny ones pack them from n_real on
  if p.n_vocab < n_real + (0 if at_real_ids else len(added)):
    raise ValueError(f"preset {p.name}: vocab {p.n_vocab} cannot hold the {n_real} DeepSeek-LLM tokens and {len(added)} special tokens")
  tokens += [f"[PAD{i}]" for i in range(n_real, p.n_vocab)]
  types = np.concatenate([types, np.full(p.n_vocab - n_real, UNUSED, np.int32)])
  where = {}
  for k, (text, real_id, typ) in enumerate(added):
    tid = real_id if at_real_ids else n_real + k
    tokens[tid], types[tid], where[text] = text, typ, tid
  return tokens, types, merges, {role: where[t] if t in where else tokens.index(t) for role, t in roles.items()}, add_bos

def special_ids(preset: str | Preset) -> dict[str, int]:
  """{text: id} of the chat template's special tokens (the added ones and the bos/eos/... roles)."""
  p = get_preset(preset)
  tokens, _, _, ids, _ = vocab(p)
  out = {tokens[i]: i for i in ids.values()}
  out.update({t: tokens.index(t) for t, _, _ in SPECIALS[p.template][0]})
  return out

def metadata(preset: str | Preset, mix: str, seed: int) -> list[tuple[str, object, ValueType, bool]]:
  """(key, value, type, is_array) in file order: the keys llama.cpp's converter and quantizer write for this model."""
  p = get_preset(preset)
  a, u32, f32, s, b = ARCH, ValueType.UINT32, ValueType.FLOAT32, ValueType.STRING, ValueType.BOOL
  kv: list = [("general.architecture", a, s), ("general.type", "model", s), ("general.name", f"{p.title} (synthetic random weights)", s),
              ("general.description", f"apps/synth.py preset {p.name}, mix {mix}, seed {seed}: the published architecture, random weights", s),
              ("general.file_type", FILE_TYPE[mix], u32), ("general.quantization_version", 2, u32),
              ("synth.generator_version", GENERATOR_VERSION, u32), ("synth.preset", p.name, s), ("synth.mix", mix, s),
              ("synth.seed", int(seed), ValueType.UINT64),
              (f"{a}.block_count", p.n_block, u32), (f"{a}.context_length", p.n_ctx, u32), (f"{a}.embedding_length", p.n_embd, u32),
              (f"{a}.feed_forward_length", p.n_ff, u32), (f"{a}.attention.head_count", p.n_head, u32),
              (f"{a}.attention.head_count_kv", 1, u32),  # MLA runs as MQA over the shared latent
              (f"{a}.rope.freq_base", p.rope_theta, f32), (f"{a}.attention.layer_norm_rms_epsilon", p.rms_eps, f32)]
  if p.is_moe:
    kv += [(f"{a}.expert_used_count", p.n_expert_used, u32)]
    if p.n_group is not None: kv += [(f"{a}.expert_group_count", p.n_group, u32), (f"{a}.expert_group_used_count", p.topk_group, u32)]
    kv += [(f"{a}.expert_gating_func", {"softmax": 1, "sigmoid": 2}[p.gating], u32)]  # always written: llama.cpp guesses otherwise
  kv += [(f"{a}.leading_dense_block_count", p.n_dense_lead if p.is_moe else p.n_layer, u32), (f"{a}.vocab_size", p.n_vocab, u32)]
  if p.q_lora: kv += [(f"{a}.attention.q_lora_rank", p.q_lora, u32)]
  kv += [(f"{a}.attention.kv_lora_rank", p.kv_lora, u32), (f"{a}.attention.key_length", p.kv_lora + p.qk_rope, u32),
         (f"{a}.attention.value_length", p.kv_lora, u32), (f"{a}.attention.key_length_mla", p.qk_nope + p.qk_rope, u32),
         (f"{a}.attention.value_length_mla", p.v_head, u32),
         (f"{a}.expert_feed_forward_length", p.n_ff_exp if p.is_moe else p.n_ff, u32)]
  if p.is_moe: kv += [(f"{a}.expert_count", p.n_expert, u32)]
  kv += [(f"{a}.expert_shared_count", p.n_shared, u32)]
  if p.weights_scale is not None: kv += [(f"{a}.expert_weights_scale", p.weights_scale, f32)]
  if p.weights_norm: kv += [(f"{a}.expert_weights_norm", True, b)]
  kv += [(f"{a}.rope.dimension_count", p.qk_rope, u32)]
  if p.yarn:
    factor, orig, mscale_all, beta_fast, beta_slow = p.yarn
    kv += [(f"{a}.rope.scaling.type", "yarn", s), (f"{a}.rope.scaling.factor", factor, f32),
           (f"{a}.rope.scaling.original_context_length", orig, u32), (f"{a}.rope.scaling.yarn_beta_fast", beta_fast, f32),
           (f"{a}.rope.scaling.yarn_beta_slow", beta_slow, f32),
           (f"{a}.rope.scaling.yarn_log_multiplier", 0.1 * mscale_all, f32)]  # the converter's 0.1 * mscale_all_dim
  if p.n_nextn: kv += [(f"{a}.nextn_predict_layers", p.n_nextn, u32)]
  tokens, types, merges, ids, add_bos = vocab(p)
  kv = [(k, v, t, False) for k, v, t in kv]
  kv += [("tokenizer.ggml.model", "gpt2", s, False), ("tokenizer.ggml.pre", "deepseek-llm", s, False), ("tokenizer.ggml.tokens", tokens, s, True),
         ("tokenizer.ggml.token_type", types, ValueType.INT32, True), ("tokenizer.ggml.merges", merges, s, True)]
  kv += [(f"tokenizer.ggml.{role}_token_id", tid, u32, False) for role, tid in ids.items()]
  kv += [("tokenizer.ggml.add_bos_token", add_bos, b, False), ("tokenizer.ggml.add_eos_token", False, b, False),
         ("tokenizer.chat_template", template_text(p), s, False)]
  return kv

# ---------------------------------------------------------------- writing

def config_key(preset: str | Preset) -> str:
  """Short hash of everything that shapes the file besides mix and seed: a changed preset or template misses the cache."""
  p = get_preset(preset)
  return hashlib.sha256((repr(p) + template_text(p)).encode()).hexdigest()[:10]

def cache_path(preset: str | Preset, mix: str = "release", seed: int = 0) -> Path:
  p = get_preset(preset)
  return cache_dir() / "models" / f"{p.name}-{mix}-seed{seed}-g{GENERATOR_VERSION}-{config_key(p)}.gguf"

class _Progress:
  """A one-line progress bar on stderr (a line every 10 s when stderr is not a terminal)."""
  def __init__(self, total: int, label: str):
    self.total, self.label, self.done = total, label, 0
    self.t0 = self.last = time.perf_counter()
    self.tty = sys.stderr.isatty()
  def __call__(self, n: int) -> None:
    self.done += n
    now = time.perf_counter()
    if now - self.last < (0.25 if self.tty else 10.0) and self.done < self.total: return
    self.last, el = now, now - self.t0
    frac = self.done / max(self.total, 1)
    bar = "#" * int(30 * frac)
    sys.stderr.write(f"{chr(13) if self.tty else ''}{self.label} [{bar:<30}] {100 * frac:5.1f}% {self.done / 2**30:6.2f}/{self.total / 2**30:.2f}"
                     f" GiB {self.done / 2**20 / max(el, 1e-9):6.0f} MiB/s" + ("\n" if self.done >= self.total or not self.tty else ""))
    sys.stderr.flush()

def write(preset: str | Preset, path: str | os.PathLike, mix: str = "release", seed: int = 0, progress: bool = True,
          workers: int | None = None) -> Path:
  """Write the file to path (atomically: a .part file is renamed at the end). Tensors are made ahead in a few threads
  (numpy's bit generators release the GIL); the bytes do not depend on the thread count."""
  p, path = get_preset(preset), Path(path)
  tensors = plan(p, mix)
  if path.parent: path.parent.mkdir(parents=True, exist_ok=True)
  w = GGUFWriter(path)
  for key, value, vt, is_array in metadata(p, mix, seed):
    if is_array: w.add_array(key, value, vt)
    else: w.add(key, value, vt)
  for name, ne, typ in tensors: w.add_tensor(name, ne, typ)
  workers = workers or max(1, min(4, os.cpu_count() or 1))
  ahead = workers + 1  # tensors in flight: bounds memory to a few of the largest
  with ThreadPoolExecutor(workers) as ex:
    pending: dict = {}
    todo = iter(tensors)
    def data_for(name: str) -> np.ndarray:
      while len(pending) < ahead and (nxt := next(todo, None)) is not None:
        pending[nxt[0]] = ex.submit(tensor_data, p, nxt[0], nxt[1], nxt[2], seed)
      return pending.pop(name).result()
    bar = _Progress(sum(tensor_nbytes(ne, t) for _, ne, t in tensors), f"{p.name} {mix}") if progress else None
    w.write(data_for, bar)
  return path

def generate(preset: str | Preset, mix: str = "release", seed: int = 0, path: str | os.PathLike | None = None, progress: bool = True) -> Path:
  """Path of the preset's GGUF file for this mix and seed. Without path it is cached (apps.vocab.cache_dir()/models, keyed by
  the generator version and the preset's config) and made only when missing; with path it is written there."""
  p = get_preset(preset)
  if mix not in MIXES: raise ValueError(f"unknown quant mix '{mix}' (choose from {', '.join(MIXES)})")
  if not isinstance(seed, int) or not 0 <= seed < 2**64: raise ValueError(f"seed must be an integer in [0, 2**64), got {seed!r}")
  if path is None:
    target = cache_path(p, mix, seed)
    if target.exists(): return target
    with cache_lock(target.name): return target if target.exists() else write(p, target, mix, seed, progress)
  return write(p, path, mix, seed, progress)

# ---------------------------------------------------------------- CLI

def _summary(name: str) -> str:
  c = param_counts(name)
  sizes = "  ".join(f"{m} {file_nbytes(name, m) / 2**30:.2f}G" for m in MIXES)
  return f"{name:24s} total {c['total'] / 1e9:7.3f}B  active {c['active'] / 1e9:6.3f}B  embedding {c['embedding'] / 1e9:5.3f}B  | {sizes}"

def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(prog="python -m apps.synth", description="Write a synthetic deepseek2-family GGUF model (random weights).")
  ap.add_argument("preset", nargs="?", help=f"one of: {', '.join(PRESETS)}")
  ap.add_argument("--mix", "--quant", dest="mix", default="release", help=f"quant mix: {', '.join(MIXES)} (default release)")
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--mtp", type=int, default=None, help="number of appended MTP (nextn) blocks (default: the preset's, 0)")
  ap.add_argument("-o", "--output", help="write here instead of the cache")
  ap.add_argument("--list", action="store_true", help="list presets with parameter counts and data sizes")
  ap.add_argument("--plan", action="store_true", help="print the tensor plan and exit")
  ap.add_argument("--quiet", action="store_true", help="no progress bar")
  args = ap.parse_args(argv)
  try:
    if args.list or args.preset is None:
      for n in PRESETS: print(_summary(n))
      return 0 if args.list else 2
    p = get_preset(args.preset)
    if args.mtp is not None:
      if args.mtp < 0 or (args.mtp and not p.is_moe): raise ValueError("--mtp needs a MoE preset and a count >= 0")
      p = dataclasses.replace(p, n_nextn=args.mtp)
    if args.plan:
      for name, ne, typ in plan(p, args.mix): print(f"{name:40s} {typ.name:5s} {list(ne)}")
      print(_summary(args.preset))
      return 0
    t0 = time.perf_counter()
    out = generate(p, args.mix, args.seed, args.output, progress=not args.quiet)
  except (ValueError, OSError, RuntimeError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 1
  print(f"{out}  ({out.stat().st_size / 2**30:.2f} GiB, {time.perf_counter() - t0:.1f} s)")
  return 0

if __name__ == "__main__": sys.exit(main())
