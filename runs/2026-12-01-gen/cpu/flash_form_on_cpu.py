"""Does a change of attention form alone move a model's logits at depth by what GLM-4.7-Flash's chunks of 2048 moved them on
the H200 (prefill vs decode 2.1e-2 at a 2,010-token depth, against 5.1e-6 with chunks of 512)? On the CPU, the same window
(tools.path_check.window) as one chunk, block by block, twice: A over the latent rows (the absorbed form, as GLM-4.7-Flash's chunks of 512 on the GPU), B in the flash branch
(a model whose chunks include 2048), its kernel stood in for by tensor-op attention over the expanded buffers (as
test_model.py::test_flash_prefill_wiring does). Every routing decision of both runs is recorded, and the decisions that differ
are printed with their margins in A (k-th best choice score minus the (k+1)-th): near ties if the margins are ~1e-6.

  PYTHONPATH=.:upstream DEV=CPU python3 runs/2026-12-01-gen/cpu/flash_form_on_cpu.py glm-4.7-flash 2010 40
"""
import sys, types, dataclasses, time
import numpy as np
import apps  # noqa: F401
import apps.mla as mla, apps.model as M
from tinygrad import Tensor, dtypes
from apps import synth
from apps.model import Transformer
from tools.path_check import rel, window, choice_scores

preset, depth, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 40
path = synth.generate(preset, "release", progress=False)

calls, expands = [], mla.expands_latents
def flash(q, keys, values, pos, scale, **kw):   # the tensor cores' kernel, stood in for by tensor-op attention
  T, rows = q.shape[0], keys.shape[0]
  calls.append(T)
  seen = Tensor.arange(rows).reshape(1, 1, rows) <= (Tensor.arange(T) + pos[0].cast(dtypes.int32)).reshape(1, T, 1)
  s = seen.where(q.permute(1, 0, 2) @ keys.permute(1, 2, 0) * scale, float("-inf"))
  return (s.softmax(-1) @ values.permute(1, 0, 2)).permute(1, 0, 2)

def run(chunks, flash_branch):
  """The window as one chunk at position 0, block by block (tools.path_check.trace's loop, eager): the last rows' logits and
  every MoE block's router logits and selection."""
  model = Transformer.from_gguf(path, max_context=depth + n + 8, prefill_chunks=chunks)
  mla.expands_latents = (lambda cfg, chunk: False) if not flash_branch else expands   # A: the absorbed form, as the GPU's 512s
  if flash_branch:
    stand_in = types.ModuleType(model.kernel_modules.mla_attention.__name__)
    stand_in.__dict__.update(vars(model.kernel_modules.mla_attention))
    stand_in.available, stand_in.decodes, stand_in.mla_flash_prefill = (lambda device: True), (lambda *a: False), flash
    mla.has_mma = M.has_mma = lambda device: True
    model.set_kernel_modules(dataclasses.replace(model.kernel_modules, mla_attention=stand_in))
    model.set_prefill_chunks(*chunks)
    assert model.expanded is not None
  ids = window(model.cfg.vocab_size, depth + n, 7)
  t0, rec = time.perf_counter(), []
  model.reset()
  x = model.token_embd(Tensor(ids, dtype=dtypes.int32, device=model.device)).float()
  args = model.rope_args(0, len(ids))
  for b, cache in zip(model.blocks, model.caches):
    h = b.attention(x, cache, *args).realize()
    sel = None
    if b.moe:
      logits, sel, _ = b.router(h)
      rec.append((choice_scores(model, b, logits.numpy()), sel.numpy()))
    x = b.feed_forward(h, sel).realize()
  out = model.head(x[depth + 8:]).numpy()
  assert not flash_branch or len(calls) == len(model.blocks), calls
  print(f"chunks {chunks} flash {flash_branch}: {time.perf_counter() - t0:.0f} s", flush=True)
  k = model.cfg.n_expert_used
  del model, x, h, cache, args, b   # one full-size model in memory at a time
  import gc; gc.collect()
  return k, out, rec

k, A, dA = run((512, 128, 32), False)
_, B, dB = run((2048, 512, 128, 32), True)
print(f"{preset} at depth {depth}: B vs A {rel(B, A):.2e}, argmax {(A.argmax(-1) == B.argmax(-1)).sum()}/{len(A)}")
flips, margins, smallest, first = 0, [], [], None
for i, ((sc, sa), (_, sb)) in enumerate(zip(dA, dB)):
  top = np.sort(sc, -1)[:, ::-1]
  margin = top[:, k - 1] - top[:, k]
  smallest.append(float(margin.min()))
  apart = [t for t in range(len(sa)) if set(sa[t].tolist()) != set(sb[t].tolist())]
  flips += len(apart); margins += [float(margin[t]) for t in apart]
  if apart and first is None: first = i
  # the blocks up to the first two with decisions apart: where the parting starts, and whether its margins are near ties
  if apart and i <= (first or 0) + 1:
    print(f"MoE block {i}: {len(apart)} decisions apart, tokens {apart[:8]}, their margins in A {[f'{margin[t]:.1e}' for t in apart[:8]]}")
print(f"routing decisions that differ: {flips} of {sum(len(s) for _, s in dA)}; their margins in A: max {max(margins, default=0):.1e}, "
      f"median {np.median(margins) if margins else 0:.1e}; the smallest margin anywhere {min(smallest):.1e}")
