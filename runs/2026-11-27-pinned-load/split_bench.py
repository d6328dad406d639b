"""Host passes of the load, GB/s of file bytes, on the largest Q4_0 tensors of a full-size file (each variant on a fresh
mapping of the file, so it pays the page-cache faults the loader pays): the fields split into a pinned buffer (the
loader's pass), a structured-record variant of it, and a plain memmove of the raw blocks (what a device-side split
would leave to the host), with and without MADV_POPULATE_READ first."""
import ctypes, mmap, sys, time
import numpy as np
import apps  # noqa: F401
from apps import synth, readback
from apps.gguf import GGUFFile, GGMLType
from apps.packed import _fields, QUANT_FORMATS, _SPAN
from apps.readback import POOL, SPAN

path = synth.generate(sys.argv[1] if len(sys.argv) > 1 else "glm-4.7-flash", "release")
gf = GGUFFile(path)
big = sorted((t for t in gf.tensors.values() if t.type == GGMLType.Q4_0), key=lambda t: -t.nbytes)[:12]
total = sum(t.nbytes for t in big)
st = readback._staging("CUDA")

def structured(blocks, layout, empty):
  out = {n: empty((len(blocks), b), np.uint8) for n, b in layout}
  def span(lo):
    part = blocks[lo:lo + _SPAN]
    rec = part.reshape(-1).view(np.dtype([(n, f"V{b}") for n, b in layout]))
    for n, b in layout: out[n][lo:lo + len(part)].reshape(-1).view(f"V{b}")[:] = rec[n]
  list(POOL.map(span, range(0, len(blocks), _SPAN)))
  return out

def memmove(blocks, layout, empty):
  dst = empty((blocks.size,), np.uint8)
  src = blocks.ctypes.data
  list(POOL.map(lambda lo: ctypes.memmove(dst.ctypes.data + lo, src + lo, min(SPAN, blocks.size - lo)), range(0, blocks.size, SPAN)))

def populate_memmove(blocks, layout, empty):
  mm = GGUFFile._current._mm
  def one(lo):
    n = min(SPAN, blocks.size - lo)
    a = blocks.ctypes.data + lo - (blocks.ctypes.data + lo) % mmap.PAGESIZE
    try: mm.madvise(22, a - mm_base, n + (blocks.ctypes.data + lo - a))   # MADV_POPULATE_READ
    except OSError: pass
    ctypes.memmove(dst_p[0] + lo, blocks.ctypes.data + lo, n)
  dst = empty((blocks.size,), np.uint8); dst_p = [dst.ctypes.data]
  mm_base = np.frombuffer(mm, np.uint8, count=1).ctypes.data
  list(POOL.map(one, range(0, blocks.size, SPAN)))

for name, fn in [("fields (loader)", _fields), ("structured", structured), ("memmove", memmove), ("populate+memmove", populate_memmove),
                 ("fields (loader) again", _fields), ("memmove again", memmove)]:
  g = GGUFFile(path); GGUFFile._current = g
  t0 = time.perf_counter()
  for t in big:
    empty = st.lend(t.nbytes + 4096)
    fn(g.tensor_data(t.name).reshape(-1, 18), [("d", 2), ("qs", 16)], empty)
    st.give_back()
  dt = time.perf_counter() - t0
  print(f"{name:24s} {total / dt / 1e9:6.2f} GB/s ({total / 1e9:.2f} GB in {dt:.2f} s)", flush=True)
