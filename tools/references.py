"""Independent references for a deepseek2 GGUF: Hugging Face transformers and llama.cpp (llama-cpp-python).

Neither shares code with apps/: transformers gets the GGUF's tensors dequantized by gguf-py (llama.cpp's own Python
package) and mapped back to the Hugging Face layout (kv_b_proj re-joined from attn_k_b/attn_v_b, experts stacked as
gate_up_proj), then runs DeepseekV2ForCausalLM, Glm4MoeLiteForCausalLM or YoutuForCausalLM in float64.
Needs requirements-ref.txt (torch, transformers, llama-cpp-python).
"""
from __future__ import annotations
import numpy as np

def gguf_arrays(path: str) -> tuple[dict, dict[str, np.ndarray]]:
  """(metadata, name -> float64 array in numpy (reversed ne) order), dequantized by gguf-py."""
  import gguf
  r = gguf.GGUFReader(path)
  meta = {}
  for f in r.fields.values():
    if f.types and f.types[0] == gguf.GGUFValueType.ARRAY:
      meta[f.name] = f.contents() if f.types[-1] != gguf.GGUFValueType.STRING or len(f.data) < 64 else None
    else: meta[f.name] = f.contents()
  tensors = {}
  for t in r.tensors:
    shape = tuple(int(d) for d in reversed(t.shape.tolist()))
    tensors[t.name] = np.asarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float64).reshape(shape)
  return meta, tensors

def hf_model(path: str):
  """A transformers model (float64, eager attention) with the GGUF's weights; the class follows the file's shape."""
  import torch, transformers
  meta, t = gguf_arrays(path)
  a = "deepseek2"
  g = lambda k, d=None: meta.get(f"{a}.{k}", d)
  n_block, n_nextn = g("block_count"), g("nextn_predict_layers", 0) or 0
  n_layer = n_block - n_nextn
  n_head, kv_lora, rope = g("attention.head_count"), g("attention.kv_lora_rank"), g("rope.dimension_count")
  nope, v_head = g("attention.key_length_mla") - rope, g("attention.value_length_mla")
  n_expert, n_dense = g("expert_count", 0) or 0, g("leading_dense_block_count", 0) or 0
  tied = "output.weight" not in t
  vocab = t["token_embd.weight"].shape[0]
  rope_parameters = {"rope_type": "default", "rope_theta": g("rope.freq_base")}
  if g("rope.scaling.type") == "yarn":
    mscale_all = g("rope.scaling.yarn_log_multiplier", 0.0) / 0.1
    rope_parameters = {"rope_type": "yarn", "rope_theta": g("rope.freq_base"), "factor": g("rope.scaling.factor"),
                       "original_max_position_embeddings": g("rope.scaling.original_context_length"),
                       "mscale": mscale_all, "mscale_all_dim": mscale_all, "beta_fast": 32.0, "beta_slow": 1.0}
  common = dict(vocab_size=vocab, hidden_size=g("embedding_length"), intermediate_size=g("feed_forward_length"),
                num_hidden_layers=n_layer, num_attention_heads=n_head, num_key_value_heads=n_head, rms_norm_eps=g("attention.layer_norm_rms_epsilon"),
                max_position_embeddings=g("context_length"), kv_lora_rank=kv_lora, q_lora_rank=g("attention.q_lora_rank") or None,
                qk_rope_head_dim=rope, qk_nope_head_dim=nope, v_head_dim=v_head, rope_parameters=rope_parameters,
                tie_word_embeddings=tied, attn_implementation="eager", experts_implementation="eager")
  if n_expert == 0:
    cls, cfg = transformers.YoutuForCausalLM, transformers.YoutuConfig(**common)
  else:
    moe = dict(moe_intermediate_size=g("expert_feed_forward_length"), n_routed_experts=n_expert, n_shared_experts=g("expert_shared_count"),
               num_experts_per_tok=g("expert_used_count"), routed_scaling_factor=g("expert_weights_scale", 1.0) or 1.0,
               norm_topk_prob=bool(g("expert_weights_norm", False)), n_group=g("expert_group_count", 1) or 1,
               topk_group=g("expert_group_used_count", 1) or 1)
    if g("expert_gating_func") == 2:  # sigmoid with a selection bias: GLM-4.7-Flash (DeepSeek-V3 routing)
      cls = transformers.Glm4MoeLiteForCausalLM
      cfg = transformers.Glm4MoeLiteConfig(**common, **moe, mlp_layer_types=["dense" if i < n_dense else "sparse" for i in range(n_layer)])
    else:
      cls = transformers.DeepseekV2ForCausalLM
      cfg = transformers.DeepseekV2Config(**common, **moe, first_k_dense_replace=n_dense, topk_method="greedy")
  sd = {"model.embed_tokens.weight": t["token_embd.weight"], "model.norm.weight": t["output_norm.weight"],
        "lm_head.weight": t["token_embd.weight" if tied else "output.weight"]}
  for i in range(n_layer):
    p, q = f"blk.{i}.", f"model.layers.{i}."
    sd[q + "input_layernorm.weight"], sd[q + "post_attention_layernorm.weight"] = t[p + "attn_norm.weight"], t[p + "ffn_norm.weight"]
    at = q + "self_attn."
    if p + "attn_q_a.weight" in t:
      sd[at + "q_a_proj.weight"], sd[at + "q_a_layernorm.weight"], sd[at + "q_b_proj.weight"] = \
        t[p + "attn_q_a.weight"], t[p + "attn_q_a_norm.weight"], t[p + "attn_q_b.weight"]
    else: sd[at + "q_proj.weight"] = t[p + "attn_q.weight"]
    sd[at + "kv_a_proj_with_mqa.weight"], sd[at + "kv_a_layernorm.weight"] = t[p + "attn_kv_a_mqa.weight"], t[p + "attn_kv_a_norm.weight"]
    k_b, v_b = t[p + "attn_k_b.weight"], t[p + "attn_v_b.weight"]          # (H, kv_lora, nope), (H, v_head, kv_lora)
    sd[at + "kv_b_proj.weight"] = np.concatenate([k_b.transpose(0, 2, 1), v_b], axis=1).reshape(n_head * (nope + v_head), kv_lora)
    sd[at + "o_proj.weight"] = t[p + "attn_output.weight"]
    m = q + "mlp."
    if i < n_dense or n_expert == 0:
      for ours, theirs in (("ffn_gate", "gate_proj"), ("ffn_up", "up_proj"), ("ffn_down", "down_proj")):
        sd[m + theirs + ".weight"] = t[p + ours + ".weight"]
      continue
    sd[m + "gate.weight"] = t[p + "ffn_gate_inp.weight"]
    if p + "exp_probs_b.bias" in t: sd[m + "gate.e_score_correction_bias"] = t[p + "exp_probs_b.bias"]
    gate_up = t[p + "ffn_gate_up_exps.weight"] if p + "ffn_gate_up_exps.weight" in t else \
      np.concatenate([t[p + "ffn_gate_exps.weight"], t[p + "ffn_up_exps.weight"]], axis=1)
    sd[m + "experts.gate_up_proj"], sd[m + "experts.down_proj"] = gate_up, t[p + "ffn_down_exps.weight"]
    for ours, theirs in (("ffn_gate_shexp", "gate_proj"), ("ffn_up_shexp", "up_proj"), ("ffn_down_shexp", "down_proj")):
      sd[m + "shared_experts." + theirs + ".weight"] = t[p + ours + ".weight"]
  torch.manual_seed(0)
  model = cls(cfg).to(torch.float64).eval()
  state = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in sd.items()}
  missing, unexpected = model.load_state_dict(state, strict=False)
  missing = [k for k in missing if not k.endswith(("rotary_emb.inv_freq", "original_inv_freq"))]
  if missing or unexpected: raise RuntimeError(f"state dict mismatch: missing {missing[:5]}, unexpected {unexpected[:5]}")
  return model

