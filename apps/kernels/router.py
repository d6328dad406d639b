"""DeepSeekMoE routing of tokens (a decode token or a prefill chunk) in one kernel: gating probabilities, the biased choice, top-k with ties to the
lower expert id, and the weights of the selected experts (renormalized and scaled), from the router logits.

The portable path (apps/mla.py `Block.route`) takes ~5 small kernels per MoE block for the same thing. Here one warp per
token holds the expert scores in registers (n_expert / 32 per lane) and runs k rounds of a warp argmax. Group-limited
routing (expert_group_count > 1) is left to the portable path.
"""
from __future__ import annotations
from tinygrad import Tensor, dtypes
from apps.kernels import SourceKernel, Param, Fusions, program, cached, language_of, to_bound

SOFTMAX, SIGMOID, SOFTMAX_WEIGHT = 1, 2, 3  # llama.cpp's gating function ids (apps.mla.Gating)

def build(B: int, n_expert: int, k: int, gating: int, has_bias: bool, norm: bool, scale: float) -> SourceKernel:
  per = -(-n_expert // 32)
  params = [Param("sel", dtypes.int32, True), Param("weights", dtypes.float32, True), Param("logits", dtypes.float32)]
  if has_bias: params.append(Param("bias", dtypes.float32))
  prob = {SOFTMAX: "exp(l[i] - m) / s", SIGMOID: "1.0f / (1.0f + exp(-l[i]))", SOFTMAX_WEIGHT: "l[i]"}[gating]
  body = f"""  GRID_WAIT();
  const int NE = {n_expert}, K = {k}, PER = {per};
  int lane = LID_X, b = GID_X;
  float l[PER], p[PER], c[PER];
  float m = -INFINITY, s = 0.0f;
  for (int i = 0; i < PER; i++) {{ int e = lane + 32*i; l[i] = e < NE ? logits[b*NE + e] : -INFINITY; m = l[i] > m ? l[i] : m; }}
  m = WARP_MAX(m);
  for (int i = 0; i < PER; i++) s += lane + 32*i < NE ? exp(l[i] - m) : 0.0f;
  s = WARP_SUM(s);
  for (int i = 0; i < PER; i++) {{
    int e = lane + 32*i;
    p[i] = {prob};
    c[i] = e < NE ? p[i]{" + bias[e]" if has_bias else ""} : -INFINITY;   // the bias steers the choice, not the weights
  }}
  int ids[K]; float w[K];
  for (int r = 0; r < K; r++) {{
    // this lane's best untaken expert, then the warp's: larger choice first, the lower id on ties
    float bv = -INFINITY, bp = 0.0f; int bi = 1 << 30;
    for (int i = 0; i < PER; i++) {{ int e = lane + 32*i; if (e < NE && (c[i] > bv || (c[i] == bv && e < bi))) {{ bv = c[i]; bp = p[i]; bi = e; }} }}
    for (int o = 16; o > 0; o >>= 1) {{
      float ov = SHFL_XOR(bv, o), op = SHFL_XOR(bp, o); int oi = SHFL_XOR(bi, o);
      if (ov > bv || (ov == bv && oi < bi)) {{ bv = ov; bp = op; bi = oi; }}
    }}
    ids[r] = bi; w[r] = bp;
    if ((bi & 31) == lane) c[bi >> 5] = -INFINITY;   // taken (a -inf choice can still win a later round only if all are -inf)
  }}"""
  if gating == SOFTMAX_WEIGHT:
    body += """
  float wm = w[0], ws = 0.0f;
  for (int r = 1; r < K; r++) wm = w[r] > wm ? w[r] : wm;
  for (int r = 0; r < K; r++) { w[r] = exp(w[r] - wm); ws += w[r]; }
  for (int r = 0; r < K; r++) w[r] /= ws;"""
  if norm:
    body += """
  float ws2 = 0.0f;
  for (int r = 0; r < K; r++) ws2 += w[r];
  ws2 = ws2 > 6.103515625e-5f ? ws2 : 6.103515625e-5f;
  for (int r = 0; r < K; r++) w[r] /= ws2;"""
  body += f"""
  if (lane == 0) for (int r = 0; r < K; r++) {{ sel[b*K + r] = ids[r]; weights[b*K + r] = w[r] * {float(scale)!r}f; }}"""
  name = f"route_{B}_{n_expert}_{k}_g{gating}" + ("_bias" if has_bias else "") + ("_norm" if norm else "")
  return SourceKernel(name, tuple(params), body, (B, 1, 1), (32, 1, 1))

@cached
def _kernel(B, n_expert, k, gating, has_bias, norm, scale, device, trigger):
  return program(build(B, n_expert, k, gating, has_bias, norm, scale), device, trigger)

def route(logits: Tensor, bias: Tensor | None, k: int, gating: int, norm: bool, scale: float, n_groups: int = 1,
          fusions: Fusions = Fusions()) -> tuple[Tensor, Tensor] | None:
  """(sel (B, k) int32, weights (B, k) float32) from router logits (B, n_expert), or None where this kernel does not
  apply (no source kernels on the device, group-limited routing, > 256 experts). A symbolic B (a prefill chunk) runs at
  its bound, on logits padded with zeros, and the result is sliced back. fusions: the model's (trigger, slices)."""
  B, n_expert = logits.shape
  if language_of(logits.device) is None or n_groups > 1 or n_expert > 256 or k > n_expert: return None
  (logits,), B, Bmax = to_bound(logits.float(), slices=fusions.slices)
  srcs = [logits] + ([bias.float()] if bias is not None else [])
  sel, weights = Tensor.empty(Bmax, k, dtype=dtypes.int32, device=logits.device).custom_kernel(
    Tensor.empty(Bmax, k, dtype=dtypes.float32, device=logits.device), *srcs,
    fxn=_kernel(Bmax, n_expert, k, gating, bias is not None, norm, scale, logits.device.split(":")[0], fusions.trigger))[:2]
  return (sel, weights) if isinstance(B, int) else (sel[:B], weights[:B])
