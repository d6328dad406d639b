"""Multi-head Latent Attention and DeepSeekMoE blocks for llama.cpp's `deepseek2` GGUFs.

DeepSeek-V2 (arXiv:2405.04434) compresses keys and values into one latent c_kv (kv_lora_rank) plus a small shared
RoPE key (qk_rope). With the up-projections absorbed into the query (attn_k_b) and the output (attn_v_b), as
llama.cpp stores them, attention is multi-query attention over ONE cache row per token: [c_kv | k_rope].
V is a view of that row's c_kv part, so there is no second cache. A long prefill chunk's tensor-op attention instead expands
the rows it reads into per-head keys and values (the form before absorption: fewer FLOPs there). The feed-forward is dense for the leading
blocks and DeepSeekMoE (routed + shared experts) after them.

Names follow the paper and the GGUF keys; the block math mirrors llama.cpp's src/models/deepseek2.cpp and
transformers' DeepseekV2 / Glm4MoeLite / Youtu modeling, which the tests compare against.
"""
from __future__ import annotations
import enum, math
from dataclasses import dataclass
import numpy as np
from tinygrad import Tensor, dtypes, UOp
from tinygrad.uop.ops import resolve
from apps.gguf import GGUFFile, GGUFError
from apps.packed import format_for
from apps.quantized import QuantizedLinear, QuantizedExpertWeights, dequantize_rows, load_tensor, rms_norm
from apps.dispatch import KernelCall, run, run_sum
from apps.kernels import Fusions, KernelModules, to_bound, has_mma

class Gating(enum.IntEnum):
  """llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE values."""
  SOFTMAX = 1         # DeepSeek-V2
  SIGMOID = 2         # DeepSeek-V3 / GLM-4.7-Flash
  SOFTMAX_WEIGHT = 3  # softmax over the selected logits only

