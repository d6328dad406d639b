"""A/B of decode fusions in one process: variant A turns the named fusions off, B is the code as checked out. Both are
timed as gpu_bench times decode (generate()'s steady tokens, median ms per token), interleaved A B A B.

  DEV=CUDA python3 -m tools.ab_fusions --off stack_q [--presets deepseek-v2-lite,glm-4.7-flash] [--rounds 2]

Fusions (what A runs instead):
  stack_q      a direct attn_q and attn_kv_a_mqa as two matvecs instead of one stacked [q; kv_a] (DeepSeek-V2-Lite: a
               second model is loaded for A, with its own weights)
  side_by_side the shared expert's gate_up and the routed experts' gate_up as two kernels instead of one launch
  sum          the routed experts' down (+ mix + residual) and the shared expert's down as two kernels instead of one sum
  trigger      no GRID_TRIGGER() at the top of the hand-written kernels (dependents launch as a kernel's workgroups exit)
  slices       (prefill) a kernel's output sliced to a symbolic chunk length is padded back to the bound by a copy for the next
               kernel, instead of that kernel reading the unsliced output (apps.kernels.to_bound)
A fusion that changes the kernels of a step rather than the weights is turned off around the capture of A's steps, on
the same model (the journal has two measured that way, the combine folded into v_b and a one-kernel router matvec + routing,
and rejected them: OPTIMIZATION_JOURNAL.md).
Prints ms per token per variant and round and the greedy tokens' agreement between the variants.
"""
from __future__ import annotations
import argparse, contextlib, sys
from pathlib import Path
ROOT = Path(__file__).resolve().parent.parent
import apps  # noqa: F401
import apps.kernels as K
from apps import synth, mla, dispatch
from apps.kernels import matvec, mla_attention, router, gemm
from apps.model import Transformer
from tools.ab_readahead import interleave

FUSIONS = ("stack_q", "side_by_side", "sum", "trigger", "slices")

def _drop_built_kernels() -> None:
  """Forget every kernel built so far (the next captures build and render them anew)."""
  dispatch.kernel_cached.cache_clear()
  for mod in (matvec, mla_attention, router, gemm):
    for f in vars(mod).values():
      if hasattr(f, "cache_clear"): f.cache_clear()

@contextlib.contextmanager
def fusions_off(off: set[str]):
  """Inside: the named fusions are off for models loaded and steps captured there."""
  saved, saved_side, saved_sum, saved_render, saved_sliced = mla._stackable, dispatch._side_by_side, dispatch._summed, K.render, K._sliced_from
  if "stack_q" in off: mla._stackable = lambda gf, names: not any(n.endswith("attn_q.weight") for n in names) and saved(gf, names)
  if "side_by_side" in off: dispatch._side_by_side = lambda specs: None
  if "sum" in off: dispatch._summed = lambda specs: None
  if "slices" in off: K._sliced_from = lambda t, Tmax: None
  if "trigger" in off:
    K.render = lambda k, language: saved_render(k, language).replace(K.TRIGGER, "", 1)
    _drop_built_kernels()
  try: yield
  finally:
    mla._stackable, dispatch._side_by_side, dispatch._summed, K.render, K._sliced_from = saved, saved_side, saved_sum, saved_render, saved_sliced
    if "trigger" in off: _drop_built_kernels()

def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--off", required=True, help=f"comma list of fusions variant A turns off ({', '.join(FUSIONS)})")
  ap.add_argument("--presets", default="youtu-llm-2b,deepseek-v2-lite")
  ap.add_argument("--decode", type=int, default=64)
  ap.add_argument("--rounds", type=int, default=2)
  a = ap.parse_args(argv)
  off = set(a.off.split(","))
  if not off or off - set(FUSIONS): ap.error(f"--off {a.off}: fusions are {', '.join(FUSIONS)}")
  for preset in a.presets.split(","):
    path = synth.generate(preset, "release", progress=False)
    load = lambda: Transformer.from_gguf(path, max_context=a.decode + 96)
    model_b = load()
    if "stack_q" in off and model_b.cfg.q_lora_rank == 0:
      with fusions_off({"stack_q"}): model_a = load()
    else: model_a = model_b
    interleave(preset, (("A", model_a, lambda: fusions_off(off)), ("B", model_b, contextlib.nullcontext)), a.rounds, a.decode)
    del model_a, model_b
  return 0

if __name__ == "__main__": sys.exit(main())
