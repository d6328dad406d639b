"""The one-kernel MoE router (apps/kernels/router.py) against a float64 numpy routing, on devices with hand-written kernels
(the GPU machine runs this with DEV=CUDA); here its CUDA source is compiled with nvcc and its Metal source rendered."""
import numpy as np
import pytest
from tinygrad import Tensor, Device
from apps.kernels import router, render, language_of
from nvcc import needs_nvcc, run_nvcc_script

def reference(logits, bias, k, gating, norm, scale):
  l = logits.astype(np.float64)
  if gating == router.SOFTMAX: p = np.exp(l - l.max(-1, keepdims=True)); p /= p.sum(-1, keepdims=True)
  elif gating == router.SIGMOID: p = 1 / (1 + np.exp(-l))
  else: p = l
  c = p + (bias if bias is not None else 0)
  sel = np.stack([np.lexsort((np.arange(len(r)), -r))[:k] for r in c])  # larger first, the lower id on ties
  w = np.take_along_axis(p, sel, -1)
  if gating == router.SOFTMAX_WEIGHT: w = np.exp(w - w.max(-1, keepdims=True)); w /= w.sum(-1, keepdims=True)
  if norm: w = w / np.maximum(w.sum(-1, keepdims=True), 6.103515625e-5)
  return sel, w * scale

CASES = [(64, 4, router.SIGMOID, True, True, 1.8), (64, 6, router.SOFTMAX, False, False, 1.0), (8, 2, router.SOFTMAX_WEIGHT, False, True, 2.5),
         (160, 8, router.SIGMOID, True, True, 2.5)]

@pytest.mark.skipif(language_of(Device.DEFAULT) is None, reason="no hand-written kernels on this device")
@pytest.mark.parametrize("n,k,gating,has_bias,norm,scale", CASES)
def test_route_matches_reference(n, k, gating, has_bias, norm, scale):
  rng = np.random.default_rng(n + k)
  logits = rng.standard_normal((2, n)).astype(np.float32)
  logits[1, 3] = logits[1, 5] = logits[1].max() + 1  # a tie: the lower id goes first
  bias = (rng.standard_normal(n) * 0.1).astype(np.float32) if has_bias else None
  sel, w = router.route(Tensor(logits), Tensor(bias) if has_bias else None, k, gating, norm, scale)
  rsel, rw = reference(logits, bias, k, gating, norm, scale)
  np.testing.assert_array_equal(sel.numpy(), rsel)
  np.testing.assert_allclose(w.numpy(), rw, rtol=1e-5, atol=1e-7)

@pytest.mark.skipif(language_of(Device.DEFAULT) is None, reason="no hand-written kernels on this device")
def test_route_of_a_prefill_chunk():
  """A chunk of 70 tokens, and one of symbolic length (bound 80: the padded rows' routing is sliced off)."""
  from tinygrad import UOp
  n, k, gating, has_bias, norm, scale = CASES[0]
  rng = np.random.default_rng(7)
  logits, bias = rng.standard_normal((80, n)).astype(np.float32), (rng.standard_normal(n) * 0.1).astype(np.float32)
  rsel, rw = reference(logits[:70], bias, k, gating, norm, scale)
  sel, w = router.route(Tensor(logits[:70]), Tensor(bias), k, gating, norm, scale)
  np.testing.assert_array_equal(sel.numpy(), rsel)
  np.testing.assert_allclose(w.numpy(), rw, rtol=1e-5, atol=1e-7)
  B = UOp.variable("n_tokens", 1, 80).bind(70)
  sel, w = router.route(Tensor(logits)[:B], Tensor(bias), k, gating, norm, scale)
  np.testing.assert_array_equal(sel.pad(((0, 80 - B), (0, 0))).numpy()[:70], rsel)   # (a symbolic shape has no data: pad it)

def test_not_used_where_it_does_not_apply():
  t = Tensor.zeros(2, 64)
  if language_of(Device.DEFAULT) is None: assert router.route(t, None, 4, router.SOFTMAX, False, 1.0) is None
  assert router.route(t, None, 4, router.SOFTMAX, False, 1.0, n_groups=8) is None