@dataclass(frozen=True)
class Config:
  n_layer: int                # transformer blocks used for generation (nextn/MTP blocks excluded)
  dim: int
  n_head: int
  vocab_size: int
  norm_eps: float
  context_length: int
  q_lora_rank: int            # 0: direct attn_q (DeepSeek-V2-Lite)
  kv_lora_rank: int
  qk_nope: int
  qk_rope: int
  v_head: int
  ffn_dim: int                # dense blocks
  n_dense_lead: int
  n_expert: int = 0
  n_expert_used: int = 0
  n_expert_shared: int = 0
  expert_ffn: int = 0
  gating: Gating = Gating.SOFTMAX
  expert_weights_norm: bool = False
  expert_weights_scale: float = 1.0
  n_expert_groups: int = 1
  n_group_used: int = 1
  rope_theta: float = 10000.0
  rope_factor: float = 1.0    # YaRN scaling factor; 1.0 = no scaling
  rope_orig_ctx: int = 0
  yarn_log_mul: float = 0.0   # mscale_all_dim (GGUF stores 0.1x of it)
  yarn_beta_fast: float = 32.0
  yarn_beta_slow: float = 1.0
  n_nextn: int = 0

  @staticmethod
  def from_gguf(gf: GGUFFile) -> Config:
    """The model's hyperparameters from the file's metadata: each key type- and range-checked, then checked against the
    tensors' shapes, so a malformed file stops here with one line naming the key, its value and what the tensors say."""
    arch = gf.architecture
    if arch != "deepseek2":
      raise GGUFError(f"{gf.path.name}: architecture '{arch}' is not supported (only deepseek2: DeepSeek-V2, GLM-4.7-Flash, Youtu-LLM)")
    def k(key: str, *default, kind: type = int, lo: float = 0, hi: float = 1 << 31, by: str = ""):
      if f"{arch}.{key}" not in gf.metadata: return default[0] if default else gf.require(f"{arch}.{key}")
      v = gf.metadata[f"{arch}.{key}"]
      ok = isinstance(v, bool) if kind is bool else isinstance(v, str) if kind is str else \
           isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi if kind is int else \
           isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and lo <= v <= hi
      if not ok:
        want = {bool: "a bool", str: "a string"}.get(kind) or f"{'an integer' if kind is int else 'a number'} in [{lo:g}, {hi:g}]" + \
               (f" (by {arch}.{by} = {gf.metadata.get(f'{arch}.{by}')!r})" if by else "")
        raise GGUFError(f"{gf.path.name}: metadata {arch}.{key} = {v!r}: expected {want}")
      return v
    n_block = k("block_count", lo=1, hi=4096)
    n_vocab = k("vocab_size", None, lo=1, hi=1 << 24) or len(gf.require("tokenizer.ggml.tokens"))
    n_nextn = k("nextn_predict_layers", 0, hi=n_block - 1, by="block_count")
    rope = k("rope.dimension_count", lo=2, hi=1 << 16)
    key_mla = k("attention.key_length_mla", None, lo=rope + 1, hi=1 << 16, by="rope.dimension_count")
    if key_mla is None or "blk.0.attn_k_b.weight" not in gf.tensors:
      raise GGUFError(f"{gf.path.name}: legacy MLA layout (attn_kv_b, no key_length_mla): re-convert it with a current llama.cpp")
    gating = k("expert_gating_func", 0, hi=max(Gating))
    if gating == 0:  # llama.cpp's fallback for old files without the key
      gating = Gating.SIGMOID if n_block in (47, 48) and n_vocab == 154880 else Gating.SOFTMAX
    scaling = k("rope.scaling.type", "none", kind=str)
    if scaling not in ("none", "yarn"):
      raise GGUFError(f"{gf.path.name}: metadata {arch}.rope.scaling.type = '{scaling}' is not supported (none, yarn)")
    n_expert = k("expert_count", 0, hi=1 << 16)
    n_groups = k("expert_group_count", 1, hi=max(n_expert, 1), by="expert_count") or 1
    ctx = k("context_length", lo=1)
    lead = k("leading_dense_block_count", 0 if n_expert else n_block, hi=n_block, by="block_count")
    if not n_expert and lead != n_block:
      raise GGUFError(f"{gf.path.name}: metadata {arch}.leading_dense_block_count = {lead!r}, but expert_count = 0 makes every block dense")
    cfg = Config(
      n_layer=n_block - n_nextn, dim=k("embedding_length", lo=1, hi=1 << 20), n_head=k("attention.head_count", lo=1, hi=1 << 12),
      vocab_size=n_vocab, norm_eps=float(k("attention.layer_norm_rms_epsilon", kind=float, lo=1e-12, hi=0.1)), context_length=ctx,
      q_lora_rank=k("attention.q_lora_rank", 0, hi=1 << 20), kv_lora_rank=k("attention.kv_lora_rank", lo=1, hi=1 << 20),
      qk_nope=key_mla - rope, qk_rope=rope, v_head=k("attention.value_length_mla", lo=1, hi=1 << 16),
      ffn_dim=k("feed_forward_length", lo=1, hi=1 << 24),
      n_dense_lead=lead,
      n_expert=n_expert, n_expert_used=k("expert_used_count", 0, lo=1 if n_expert else 0, hi=n_expert, by="expert_count"),
      n_expert_shared=k("expert_shared_count", 0, hi=1 << 10),
      expert_ffn=k("expert_feed_forward_length", 0, lo=1 if n_expert else 0, hi=1 << 24, by="expert_count"),
      gating=Gating(gating), expert_weights_norm=bool(k("expert_weights_norm", False, kind=bool)),
      expert_weights_scale=float(k("expert_weights_scale", 1.0, kind=float, hi=1e6)) or 1.0,
      n_expert_groups=n_groups, n_group_used=k("expert_group_used_count", 1, hi=n_groups, by="expert_group_count") or 1,
      rope_theta=float(k("rope.freq_base", 10000.0, kind=float, lo=1e-3, hi=1e12)),
      rope_factor=float(k("rope.scaling.factor", 1.0, kind=float, lo=1.0, hi=1e6)) if scaling == "yarn" else 1.0,
      rope_orig_ctx=k("rope.scaling.original_context_length", ctx, lo=1),
      yarn_log_mul=float(k("rope.scaling.yarn_log_multiplier", 0.0, kind=float, hi=100.0)) / 0.1,  # the converter stores 0.1 * mscale_all_dim
      yarn_beta_fast=float(k("rope.scaling.yarn_beta_fast", 32.0, kind=float, lo=1e-3, hi=1e4)),
      yarn_beta_slow=float(k("rope.scaling.yarn_beta_slow", 1.0, kind=float, lo=1e-3, hi=1e4)),
      n_nextn=n_nextn)
    # what llama.cpp writes for MLA: one latent head of kv_lora + rope
    lat = cfg.kv_lora_rank
    for key, want in (("attention.head_count_kv", 1), ("attention.key_length", lat + rope), ("attention.value_length", lat)):
      if (v := gf.get(f"{arch}.{key}")) is not None and (type(v) is not int or v != want):
        raise GGUFError(f"{gf.path.name}: metadata {arch}.{key} = {v!r}, but MLA with kv_lora_rank {cfg.kv_lora_rank} and rope {rope} means {want}")
    cfg.check_tensors(gf)
    return cfg

  def check_tensors(self, gf: GGUFFile) -> None:
    """The metadata against the tensors it describes: the block count, and the shape of every tensor of the first
    attention, dense and MoE block, the embedding and the head."""
    blocks = {int(n.split(".")[1]) for n in gf.tensors if n.startswith("blk.") and n.split(".")[1].isdigit()}
    n_block = self.n_layer + self.n_nextn
    if blocks != set(range(n_block)):
      raise GGUFError(f"{gf.path.name}: metadata deepseek2.block_count = {n_block}, but the file has tensors of "
                      f"{len(blocks)} blocks ({min(blocks, default=0)}..{max(blocks, default=-1)})")
    d, h, qk = self.dim, self.n_head, self.qk_nope + self.qk_rope
    want = {"token_embd.weight": ((self.vocab_size, d), "vocab_size, embedding_length"),
            "output.weight": ((self.vocab_size, d), "vocab_size, embedding_length"),
            "blk.0.attn_kv_a_mqa.weight": ((self.kv_lora_rank + self.qk_rope, d), "kv_lora_rank + rope.dimension_count, embedding_length"),
            "blk.0.attn_k_b.weight": ((h, self.kv_lora_rank, self.qk_nope), "head_count, kv_lora_rank, key_length_mla - rope.dimension_count"),
            "blk.0.attn_v_b.weight": ((h, self.v_head, self.kv_lora_rank), "head_count, value_length_mla, kv_lora_rank"),
            "blk.0.attn_output.weight": ((d, h * self.v_head), "embedding_length, head_count * value_length_mla")}
    if self.q_lora_rank:
      want["blk.0.attn_q_a.weight"] = ((self.q_lora_rank, d), "q_lora_rank, embedding_length")
      want["blk.0.attn_q_b.weight"] = ((h * qk, self.q_lora_rank), "head_count * key_length_mla, q_lora_rank")
    else: want["blk.0.attn_q.weight"] = ((h * qk, d), "q_lora_rank = 0: head_count * key_length_mla, embedding_length")
    lead = f"leading_dense_block_count = {self.n_dense_lead}"
    if self.n_dense_lead: want[f"blk.{self.n_dense_lead - 1}.ffn_gate.weight"] = ((self.ffn_dim, d), f"{lead}: feed_forward_length, embedding_length")
    if self.n_expert and self.n_dense_lead < self.n_layer:
      b = f"blk.{self.n_dense_lead}."
      want[b + "ffn_gate_inp.weight"] = ((self.n_expert, d), f"{lead}: expert_count, embedding_length")
      want[b + "ffn_gate_exps.weight"] = ((self.n_expert, self.expert_ffn, d), f"{lead}: expert_count, expert_feed_forward_length, embedding_length")
      if self.n_expert_shared: want[b + "ffn_gate_shexp.weight"] = ((self.n_expert_shared * self.expert_ffn, d),
                                                                     "expert_shared_count * expert_feed_forward_length, embedding_length")
      elif b + "ffn_gate_shexp.weight" in gf.tensors:
        raise GGUFError(f"{gf.path.name}: metadata deepseek2.expert_shared_count = 0, but the file has shared-expert tensors ({b}ffn_gate_shexp)")
    elif self.n_expert == 0 and any(".ffn_gate_exps." in n for n in gf.tensors):
      raise GGUFError(f"{gf.path.name}: metadata deepseek2.expert_count = 0, but the file has expert tensors (ffn_gate_exps)")
    for name, (shape, keys) in want.items():
      if name not in gf.tensors:
        if name == "output.weight": continue  # tied to token_embd
        raise GGUFError(f"{gf.path.name}: tensor '{name}' is missing, which the metadata ({keys}) needs")
      if (got := gf.tensors[name].shape) != shape:
        raise GGUFError(f"{gf.path.name}: tensor '{name}' has shape {list(got)}, but the metadata ({keys}) says {list(shape)}")

  # ---- YaRN (arXiv:2309.00071), as llama.cpp applies it to deepseek2 (see llama-context.cpp and models/deepseek2.cpp)
  @staticmethod
  def _yarn_mscale(factor: float, mscale: float) -> float: return 1.0 if factor <= 1.0 else 0.1 * mscale * math.log(factor) + 1.0

  @property
  def attn_mscale(self) -> float:
    """The magnitude that multiplies q.k twice over (once per side): 1 without YaRN."""
    if self.rope_factor <= 1.0: return 1.0
    return self._yarn_mscale(self.rope_factor, self.yarn_log_mul) if self.yarn_log_mul else self._yarn_mscale(self.rope_factor, 1.0)

  @property
  def kq_scale(self) -> float:
    """softmax scale: mscale^2 / sqrt(qk_nope + qk_rope), the head size before absorption (not kv_lora + rope)."""
    return self.attn_mscale ** 2 / math.sqrt(self.qk_nope + self.qk_rope)

  def rope_freqs(self) -> np.ndarray:
    """Per-pair angular frequencies (qk_rope/2,), with YaRN's ramp between interpolation and extrapolation."""
    d = self.qk_rope
    extrap = 1.0 / self.rope_theta ** (np.arange(0, d, 2, dtype=np.float64) / d)
    if self.rope_factor <= 1.0: return extrap
    corr = lambda n_rot: d * math.log(self.rope_orig_ctx / (n_rot * 2 * math.pi)) / (2 * math.log(self.rope_theta))
    low, high = max(0.0, math.floor(corr(self.yarn_beta_fast))), min(d - 1.0, math.ceil(corr(self.yarn_beta_slow)))
    ramp = 1.0 - np.clip((np.arange(d // 2) - low) / max(0.001, high - low), 0.0, 1.0)  # 1: keep the original frequency
    return extrap / self.rope_factor * (1.0 - ramp) + extrap * ramp

  @property
  def rope_mag(self) -> float:
    """cos/sin magnitude: llama.cpp's mscale(factor, mscale) / mscale(factor, mscale_all_dim); 1 for DeepSeek-V2's equal pair."""
    if self.rope_factor <= 1.0 or self.yarn_log_mul: return 1.0
    return self._yarn_mscale(self.rope_factor, 1.0)

def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
  """Rotate interleaved pairs (x0, x1), (x2, x3), ... (llama.cpp's NORM rope for deepseek2). The result lists the rotated
  even lanes, then the odd ones: q and k both use this order, so q.k is the same as in the interleaved order."""
  pairs = x.reshape(*x.shape[:-1], x.shape[-1] // 2, 2)
  x0, x1 = pairs[..., 0], pairs[..., 1]
  return (x0 * cos - x1 * sin).cat(x1 * cos + x0 * sin, dim=-1)


def decode_attention_reference(q_lat: Tensor, q_raw: Tensor, kv_raw: Tensor, kv_norm_w: Tensor, cache: Tensor, rope_cos: Tensor,
                               rope_sin: Tensor, pos: Tensor | int | UOp, *, n_head: int, kv_lora: int, qk_nope: int, qk_rope: int,
                               scale: float, eps: float) -> Tensor:
  """kernels.mla_attention.mla_decode_attention from tinygrad ops, as Block.attention computes it for T = 1 (any device):
  the reference its tests and benchmarks hold it to. pos may also be an int or a bound symbolic start position (a Tensor
  is read back to the host: not for a TinyJit)."""
  p = int(pos.numpy().reshape(-1)[0]) if isinstance(pos, Tensor) else pos
  cos, sin = rope_cos[p:p + 1], rope_sin[p:p + 1]                             # (1, qk_rope/2)
  q_pe = apply_rope(q_raw.reshape(1, n_head, qk_nope + qk_rope)[..., qk_nope:], cos.unsqueeze(1), sin.unsqueeze(1))
  q = q_lat.reshape(1, n_head, kv_lora).cat(q_pe.cast(q_lat.dtype), dim=-1)  # (1, H, kv_lora + rope)
  kv = kv_raw.reshape(1, kv_lora + qk_rope)
  c_kv = rms_norm(kv[:, :kv_lora], kv_norm_w, eps)
  k_pe = apply_rope(kv[:, kv_lora:].float(), cos, sin)
  row = c_kv.cat(k_pe, dim=-1).cast(cache.dtype)
  cache = Tensor(cache.uop.after(cache[p:p + 1].uop.store(row.uop)))
  keys = cache[0:p + 1]
  values = keys[:, :kv_lora]
  scores = q.transpose(0, 1).float() @ keys.float().T * scale                 # (H, 1, S)
  return (scores.softmax(-1) @ values.float()).transpose(0, 1).reshape(n_head, kv_lora)

def heads_side_by_side(k_b: Tensor, v_b: Tensor) -> tuple[Tensor, Tensor]:
  """k_b (H, kv_lora, nope) and v_b (H, v_head, kv_lora) as (kv_lora, H * nope) and (kv_lora, H * v_head): every head's
  expansion of a latent row in one product."""
  (H, KV, nope), dv = k_b.shape, v_b.shape[1]
  return k_b.permute(1, 0, 2).reshape(KV, H * nope), v_b.permute(2, 0, 1).reshape(KV, H * dv)

def expand_per_head(rows: Tensor, w_k: Tensor, w_v: Tensor, n_head: int, qk_rope: int) -> tuple[Tensor, Tensor]:
  """Latent cache rows (S, kv_lora + rope) in the form expanded per head, a row a token: keys (S, H, nope + rope) =
  [c_kv @ k_b[h] | k_rope] and values (S, H, v_head) = c_kv @ v_b[h].T, the heads side by side (heads_side_by_side)."""
  S, KV = rows.shape[0], w_k.shape[0]
  c_kv, k_pe = rows[:, :KV], rows[:, KV:]
  keys = (c_kv @ w_k).reshape(S, n_head, -1).cat(k_pe.unsqueeze(1).expand(S, n_head, qk_rope), dim=-1)
  return keys, (c_kv @ w_v).reshape(S, n_head, -1)

def causal_attention(q: Tensor, keys: Tensor, values: Tensor, start_pos: int | UOp, max_keys: int, scale: float, slices: bool = True,
                     split=lambda x: x) -> Tensor:
  """Causal attention from tensor ops of the queries q (T, H, D) at positions start_pos.. over the S = start_pos + T keys
  (S, D) and values (S, Dv) one row a token for all heads, or (H, S, D) and (H, S, Dv) one a head; max_keys bounds S.
  (T, H, Dv) fp32."""
  T = q.shape[0]
  prefill = resolve(T != 1)  # (a symbolic chunk length counts as T > 1)
  # a prefill chunk's queries at its bound Tq: constant (head, query) dims, which tinygrad's heuristics tile (a key row read
  # once for several queries); the rows past T attend causally as well and are sliced off
  if prefill: (q,), _, Tq = to_bound(q, slices=slices)
  else: Tq = T
  scores = q.transpose(0, 1).float() @ keys.float().transpose(-1, -2) * scale  # (H, Tq, S)
  if prefill:
    S = start_pos + T
    # key positions as a constant-length arange shrunk to S: an arange of symbolic length is a reduction kernel of S^2
    causal = Tensor.arange(max_keys)[:S].reshape(1, S) > (Tensor.arange(Tq) + start_pos).reshape(Tq, 1)
    scores = causal.where(float("-inf"), scores).contiguous()  # once: fused into the softmax, its reductions recompute q.k
  return (split(scores.softmax(-1)) @ values.float()).transpose(0, 1)[:T]

def latent_attention(q: Tensor, cache: Tensor, start_pos: int | UOp, kv_lora: int, scale: float, slices: bool = True,
                     split=lambda x: x) -> Tensor:
  """Causal attention from tensor ops of the absorbed queries q (T, H, kv_lora + rope) at positions start_pos.. over the
  cache rows 0..start_pos+T-1 (their own rows stored already): multi-query attention over one latent row a token, the keys
  the whole row, the values its first kv_lora. (T, H, kv_lora) fp32. What the generated path and the CPU run for decode and
  short chunks."""
  keys = cache[0:start_pos + q.shape[0]]                                        # (S, kv_lora + rope): one row per token
  return causal_attention(q, keys, keys[:, :kv_lora], start_pos, cache.shape[0], scale, slices, split)

def expands_latents(cfg: Config, chunk: int) -> bool:
  """Whether a prefill chunk of `chunk` queries attends over keys and values expanded per head from the latent rows (the
  paper's form before absorption) rather than over the latent rows: fewer FLOPs at any depth. A key costs chunk x heads x
  (kv_lora + rope + kv_lora) absorbed, chunk x heads x (qk_nope + rope + v_head) expanded plus its expansion, heads x
  kv_lora x (qk_nope + v_head), which the absorbed form spends once a query instead (on q_nope and the output)."""
  return chunk * (2 * cfg.kv_lora_rank - cfg.qk_nope - cfg.v_head) > cfg.kv_lora_rank * (cfg.qk_nope + cfg.v_head)

def flash_prefills(cfg: Config, chunk: int) -> bool:
  """Whether a prefill chunk of `chunk` queries on the tensor cores attends in the expanded form (its context's rows
  expanded per head, then the flash kernel) rather than over the latent rows: where the expanded form's FLOPs a key (the
  chunk's scores and values over the expanded key, and the key's expansion) are at most 2/3 of the absorbed form's. The
  expansions run as fp32 products, slower a FLOP than the kernels: on an H200 at 16k keys DeepSeek-V2-Lite's and
  Youtu-LLM-2B's 512-token chunks (0.53 of the FLOPs) attend 2.1x faster, GLM-4.7-Flash's (0.88) no faster; its chunks of
  2048 (0.57) take the expanded form."""
  absorbed = chunk * (2 * cfg.kv_lora_rank + cfg.qk_rope)
  expanded = chunk * (cfg.qk_nope + cfg.qk_rope + cfg.v_head) + cfg.kv_lora_rank * (cfg.qk_nope + cfg.v_head)
  return 3 * expanded <= 2 * absorbed

def expanded_attention(q_nope: Tensor, q_pe: Tensor, cache: Tensor, start_pos: int | UOp, k_b: Tensor, v_b: Tensor, kv_lora: int,
                       scale: float, slices: bool = True, split=lambda x: x) -> Tensor:
  """Causal attention of the queries [q_nope | q_pe] (T, H, qk_nope + rope) at positions start_pos.. over the cache rows
  0..start_pos+T-1 expanded per head: keys [c_kv @ k_b[h] | k_rope], values c_kv @ v_b[h].T, with k_b (H, kv_lora, qk_nope)
  and v_b (H, v_head, kv_lora) as floats. (T, H, v_head) fp32: the output absorbed attention gets after v_b."""
  H, S = q_nope.shape[1], start_pos + q_nope.shape[0]
  rows = cache[0:S].float()
  c_kv, k_pe = rows[:, :kv_lora].unsqueeze(0), rows[:, kv_lora:]
  # k_b with kv_lora innermost, as v_b has it: both expansions reduce along rows of both operands; k_nope made on its own (a
  # product whose output is a concatenation takes none of the heuristics' product opts), then joined with k_rope
  k_nope = (c_kv @ k_b.transpose(-1, -2).contiguous().transpose(-1, -2)).contiguous()
  keys = k_nope.cat(k_pe.unsqueeze(0).expand(H, S, k_pe.shape[-1]), dim=-1).contiguous()  # (H, S, qk_nope + rope)
  values = (c_kv @ v_b.transpose(-1, -2)).contiguous()                                           # (H, S, v_head)
  return causal_attention(q_nope.float().cat(q_pe.float(), dim=-1), keys, values, start_pos, cache.shape[0], scale, slices, split)

@dataclass(frozen=True)
class Rows:
  """A batched decode step: row b is the new token of one sequence, at position pos[b] of the sequence whose rows of the
  latent cache start at base[b] (ints or bound symbolic ints: the tensor-op path slices with them); `table` holds the same
  pairs as an int32 (B, 2) device buffer (the hand-written kernel reads it)."""
  pos: tuple
  base: tuple
  table: Tensor

def topk_indices(scores: Tensor, k: int) -> Tensor:
  """Indices of the k largest scores along the last axis, largest first; ties go to the lower index. A pairwise rank
  (one compare-and-count kernel and one one-hot reduce) instead of a sort."""
  n = scores.shape[-1]
  idx = Tensor.arange(n)
  si, sj = scores.unsqueeze(-1), scores.unsqueeze(-2)
  ahead = (sj > si) | ((sj == si) & (idx.reshape(1, n) < idx.reshape(n, 1)))  # [.., i, j]: j ranks before i
  rank = ahead.cast(dtypes.int32).sum(-1)                                          # (.., n)
  onehot = rank.unsqueeze(-1) == Tensor.arange(k)            # (.., n, k)
  return (onehot.cast(dtypes.int32) * idx.reshape(n, 1).cast(dtypes.int32)).sum(-2)

# Named fusion boundaries: where a .contiguous() may go. A bit set in the split mask realizes the value there.
SPLIT_POINTS = (
  "q",             # absorbed query [q_nope @ k_b | rope(q_pe)]
  "kv",            # new latent cache row before the store
  "attn_scores",   # softmax(q.K) probabilities
  "attn_out",      # attention output before attn_output
  "router",        # expert weights and selection
  "gate_up",       # silu(gate) * up of the routed experts
  "shexp",         # silu(gate) * up of the shared expert / dense FFN
)
DEFAULT_SPLIT_MASK = 0

def largest_upload(gf: GGUFFile) -> int:
  """Host bytes of the largest upload a model's load makes (apps.packed.Format.host_bytes: the file's blocks and the derived
  K-quant scales): a tensor, or two of a block's tensors of one type stacked ([gate; up], [q_a; kv_a]; the two largest of a
  type, which those are where they stack). The staging slots are sized for it before the first tensor
  (apps.readback.Opening); a slot too short is freed and pinned again during the load (a Q6_K output head: ~70 ms)."""
  def host_bytes(t) -> int:
    try: fmt = format_for(t.type, t.ne[0], t.name)
    except GGUFError: return t.nbytes   # not loaded as a packed tensor, or an error the load reports where it reads it
    return fmt.host_bytes(t.nbytes // fmt.block_bytes)
  groups: dict[tuple[str, int], list[int]] = {}
  for t in gf.tensors.values():
    groups.setdefault((t.name.split(".")[1] if t.name.startswith("blk.") else t.name, t.type), []).append(host_bytes(t))
  return max((sum(sorted(v)[-2:]) for v in groups.values()), default=0)

def _stackable(gf: GGUFFile, names: list[str]) -> bool:
  infos = [gf.tensor(n) for n in names]
  return all(len(i.ne) == 2 and i.ne[0] == infos[0].ne[0] and i.type == infos[0].type for i in infos)

class Block:
  """One deepseek2 transformer block: h = x + MLA(attn_norm(x)), then h + FFN(ffn_norm(h)) with a dense or MoE FFN.
  The norms, SwiGLUs, expert mix and residual adds are passed to the layers, which fuse them into their kernels where
  a kernel can (the decode matvecs on GPUs) and run them as separate ops elsewhere."""

  def __init__(self, gf: GGUFFile, i: int, cfg: Config, device: str | None, cache_dtype, split_mask: int, fusions: Fusions = Fusions()):
    self.cfg, self.i, self.split_mask, self.fusions = cfg, i, split_mask, fusions
    p = f"blk.{i}."
    lin = lambda n: QuantizedLinear.from_gguf(gf, p + n + ".weight", device)
    def gate_up(suffix: str) -> QuantizedLinear | tuple[QuantizedLinear, QuantizedLinear]:
      # gate and up stacked into one weight [gate; up] (one kernel, SwiGLU fused) when they share a type
      names = [p + f"ffn_gate{suffix}.weight", p + f"ffn_up{suffix}.weight"]
      return QuantizedLinear.from_gguf(gf, names, device) if _stackable(gf, names) else (lin(f"ffn_gate{suffix}"), lin(f"ffn_up{suffix}"))
    self.attn_norm, self.ffn_norm = load_tensor(gf, p + "attn_norm.weight", device), load_tensor(gf, p + "ffn_norm.weight", device)
    # q_a (or a direct attn_q) and kv_a read the same normed x: stacked [q_a; kv_a] ([q; kv_a], unless the model runs
    # without Fusions.stack_q) into one weight (one kernel) when they share a type; q_b (k_b) and the attention kernel then
    # read their parts of its output in place
    self.attn_qkv_a = self.attn_q_a = self.attn_q = self.attn_kv_a_mqa = None
    q_name = "attn_q_a" if cfg.q_lora_rank else "attn_q"
    names = [p + q_name + ".weight", p + "attn_kv_a_mqa.weight"]
    if _stackable(gf, names) and (cfg.q_lora_rank or fusions.stack_q): self.attn_qkv_a = QuantizedLinear.from_gguf(gf, names, device)
    else: setattr(self, q_name, lin(q_name)); self.attn_kv_a_mqa = lin("attn_kv_a_mqa")
    if cfg.q_lora_rank:
      self.attn_q_b = lin("attn_q_b")
      self.attn_q_a_norm = load_tensor(gf, p + "attn_q_a_norm.weight", device)
    self.attn_output = lin("attn_output")
    self.attn_kv_a_norm = load_tensor(gf, p + "attn_kv_a_norm.weight", device)
    # absorbed per-head matrices: k_b maps q_nope (qk_nope) into the latent space, v_b maps latents to v_head
    self.attn_k_b = QuantizedExpertWeights.from_gguf(gf, p + "attn_k_b.weight", device)
    self.attn_v_b = QuantizedExpertWeights.from_gguf(gf, p + "attn_v_b.weight", device)
    self.moe = i >= cfg.n_dense_lead
    if self.moe:
      self.ffn_gate_inp = QuantizedLinear.from_gguf(gf, p + "ffn_gate_inp.weight", device)
      self.exp_probs_b = load_tensor(gf, p + "exp_probs_b.bias", device) if p + "exp_probs_b.bias" in gf.tensors else None
      merged = p + "ffn_gate_up_exps.weight"
      self.ffn_gate_up_exps = QuantizedExpertWeights.from_gguf(gf, merged if merged in gf.tensors else
                                                               [p + "ffn_gate_exps.weight", p + "ffn_up_exps.weight"], device)
      self.ffn_down_exps = QuantizedExpertWeights.from_gguf(gf, p + "ffn_down_exps.weight", device)
      if cfg.n_expert_shared: self.ffn_gate_up_shexp, self.ffn_down_shexp = gate_up("_shexp"), lin("ffn_down_shexp")
    else: self.ffn_gate_up, self.ffn_down = gate_up(""), lin("ffn_down")
    self.cache_dtype = cache_dtype

  kernels = "hand"  # apps.KERNEL_PATHS: "generated" runs no hand-written kernel (Transformer.set_kernels sets it)
  kernel_modules = KernelModules()  # the modules of the attention and routing kernels (Transformer.set_kernel_modules sets it)

  def layers(self) -> list:
    """The packed-weight layers of this block (whose `kernels` the model sets)."""
    flat = [w for v in vars(self).values() for w in (v if isinstance(v, tuple) else (v,))]
    return [w for w in flat if isinstance(w, (QuantizedLinear, QuantizedExpertWeights))]

  def hand_written(self, device: str) -> bool: return self.kernels == "hand" and self.kernel_modules.mla_attention.available(device)

  def prefills_by_kernel(self, device: str, cache: Tensor, T: int | UOp) -> bool:
    """Whether a prefill chunk of T tokens off the GPU kernels' path (_attend takes those first) attends in the CPU's
    hand-written kernel: where the chunk attends over the latent rows (a long chunk's expanded keys and values take fewer
    FLOPs: expands_latents)."""
    cfg = self.cfg
    return self.kernels == "hand" and not expands_latents(cfg, T.vmax if isinstance(T, UOp) else T) and \
      self.kernel_modules.mla_attention.prefills(device, cache, cfg.n_head, cfg.kv_lora_rank, cfg.qk_rope)

  def split(self, x: Tensor, name: str) -> Tensor:
    return x.contiguous() if self.split_mask >> SPLIT_POINTS.index(name) & 1 else x

  # ---- attention
  def attention(self, x: Tensor, cache: Tensor, start_pos: int | UOp, cos: Tensor, sin: Tensor, tables: tuple | None = None,
                base: int | UOp = 0, rows: Rows | None = None, chunk: tuple | None = None) -> Tensor:
    """x + MLA(attn_norm(x)) for x (T, dim) fp32 at positions start_pos.. of the sequence whose cache rows start at `base`
    (their latent rows go into the cache), or with `rows` the new tokens of T sequences (Rows). cos/sin are the rope rows
    of those positions; `tables` = (rope_cos, rope_sin, an int32 buffer of [start_pos, base, T][, the expanded keys' and values'
    buffers or None]) lets the attention kernels run where the device has them: a decode token's (T = 1, or the rows: one
    pass, the new row included) or a prefill chunk's (after the chunk's rows are stored; a long one's on the tensor cores
    over its keys and values expanded per head, where the buffers are given). With `rows` and `chunk` = (start_pos, cos,
    sin, tables, base) of a prefill chunk, x's first len(rows.pos) rows are the rows' tokens and the rest that chunk's (a
    mixed step: the products read their weights once for both; each part attends on its own path)."""
    cfg, T = self.cfg, x.shape[0]
    xn, qn = (self.attn_norm, cfg.norm_eps), (self.attn_q_a_norm, cfg.norm_eps) if cfg.q_lora_rank else None
    kq = cfg.qk_nope + cfg.qk_rope                                              # query width per head
    kv_off = 0                                                                  # where kv starts in kv_a's output
    if self.attn_qkv_a is not None:
      qkv = self.attn_qkv_a(x, norm=xn)                                         # (T, q_lora or H*kq, + kv_lora + rope)
      if cfg.q_lora_rank: q, kv, kv_off = self.attn_q_b(qkv, norm=qn, prefix=True), qkv, cfg.q_lora_rank
      else: q, kv, kv_off = qkv, qkv, cfg.n_head * kq                           # q is the head of the stacked output
    else:
      q = self.attn_q_b(self.attn_q_a(x, norm=xn), norm=qn) if cfg.q_lora_rank else self.attn_q(x, norm=xn)
      kv = self.attn_kv_a_mqa(x, norm=xn)                                       # (T, kv_lora + rope)
    if chunk is None:
      out, past_v, _ = self._attend(q, kv, kv_off, cache, start_pos, cos, sin, tables, base, rows)
      if self._decodes_by_kernel(x.device, cache, tables, rows, T):   # the decode kernels' output goes on unsplit
        return self.attn_output(self.attn_v_b.batched(out).reshape(T, cfg.n_head * cfg.v_head), residual=x)
    else:
      # the rows first (their own rows of the cache, other sequences' than the chunk's), then the chunk over the cache
      # they leave; each output before v_b unless its path applies it
      B, q_lat = len(rows.pos), None
      if tables is not None and self.hand_written(x.device):
        # both parts' queries absorbed by one k_b product; each part's kernels read its rows of q, kv and q_lat in place
        q_lat = self.attn_k_b.batched(q[:, :cfg.n_head * kq].reshape(T, cfg.n_head, kq), prefix=True)
        rows_out, rows_v, cache = self._attend(q, kv, kv_off, cache, 0, cos, sin, tables, 0, rows, q_lat=q_lat)
      else: rows_out, rows_v, cache = self._attend(q[:B], kv[:B], kv_off, cache, 0, cos, sin, tables, 0, rows)
      chunk_out, chunk_v, _ = self._attend(q, kv, kv_off, cache, *chunk, first=B, q_lat=q_lat)
      # one v_b below for both where neither path applied it, else the part without it past v_b here
      past_v = rows_v or chunk_v
      vb = lambda o, done: o if done or not past_v else self.attn_v_b.batched(o.cast(x.dtype))
      out = vb(rows_out, rows_v).cast(x.dtype).cat(vb(chunk_out, chunk_v).cast(x.dtype))
    if not past_v: out = self.attn_v_b.batched(out.cast(x.dtype))               # (T, H, v_head)
    return self.attn_output(self.split(out.cast(x.dtype).reshape(T, cfg.n_head * cfg.v_head), "attn_out"), residual=x)

  def _decodes_by_kernel(self, device: str, cache: Tensor, tables: tuple | None, rows: Rows | None, T: int | UOp) -> bool:
    """Whether a decode token's (T = 1) or the rows' attention runs in the hand-written decode kernel."""
    cfg = self.cfg
    return tables is not None and (rows is not None or isinstance(T, int) and T == 1) and self.kernels == "hand" and \
      self.kernel_modules.mla_attention.decodes(device, cache, cfg.n_head, cfg.kv_lora_rank, cfg.qk_rope)

  def _attend(self, q: Tensor, kv: Tensor, kv_off: int, cache: Tensor, start_pos: int | UOp, cos: Tensor, sin: Tensor,
              tables: tuple | None, base: int | UOp, rows: Rows | None = None, first: int = 0,
              q_lat: Tensor | None = None) -> tuple[Tensor, bool, Tensor]:
    """The attention of q's and kv's T rows from row `first` on (attention's projections, kv at kv_off in kv's rows), or
    of their first len(rows.pos) rows with `rows`, as attention describes them: (the output (T, H, kv_lora), or (T, H,
    v_head) where the path applied v_b itself; whether it did; the cache with the rows' latents stored, for a later part
    of the step to read). q_lat: the absorbed queries of all of q's rows, where a mixed step made them for both parts (the
    hand-written path's)."""
    cfg, T = self.cfg, q.shape[0] - first
    kq = cfg.qk_nope + cfg.qk_rope
    if self._decodes_by_kernel(q.device, cache, tables, rows, T):
      # q_nope of every head, read in place (from q, or from the stacked [q; kv_a] output), absorbed: (T, H, kv_lora)
      q, kv = (t if t.ndim == 2 else t.reshape(T, -1) for t in (q, kv))
      if q_lat is None: q_lat = self.attn_k_b.batched(q, prefix=True, slot_stride=kq)
      out = self.kernel_modules.mla_attention.mla_decode_attention(
        q_lat.reshape(T, cfg.n_head, cfg.kv_lora_rank), q, kv, self.attn_kv_a_norm, cache, *tables[:2],
        rows.table if rows is not None else tables[2], n_head=cfg.n_head, kv_lora=cfg.kv_lora_rank, qk_nope=cfg.qk_nope,
        qk_rope=cfg.qk_rope, scale=cfg.kq_scale, eps=cfg.norm_eps, kv_offset=kv_off, fusions=self.fusions)
      # the kernel writes the rows into the cache in place (rows no later part of a step reads: other sequences')
      return out.reshape(-1, cfg.n_head, cfg.kv_lora_rank), False, cache
    if rows is None and tables is not None and self.hand_written(q.device):
      # a prefill chunk on the GPU: its latent rows into the cache and q_pe's rope in one kernel (the projections' rows read
      # in place), then the attention kernels over the cache
      mod = self.kernel_modules.mla_attention
      q_pe, cache = mod.mla_chunk_rows(q, kv, self.attn_kv_a_norm, cache, *tables[:3], n_head=cfg.n_head, kv_lora=cfg.kv_lora_rank,
                                       qk_nope=cfg.qk_nope, qk_rope=cfg.qk_rope, eps=cfg.norm_eps, kv_offset=kv_off, first=first,
                                       fusions=self.fusions)
      q_heads = q[first:, :cfg.n_head * kq].reshape(T, cfg.n_head, kq)
      q_nope = q_heads[..., :cfg.qk_nope]
      if len(tables) > 3 and tables[3] is not None and has_mma(q.device) and flash_prefills(cfg, T.vmax if isinstance(T, UOp) else T):
        # a long chunk on the tensor cores: the keys and values of rows 0..start_pos + T - 1 expanded per head (one GEMM)
        # into the model's buffers, then flash attention over them; the output already past v_b
        return self.flash_attention(q_nope, q_pe, cache, T, tables), True, cache
      # causal attention of the chunk over the cache: one kernel on the tensor cores (CUDA sm_80+, a chunk of at least
      # PREFILL_MMA_FROM tokens), else a split of each token's keys and their combine
      if q_lat is None: q_lat, first = self.attn_k_b.batched(q_heads, prefix=True), 0
      return mod.mla_prefill_attention(q_lat, q_pe, cache, tables[2], kv_lora=cfg.kv_lora_rank, qk_rope=cfg.qk_rope, scale=cfg.kq_scale,
                                       max_context=tables[0].shape[0], first=first, fusions=self.fusions), False, cache
    q = q[first:, :cfg.n_head * kq].reshape(T, cfg.n_head, kq)
    q_nope, q_pe, kv = q[..., :cfg.qk_nope], q[..., cfg.qk_nope:], kv[first:, kv_off:]
    q_pe = apply_rope(q_pe, cos.unsqueeze(1), sin.unsqueeze(1)).cast(q_nope.dtype)

    c_kv = rms_norm(kv[:, :cfg.kv_lora_rank], self.attn_kv_a_norm, cfg.norm_eps)
    k_pe = apply_rope(kv[:, cfg.kv_lora_rank:].float(), cos, sin)
    row = self.split(c_kv.cat(k_pe, dim=-1).cast(self.cache_dtype), "kv")
    max_context = cache.shape[0] if tables is None else tables[0].shape[0]    # rows of the cache per sequence
    if rows is not None:
      # the tokens of T sequences, each stored at its own row and attending over its own rows (tensor ops, one at a time)
      cache = Tensor(cache.uop.after(*[cache[b + p:b + p + 1].uop.store(row[i:i + 1].uop) for i, (p, b) in enumerate(zip(rows.pos, rows.base))]))
      q = self.attn_k_b.batched(q_nope).cat(q_pe, dim=-1)
      return Tensor.cat(*[latent_attention(q[i:i + 1], cache[b:b + max_context], p, cfg.kv_lora_rank, cfg.kq_scale, slices=self.fusions.slices)
                          for i, (p, b) in enumerate(zip(rows.pos, rows.base))]), False, cache
    cache = Tensor(cache.uop.after(cache[base + start_pos:base + start_pos + T].uop.store(row.uop)))
    if tables is not None and self.prefills_by_kernel(q.device, cache, T):
      # causal attention of the chunk over the cache: on the CPU one kernel that reads each key row once for a few tokens
      # and heads
      q_lat = self.attn_k_b.batched(q_nope)
      return self.kernel_modules.mla_attention.mla_prefill_attention(q_lat.float(), q_pe.float(), cache, tables[2], kv_lora=cfg.kv_lora_rank,
                                                                     qk_rope=cfg.qk_rope, scale=cfg.kq_scale, max_context=max_context,
                                                                     fusions=self.fusions), False, cache  # (T, H, kv_lora)
    view = cache if isinstance(base, int) and base == 0 and cache.shape[0] == max_context else cache[base:base + max_context]
    scores = lambda x: self.split(x, "attn_scores")
    if expands_latents(cfg, T.vmax if isinstance(T, UOp) else T):
      # a long chunk: keys and values expanded per head from the latent rows, the output already past v_b
      k_b, v_b = (dequantize_rows(w.groups[0]) for w in (self.attn_k_b, self.attn_v_b))
      return expanded_attention(q_nope, q_pe, view, start_pos, k_b, v_b, cfg.kv_lora_rank, cfg.kq_scale, self.fusions.slices, scores), True, cache
    q = self.split(self.attn_k_b.batched(q_nope).cat(q_pe, dim=-1), "q")   # (T, H, kv_lora + rope)
    return latent_attention(q, view, start_pos, cfg.kv_lora_rank, cfg.kq_scale, slices=self.fusions.slices, split=scores), False, cache

  def flash_attention(self, q_nope: Tensor, q_pe: Tensor, cache: Tensor, T: int | UOp, tables: tuple) -> Tensor:
    """Causal attention (T, H, v_head) fp32 of a chunk's queries over its sequence's cache rows (cache rows pos[1] + r:
    tables[2]) in the form expanded per head: rows 0..start_pos + T - 1 (a bound's padding too) expanded by a GEMM on the
    tensor cores into the model's expanded buffers (tables[3], a row a position, in the flash kernel's form), then the
    flash kernel over them."""
    mod = self.kernel_modules.mla_attention
    (q,), _, _ = to_bound(q_nope.float().cat(q_pe.float(), dim=-1), slices=self.fusions.slices)
    k_b, v_b = (dequantize_rows(w.groups[0]) for w in (self.attn_k_b, self.attn_v_b))
    keys, values = mod.mla_expand(cache, k_b, v_b, tables[2], *tables[3], tokens=q.shape[0])
    out = mod.mla_flash_prefill(q, keys, values, tables[2], self.cfg.kq_scale)
    return out if isinstance(T, int) else out[:T]

  # ---- feed-forward
  def route(self, logits: Tensor, sel: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """DeepSeekMoE routing from the router logits (T, n_expert): (selected expert ids (T, k) int32, their weights (T, k) fp32).
    Given `sel`, the weights of those experts instead (a choice made elsewhere: tools compare paths at the same routing)."""
    cfg = self.cfg
    fused = None if self.kernels != "hand" or sel is not None else \
      self.kernel_modules.router.route(logits, self.exp_probs_b, cfg.n_expert_used, int(cfg.gating), cfg.expert_weights_norm,
                                       cfg.expert_weights_scale, cfg.n_expert_groups, fusions=self.fusions)
    if fused is not None: return fused  # one kernel where the device has hand-written kernels
    logits = logits.float()
    probs = logits.sigmoid() if cfg.gating == Gating.SIGMOID else logits.softmax(-1) if cfg.gating == Gating.SOFTMAX else logits
    choice = probs if self.exp_probs_b is None else probs + self.exp_probs_b   # the bias steers selection only
    if cfg.n_expert_groups > 1:  # group-limited: keep the n_group_used groups with the best top-2 sums
      T, G = logits.shape[0], cfg.n_expert_groups
      grouped = choice.reshape(T, G, cfg.n_expert // G)
      top2 = grouped.gather(-1, topk_indices(grouped, 2))
      keep = topk_indices(top2.sum(-1), cfg.n_group_used)                       # (T, n_group_used)
      kept = (keep.unsqueeze(-1) == Tensor.arange(G)).any(-2) # (T, G)
      choice = kept.unsqueeze(-1).where(grouped, float("-inf")).reshape(T, cfg.n_expert)
    if sel is None: sel = topk_indices(choice, cfg.n_expert_used)
    weights = probs.gather(-1, sel)
    if cfg.gating == Gating.SOFTMAX_WEIGHT: weights = weights.softmax(-1)
    if cfg.expert_weights_norm: weights = weights / weights.sum(-1, keepdim=True).maximum(6.103515625e-5)
    return sel, weights * cfg.expert_weights_scale

  def router(self, h: Tensor, sel: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """The router logits of ffn_norm(h) (T, n_expert) and the routing made from them (selected ids, weights; `sel`: route)."""
    logits = self.ffn_gate_inp(h, norm=(self.ffn_norm, self.cfg.norm_eps))
    return (logits, *self.route(logits, sel))

  def _swiglu(self, w, x: Tensor, norm) -> KernelCall | Tensor:
    """silu(gate(xn)) * up(xn) from a stacked [gate; up] weight (one kernel: its call, for quantized.run) or a separate pair."""
    if isinstance(w, QuantizedLinear): return w.call(x, norm=norm, glu=True)
    xn = rms_norm(x, *norm)
    return w[0](xn).silu() * w[1](xn)

  def feed_forward(self, h: Tensor, sel: Tensor | None = None) -> Tensor:
    """h + FFN(ffn_norm(h)) (`sel`: the experts to route to, as in route)."""
    hn = (self.ffn_norm, self.cfg.norm_eps)
    if not self.moe: return self.ffn_down(self.split(run(self._swiglu(self.ffn_gate_up, h, hn))[0], "shexp"), residual=h)
    _, sel, weights = self.router(h, sel)
    sel, weights = self.split(sel, "router"), self.split(weights, "router")
    # the shared and the routed experts' gate_up read the same normed h: one kernel where the device can run both (the
    # shared part first: its workgroups load their weights before waiting on the routing, the routed ones cannot)
    shared = [self._swiglu(self.ffn_gate_up_shexp, h, hn)] if self.cfg.n_expert_shared else []
    *shared, gate_up = run(*shared, self.ffn_gate_up_exps.call(sel, h, norm=hn, glu=True))  # (T, k, expert_ffn): silu(gate) * up
    routed = self.ffn_down_exps.call(sel, self.split(gate_up, "gate_up"), mix=weights, residual=h)  # h + sum_j weight_j * down_j
    # + the shared expert's down: one kernel where the device can sum them
    return run_sum(routed, *(self.ffn_down_shexp.call(self.split(sh, "shexp")) for sh in shared))

  def __call__(self, x: Tensor, cache: Tensor, start_pos: int | UOp, cos: Tensor, sin: Tensor, tables: tuple | None = None,
               base: int | UOp = 0, rows: Rows | None = None, chunk: tuple | None = None) -> Tensor:
    return self.feed_forward(self.attention(x, cache, start_pos, cos, sin, tables, base, rows, chunk))
