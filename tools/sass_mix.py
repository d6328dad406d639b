"""The static instruction mix of a tensor-core GEMM's K loop on sm_90, and what it lets the kernel read: one of
tools.bench_gemm's products as gemm.build_mma builds it (the rule's tile, or the one given), compiled by nvcc and
disassembled by cuobjdump (NVIDIA's wheel from PyPI, fetched once into the project cache where none is installed).
The innermost loop that holds the mma instructions is counted by kind, and its instructions a weight byte bound the
bandwidth: an SM issues at most 4 warp instructions a clock, so at I instructions a byte a kernel reads at most
4 / I bytes a clock an SM, however many loads are in flight.

  python3 -m tools.sass_mix --model dsv2 --product gate_up_exps --tokens 8 [--tile 8x128] [--steps 4] [--stages 3] [--sass]

Needs nvcc; runs no kernel (no GPU). The weight bytes of a loop iteration are a warp's rows (tile rows / 4) x the step's
sub-steps x 32 weights at the type's bits a weight (scales included).
"""
from __future__ import annotations
import argparse, collections, os, re, shutil, subprocess, sys, tempfile, zipfile
from dataclasses import dataclass, replace
from pathlib import Path

KINDS = {"mma": ("IMMA", "HMMA"), "float": ("I2FP", "I2F", "FFMA", "FMUL", "FADD", "F2F", "HADD2", "HMUL2", "HFMA2"),
         "shared": ("LDS", "LDSM", "STS"), "global": ("LDGSTS", "LDG", "STG", "LDGDEPBAR", "DEPBAR"),
         "integer": ("IMAD", "IADD3", "VIADD", "LOP3", "SHF", "LEA", "IMNMX", "VIADDMNMX", "ISETP", "SEL", "PRMT", "MOV", "IABS",
                     "BMSK", "SGXT", "I2I", "LDC", "S2R", "CS2R", "P2R", "R2P", "PLOP3"),
         "uniform": ("UMOV", "ULEA", "UIADD3", "USHF", "ULDC", "S2UR", "UISETP", "ULOP3", "UIMAD"),
         "control": ("BRA", "BAR", "BSSY", "BSYNC", "WARPSYNC", "NOP", "EXIT", "YIELD")}
CLOCK_GHZ, ISSUE = 1.755, 4   # H100 SXM: boost clock, warp instructions an SM issues a clock (its SMs: matvec.SMS)

@dataclass
class Loop:
  start: int
  end: int
  ops: collections.Counter   # opcode (no predicate, no modifiers) -> count

  @property
  def size(self) -> int: return sum(self.ops.values())
  def kind(self, k: str) -> int: return sum(self.ops[o] for o in KINDS[k])

def instructions(sass: str) -> list[tuple[int, str]]:
  """(address, instruction text) of each SASS line of cuobjdump -sass output."""
  return [(int(m.group(1), 16), m.group(2).strip()) for m in re.finditer(r"/\*([0-9a-f]{4,})\*/\s+([^;/]+);", sass)]

def opcode(text: str) -> str: return re.sub(r"^@!?U?P[T\d]+\s+", "", text).split()[0].split(".")[0]

def mma_loop(sass: str) -> Loop:
  """Of the loops (a backward branch's span) that hold the most mma instructions, the smallest: the K loop, not a loop
  around it."""
  ins = instructions(sass)
  loops = []
  for a, t in ins:
    m = re.search(r"\bBRA\b.*?0x([0-9a-f]+)", t)
    if m and int(m.group(1), 16) < a:
      lo = int(m.group(1), 16)
      loops.append(Loop(lo, a, collections.Counter(opcode(t2) for a2, t2 in ins if lo <= a2 <= a)))
  with_mma = [lp for lp in loops if lp.kind("mma")]
  if not with_mma: raise ValueError("no loop holds an mma instruction")
  most = max(lp.kind("mma") for lp in with_mma)
  return min((lp for lp in with_mma if lp.kind("mma") == most), key=lambda lp: lp.end - lp.start)

def cuobjdump() -> str:
  """A cuobjdump binary (which runs nvdisasm): the installed one, else NVIDIA's PyPI wheels of both (nvidia-cuda-cuobjdump,
  nvidia-cuda-nvdisasm) unpacked into the project cache."""
  if found := shutil.which("cuobjdump"): return found
  from apps.vocab import cache_dir
  d = cache_dir() / "cuda-tools"
  if not all(next(d.rglob(f"bin/{t}"), None) for t in ("cuobjdump", "nvdisasm")):
    d.mkdir(parents=True, exist_ok=True)
    for pkg in ("nvidia-cuda-cuobjdump", "nvidia-cuda-nvdisasm"):
      subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(d), pkg], check=True, timeout=600)
    for whl in d.glob("nvidia_cuda_*.whl"): zipfile.ZipFile(whl).extractall(d / "unpacked")
  for t in ("cuobjdump", "nvdisasm"): os.chmod(next(d.rglob(f"bin/{t}")), 0o755)
  return str(next(d.rglob("bin/cuobjdump")))

