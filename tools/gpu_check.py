"""The model goldens (test/goldens/model_*.npz) on the current device, reported rather than asserted: relative logit error
(sketch) against transformers, top-1 agreement, and how many greedy tokens match. For measuring the GPU fp16 path.
With --weights, the full-size presets' packed weights as loaded onto the device, byte for byte against the host's packing
of the file (each tensor packed alone, stacks concatenated on the host).

  DEV=CUDA python3 -m tools.gpu_check [MIX,...] [--kernels generated]
  DEV=CUDA python3 -m tools.gpu_check --weights glm-4.7-flash,deepseek-v2-lite
"""
import argparse, time
import numpy as np
import apps  # noqa: F401
from tinygrad import Device
from apps import captures, synth
from apps.gguf import GGUFFile
from apps.model import Transformer
from apps.packed import PackedTensor
from tools.make_model_goldens import CASES, N_GREEDY, load_golden, rel_err, sketch_matrix

def check_weights(preset: str, mix: str = "release") -> bool:
  path = synth.generate(preset, mix)
  gf, t0 = GGUFFile(path), time.perf_counter()
  model = Transformer.from_gguf(path, max_context=256)
  Device[model.device].synchronize()
  load_s, bad = time.perf_counter() - t0, []
  ws = list({id(w): w for _, w in captures.tensors(model, PackedTensor)}.values())   # a tied head once
  for w in ws:
    host = [PackedTensor.pack_host(gf.tensor_data(n), gf.tensor(n).type, gf.tensor(n).ne, n)[1] for n in w.name.split("+")]
    for p, t in w.parts.items():
      want = np.concatenate([h[p] for h in host], axis=len(w.rows) - 1)   # 2D weights stack along out, experts along their out
      if t.numpy().tobytes() != want.tobytes(): bad.append(f"{w.name}.{p}")
  nbytes = sum(w.nbytes for w in ws)
  print(f"{preset + '/' + mix:34s} {len(ws)} packed tensors, {nbytes / 1e9:.2f} GB loaded in {load_s:.1f} s: "
        + (f"{len(bad)} parts differ: {', '.join(bad[:8])}" if bad else "every byte as the host packs it"), flush=True)
  return not bad

def main() -> None:
  ap = argparse.ArgumentParser(prog="python3 -m tools.gpu_check", description=__doc__.splitlines()[0])
  ap.add_argument("mixes", nargs="?", help='comma list of quant mixes, e.g. "release" or "f32,q8_0" (default: all)')
  ap.add_argument("--kernels", choices=["hand", "generated"], default="hand")
  ap.add_argument("--weights", metavar="PRESETS", help="check the loaded weights of these presets instead (comma list)")
  args = ap.parse_args()
  if args.weights: raise SystemExit(0 if all([check_weights(p, args.mixes or "release") for p in args.weights.split(",")]) else 1)
  mixes, kernels = args.mixes.split(",") if args.mixes else None, args.kernels
  print(f"device {Device.DEFAULT}  kernels {kernels}")
  print(f"{'case':34s} {'prompt33':>9s} {'continue':>9s} {'decode':>9s} {'top1':>6s} {'greedy':>7s} {'s':>5s}")
  for preset, mix in CASES:
    if mixes and mix not in mixes: continue
    t0 = time.perf_counter()
    _, gold = load_golden(preset, mix)
    model = Transformer.from_gguf(synth.generate(preset, mix, progress=False), max_context=96, prefill_chunks=(16,),
                                   kernels=kernels)
    S = sketch_matrix(model.cfg.vocab_size)
    ids, n = gold["continue/ids"].tolist(), len(gold["prompt33/ids"])
    ours = np.concatenate([model.logits(ids[:n])] + [model.feed([t]) for t in ids[n:]])
    ref = gold["continue/hf_sketch"]
    top1 = float((ours.argmax(-1) == gold["continue/hf_top8"][:, 0]).mean())
    greedy = list(model.generate(gold["greedy/prompt"].tolist(), N_GREEDY))
    same = next((i for i, (a, b) in enumerate(zip(greedy, gold["greedy/hf"].tolist())) if a != b), N_GREEDY)
    print(f"{preset + '/' + mix:34s} {rel_err(ours[:n], ref[:n], S):9.2e} {rel_err(ours, ref, S):9.2e} {rel_err(ours[n:], ref[n:], S):9.2e} "
          f"{top1:6.3f} {same:4d}/{N_GREEDY} {time.perf_counter() - t0:5.1f}", flush=True)

if __name__ == "__main__": main()