def hf_logits(model, ids: list[int]) -> np.ndarray:
  """float64 logits (T, vocab) of ids in a fresh context, computed in one pass."""
  import torch
  with torch.no_grad(): return model(torch.tensor([ids])).logits[0].numpy()

def hf_greedy(model, ids: list[int], n: int) -> list[int]:
  """n argmax steps, each recomputing the whole sequence (no cache, no EOS handling: the plain math)."""
  seq = list(ids)
  for _ in range(n): seq.append(int(hf_logits(model, seq)[-1].argmax()))
  return seq[len(ids):]

def llamacpp(path: str, n_ctx: int = 512, kv_type: int | None = None):
  import llama_cpp
  # f32 KV cache unless kv_type says (llama_cpp.GGML_TYPE_F16: llama.cpp's default): the f16 cache alone moves logits by ~1e-3
  kv = llama_cpp.GGML_TYPE_F32 if kv_type is None else kv_type
  return llama_cpp.Llama(model_path=path, n_ctx=n_ctx, n_batch=min(n_ctx, 512), logits_all=True, n_gpu_layers=0, verbose=False, seed=0,
                         type_k=kv, type_v=kv)

def llamacpp_logits(llm, ids: list[int]) -> np.ndarray:
  llm.reset()
  llm.eval(ids)
  return np.array(llm.scores[:len(ids)], dtype=np.float64)

def llamacpp_greedy(llm, ids: list[int], n: int) -> list[int]:
  llm.reset()
  out = []
  for tok in llm.generate(ids, top_k=1, top_p=1.0, temp=0.0, repeat_penalty=1.0):
    out.append(int(tok))
    if len(out) == n: break
  return out