def sass_of(source: str, arch: str = "sm_90") -> str:
  """cuobjdump -sass of the CUDA `source` compiled for `arch`."""
  with tempfile.TemporaryDirectory() as tmp:
    cu, cubin = Path(tmp) / "k.cu", Path(tmp) / "k.cubin"
    cu.write_text(source)
    subprocess.run(["nvcc", f"-arch={arch}", "-cubin", "-o", str(cubin), str(cu)], check=True, capture_output=True, text=True, timeout=300)
    exe = cuobjdump()   # (its nvdisasm beside it)
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(exe).parent), os.environ.get("PATH", "")])}
    return subprocess.run([exe, "-sass", str(cubin)], check=True, capture_output=True, text=True, timeout=120, env=env).stdout

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--model", default="dsv2", help="a tools.bench_gemm model: youtu, dsv2, glm")
  ap.add_argument("--product", default="gate_up_exps", help="one of the model's products in tools.bench_gemm")
  ap.add_argument("--tokens", type=int, default=8)
  ap.add_argument("--tile", help="TTxTN instead of the rule's (gemm.mma_tile)")
  ap.add_argument("--steps", type=int, help="sub-steps a step instead of the rule's")
  ap.add_argument("--stages", type=int, help="staged steps in flight instead of the rule's (0: the weights in registers)")
  ap.add_argument("--split", type=int, help="K slices instead of gemm.split_k's")
  ap.add_argument("--sass", action="store_true", help="also print the loop's SASS")
  args = ap.parse_args()
  if shutil.which("nvcc") is None: ap.error("needs nvcc (the kernel is compiled for sm_90, not run)")
  import apps  # noqa: F401  (the patched tinygrad on the path)
  from apps.gguf import BLOCK
  from apps.kernels import render, gemm, matvec
  from tools.bench_gemm import MODELS, shape_of
  prods = {p[0]: p for p in MODELS.get(args.model, [])}
  if args.product not in prods: ap.error(f"--model {args.model} has no product {args.product!r}: {', '.join(prods) or 'no such model'}")
  _, typ, N, K, form = prods[args.product]
  s = gemm.split_k(shape_of(typ, args.tokens, N, K, form))
  if args.split: s = replace(s, split=args.split)
  tile = tuple(map(int, args.tile.split("x"))) if args.tile else gemm.mma_tile(s)
  k = gemm.build_mma(s, tile if args.tile else None, args.steps, stages=args.stages)
  sb = args.steps or gemm._mma_steps(s, tile)
  try: sass = sass_of(render(k, "CUDA"))
  except subprocess.CalledProcessError as e: sys.exit(f"sass_mix: {Path(e.cmd[0]).name} failed: {(e.stderr or '').strip()[-300:]}")
  lp = mma_loop(sass)
  block, size = BLOCK[typ]
  wbytes = tile[1] // 4 * sb * gemm.KB * size / block   # a warp's weight bytes an iteration (tile rows over 4 warps)
  per_byte = lp.size / wbytes
  print(f"{k.name}: tile {tile[0]}x{tile[1]}, {sb} sub-steps a step; loop {lp.start:#x}-{lp.end:#x}: {lp.size} instructions, "
        f"{wbytes:.0f} weight bytes a warp")
  print("  " + ", ".join(f"{kd} {lp.kind(kd)}" for kd in KINDS) + f", other {lp.size - sum(lp.kind(kd) for kd in KINDS)}")
  print("  most: " + ", ".join(f"{o} {n}" for o, n in lp.ops.most_common(12)))
  print(f"  {per_byte:.3f} instructions a weight byte: at {ISSUE} a clock an SM at most {ISSUE / per_byte * matvec.SMS * CLOCK_GHZ / 1e3:.2f} TB/s "
        f"(H100: {matvec.SMS} SMs, {CLOCK_GHZ} GHz)")
  if args.sass:
    for a, t in instructions(sass):
      if lp.start <= a <= lp.end: print(f"  {a:#06x}  {t}")

if __name__ == "__main__":
  main()