def test_metal_sources_render():
  for n, k, g, b, nm, sc in CASES:
    src = render(router.build(1, n, k, g, b, nm, sc), "METAL")
    assert "kernel void" in src and "simd_shuffle_xor" in src

COMPILE = r"""
import apps
from tinygrad import Device
from apps.kernels import router, render
import test_kernels_router as T
for n, k, g, b, nm, sc in T.CASES: Device["NULL"].renderer.compiler.compile(render(router.build(1, n, k, g, b, nm, sc), "CUDA"))
print("COMPILED", len(T.CASES))
"""

@needs_nvcc
def test_cuda_sources_compile():
  assert f"COMPILED {len(CASES)}" in run_nvcc_script(COMPILE)

@pytest.mark.parametrize("n,k,gating,has_bias,norm,scale", CASES)
def test_reference_is_the_models_routing(n, k, gating, has_bias, norm, scale):
  """The oracle above agrees with apps.mla's portable routing (itself checked against transformers by the model goldens)."""
  from types import SimpleNamespace
  from apps.mla import Block, Gating
  rng = np.random.default_rng(n * k)
  logits = rng.standard_normal((3, n)).astype(np.float32)
  logits[1, 3] = logits[1, 5] = logits[1].max() + 1  # a tie: the lower id goes first
  bias = (rng.standard_normal(n) * 0.1).astype(np.float32) if has_bias else None
  if has_bias: bias[5] = bias[3]
  cfg = SimpleNamespace(n_expert=n, n_expert_used=k, gating=Gating(gating), expert_weights_norm=norm, expert_weights_scale=scale,
                        n_expert_groups=1, n_group_used=1)
  fake = SimpleNamespace(cfg=cfg, exp_probs_b=Tensor(bias) if has_bias else None, kernels="generated")  # the portable path even on a GPU
  sel, w = Block.route(fake, Tensor(logits))
  rsel, rw = reference(logits, bias, k, gating, norm, scale)
  np.testing.assert_array_equal(sel.numpy(), rsel)
  np.testing.assert_allclose(w.numpy(), rw, rtol=1e-5, atol=1e-7)

def test_route_to_given_experts():
  """Block.route with `sel` (a choice made elsewhere: tools/path_check.py --pinned) keeps those experts and weighs them from
  its own logits, as it weighs its own choice."""
  from types import SimpleNamespace
  from apps.mla import Block, Gating
  rng = np.random.default_rng(5)
  n, k = 16, 4
  logits, bias = rng.standard_normal((3, n)).astype(np.float32), (rng.standard_normal(n) * 0.1).astype(np.float32)
  cfg = SimpleNamespace(n_expert=n, n_expert_used=k, gating=Gating.SIGMOID, expert_weights_norm=True, expert_weights_scale=1.8,
                        n_expert_groups=1, n_group_used=1)
  fake = SimpleNamespace(cfg=cfg, exp_probs_b=Tensor(bias), kernels="hand")
  given = np.stack([rng.permutation(n)[:k] for _ in range(3)]).astype(np.int32)
  sel, w = Block.route(fake, Tensor(logits), Tensor(given))
  p = 1 / (1 + np.exp(-logits.astype(np.float64)))
  want = np.take_along_axis(p, given, -1)
  np.testing.assert_array_equal(sel.numpy(), given)
  np.testing.assert_allclose(w.numpy(), want / want.sum(-1, keepdims=True) * 1.8, rtol=1e-5)

def test_topk_indices_with_ties():
  """apps.mla.topk_indices (the portable routing's selection, and its group-limited form's over (T, groups, per group)):
  the k largest first, ties to the lower index, as a stable sort of the negated scores gives them."""
  from apps.mla import topk_indices
  rng = np.random.default_rng(0)
  for shape, k in (((3, 8, 8), 2), ((2, 64), 4), ((5, 16), 6), ((1, 4, 3), 3)):
    s = rng.integers(0, 4, shape).astype(np.float32)   # many ties
    np.testing.assert_array_equal(topk_indices(Tensor(s), k).numpy(), np.argsort(-s, axis=-1, kind="stable")[..., :k])
