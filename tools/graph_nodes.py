"""Kernels per decode token: ours against llama.cpp's graph nodes, on the same GGUF files.

Ours: the TinyJit capture of the real decode step (bench_block's `decode`), rendered for CUDA and compiled by nvcc but run
on nothing (DEV=NULL:NVCC:sm_90, as test/test_decode_kernels.py does), so the count is the H100's.
llama.cpp's: the graph nodes its context reports when it is created (llama-cpp-python from requirements-ref.txt, CPU build).
That is the backend-independent ggml graph reserved for a batch; a decode token's graph has the same ops. Its CUDA backend
fuses some nodes into one kernel, so its launches are at most its nodes.
The -tiny presets have the full models' block structure (DeepSeek-V2-Lite-tiny all 27 blocks, the others fewer), so the
per-block numbers carry over to the full models.

  ./run python -m tools.graph_nodes [--presets youtu-llm-2b-tiny,deepseek-v2-lite-tiny,glm-4.7-flash-tiny] [--mix release]
  ./run python -m tools.graph_nodes --list [--kernels generated] --presets youtu-llm-2b   # our kernels, with their opts
"""
from __future__ import annotations
import argparse, json, os, re, shutil, subprocess, sys
from pathlib import Path
ROOT = Path(__file__).resolve().parent.parent

OURS = r"""
import json, sys
import bench_block as bb
from tinygrad.uop.ops import Ops
from tools.profile import opts_of
bb.setup(["--model", sys.argv[1], "--mix", sys.argv[2], "--target", "decode", "--pos", "16", "--max-context", "256", "--kernels", sys.argv[3]])
b = bb._ensure()
st = b.step("decode")
bb.warm(st, None)
c, jit = b.m.cfg, bb.jit_of(st)
names = [(c.src[0].arg.name, opts_of(c.src[0])) for c in bb.program_calls(jit) if c.src[0].op is Ops.PROGRAM]
print("RESULT " + json.dumps(dict(bb.kernel_counts(jit), n_layer=c.n_layer, n_moe=sum(bl.moe for bl in b.m.blocks), names=names)))
"""

LLAMA = r"""
import sys, llama_cpp
llama_cpp.Llama(model_path=sys.argv[1], n_ctx=256, n_batch=256, n_gpu_layers=0, verbose=True)
"""

def parse_graph_nodes(log: str) -> int:
  """The node count of llama.cpp's context log ("sched_reserve: graph: nodes = N, splits = ..." in 0.3.36's llama.cpp,
  "graph nodes  = N" in older ones; the last report); ValueError when the log has none."""
  m = re.findall(r"graph:?\s+nodes\s*=\s*(\d+)", log)
  if not m: raise ValueError("no 'graph nodes = N' line in llama.cpp's log")
  return int(m[-1])

def ours(preset: str, mix: str, kernels: str = "hand") -> dict:
  env = {**os.environ, "DEV": "NULL:NVCC:sm_90", "NULL_ALLOW_COPYOUT": "1",
         "PYTHONPATH": os.pathsep.join([str(ROOT)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))}
  r = subprocess.run([sys.executable, "-c", OURS, preset, mix, kernels], env=env, capture_output=True, text=True, cwd=ROOT, timeout=900)
  if r.returncode != 0: raise SystemExit(f"graph_nodes: our capture of {preset} failed: {r.stderr.strip().splitlines()[-1:]}")
  return json.loads(next(l for l in r.stdout.splitlines() if l.startswith("RESULT "))[7:])

def llama_nodes(path: Path) -> int:
  r = subprocess.run([sys.executable, "-c", LLAMA, str(path)], capture_output=True, text=True, timeout=900)
  if r.returncode != 0: raise SystemExit(f"graph_nodes: llama.cpp could not load {path.name}: {r.stderr.strip().splitlines()[-1:]}")
  return parse_graph_nodes(r.stderr + r.stdout)

def main(argv=None) -> int:
  ap = argparse.ArgumentParser(prog="python3 -m tools.graph_nodes", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--presets", default="youtu-llm-2b-tiny,deepseek-v2-lite-tiny,glm-4.7-flash-tiny")
  ap.add_argument("--mix", default="release")
  ap.add_argument("--kernels", default="hand", choices=("hand", "generated"))
  ap.add_argument("--list", action="store_true", help="our decode step's kernels in order, each with the opts it was built "
                  "with (tinygrad's heuristics' choice on the generated path), and no llama.cpp count")
  a = ap.parse_args(argv)
  if shutil.which("nvcc") is None: ap.error("our count needs nvcc (the CUDA kernels are compiled, not run)")
  if a.list:
    from apps import synth
    for preset in a.presets.split(","):
      synth.generate(preset, a.mix, progress=False)
      o = ours(preset, a.mix, a.kernels)
      print(f"{preset}: {o['kernels']} kernels, {o['n_layer']} blocks")
      for name, opts in o["names"]: print(f"  {re.sub(chr(27) + r'[^m]*m', '', name):48s} {opts}")
    return 0
  try: import llama_cpp  # noqa: F401
  except ImportError: ap.error("llama.cpp's count needs llama-cpp-python: ./run pip install -r requirements-ref.txt")
  from apps import synth
  print(f"{'preset':24s} {'blocks':>6s} {'moe':>4s} {'ours':>6s} {'llama.cpp':>9s} {'ours/block':>10s} {'llama/block':>11s}")
  for preset in a.presets.split(","):
    path = synth.generate(preset, a.mix, progress=False)
    o, n = ours(preset, a.mix), llama_nodes(path)
    print(f"{preset:24s} {o['n_layer']:6d} {o['n_moe']:4d} {o['kernels']:6d} {n:9d} {o['kernels'] / o['n_layer']:10.1f} {n / o['n_layer']:11.1f}",
          flush=True)
  return 0

if __name__ == "__main__": sys.exit(main())
