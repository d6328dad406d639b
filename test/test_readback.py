"""apps.readback's CUDA staging buffers with the driver faked (no GPU): arrays made in a lent slot are copied from where
they lie, everything else goes through the other slot, and a slot is reused only after the copies queued from it."""
import ctypes, math, shutil, subprocess
from types import SimpleNamespace
import numpy as np
import pytest
from nvcc import needs_nvcc, run_nvcc_script
import apps.readback as R
from apps.gguf import GGMLType
from apps.packed import PackedTensor, format_for, placements

class FakeDriver:
  def __init__(self): self.log, self.keep = [], []
  def cuCtxSetCurrent(self, ctx): return 0
  def cuEventSynchronize(self, ev): self.log.append(("wait", ev)); return 0
  def cuEventRecord(self, ev, stream): self.log.append(("record", ev)); return 0
  def cuMemcpyHtoDAsync_v2(self, dst, src, n, stream):
    self.log.append(("copy", src.value, ctypes.string_at(src.value, n))); return 0
  # the device allocator's host memory (pinned on a GPU)
  def alloc(self, n, spec):
    self.keep.append(buf := (ctypes.c_uint8 * n)())
    return ctypes.c_void_p(ctypes.addressof(buf))
  def free(self, ptr, n, spec): pass

def staging():
  st, cu = object.__new__(R._Staging), FakeDriver()
  st.cu, st.check, st.dev = cu, lambda r: None, SimpleNamespace(context=None, allocator=cu)
  st.slots, st.turn, st.lent = [[None, 0, "event0", False], [None, 0, "event1", False]], 0, None
  st.pinned, st.scratch = None, [None, 0]
  return st, cu

DEVICE_BUFFER = SimpleNamespace(ensure_allocated=lambda: SimpleNamespace(_buf=ctypes.c_void_p(0x1000)))
def inside(slot, a: np.ndarray) -> bool: return slot[0].value <= a.ctypes.data < slot[0].value + slot[1]

def test_lent_arrays_are_copied_from_where_they_lie():
  st, cu = staging()
  empty = st.lend(1024)
  lent = st.lent[0]
  a = empty((16,), np.uint32)
  a[:] = np.arange(16)
  assert inside(lent, a) and st.lend(64) is None   # one lent slot at a time
  st.copy([(DEVICE_BUFFER, a)])
  assert cu.log == [("copy", a.ctypes.data, a.tobytes()), ("record", lent[2])]   # no staging copy: straight from a
  cu.log.clear()
  # while it is lent, other uploads take the other slot, one after another, never the lent one
  for k in range(3):
    b = np.full(8, k, np.float32)
    st.copy([(DEVICE_BUFFER, b)])
    (op, src, data), rec = cu.log[-2:]
    assert op == "copy" and data == b.tobytes() and src != b.ctypes.data and not lent[0].value <= src < lent[0].value + lent[1]
    assert rec[1] != lent[2]
  assert ("wait", lent[2]) not in cu.log
  # past the bytes asked for: a plain array, copied through the staging buffer like any other
  big = empty((1024,), np.uint8)
  assert not inside(lent, big)
  st.give_back()
  cu.log.clear()
  again = st.lend(4096)
  assert ("wait", st.lent[0][2]) in cu.log   # a slot is lent again only once the copies queued from it are done
  assert inside(st.lent[0], again((1000,), np.uint32))

def test_host_arrays_elsewhere_is_numpy():
  with R.host_arrays(1 << 20, "CPU") as empty: assert empty is np.empty

# ---------------------------------------------------------------- the split kernel, its CUDA source run on the CPU

_SHIM = r"""#include <stdio.h>
#include <stdlib.h>
#define __global__
#define __launch_bounds__(n)
#define __restrict__
struct Dim3 { unsigned x; };
static Dim3 blockIdx, threadIdx, gridDim;
#include "split.cu"
int main(int argc, char** argv) {  // src file, dst file, the seven values, grid
  FILE* f = fopen(argv[1], "rb"); fseek(f, 0, SEEK_END); long ns = ftell(f); rewind(f);
  unsigned char* src = (unsigned char*)malloc(ns); fread(src, 1, ns, f); fclose(f);
  f = fopen(argv[2], "rb"); fseek(f, 0, SEEK_END); long nd = ftell(f); rewind(f);
  unsigned char* dst = (unsigned char*)malloc(nd); fread(dst, 1, nd, f); fclose(f);
  unsigned v[7]; for (int i = 0; i < 7; i++) v[i] = (unsigned)atol(argv[3 + i]);
  gridDim.x = (unsigned)atol(argv[10]);
  for (blockIdx.x = 0; blockIdx.x < gridDim.x; blockIdx.x++)
    for (threadIdx.x = 0; threadIdx.x < 256; threadIdx.x++) split_fields(dst, src, v[0], v[1], v[2], v[3], v[4], v[5], v[6]);
  f = fopen(argv[2], "wb"); fwrite(dst, 1, nd, f); fclose(f);
  free(src); free(dst);
}
"""

@pytest.fixture(scope="module")
def split_exe(tmp_path_factory):
  if shutil.which("g++") is None: pytest.skip("g++ is not installed")
  d = tmp_path_factory.mktemp("split")
  (d / "split.cu").write_text(R._SPLIT_SRC.replace('extern "C" ', ""))
  (d / "main.cpp").write_text(_SHIM)
  subprocess.run(["g++", "-O1", "-w", "-fsanitize=address", "-o", str(d / "split"), str(d / "main.cpp")], check=True, cwd=d)
  return d

@pytest.mark.parametrize("typ,axis,rows", [(GGMLType.Q4_0, 1, [(3, 5), (3, 2)]), (GGMLType.Q6_K, 0, [(4,), (7,), (1,)]),
                                           (GGMLType.Q5_K, 1, [(2, 3)]), (GGMLType.F16, 0, [(3,)])], ids=str)
def test_split_kernel_places_every_field(split_exe, typ, axis, rows):
  # the CUDA source of the split kernel, compiled for the CPU, with a grid smaller than the work (the grid-stride loop),
  # fed each tensor's blocks as PackedTensor.upload feeds it on CUDA: the stacked parts equal the host's packing of each
  # tensor concatenated along the stacked dim
  fmt = format_for(typ, 64 if typ == GGMLType.F16 else 512)
  nb, rng = (64 if typ == GGMLType.F16 else 512) // fmt.block, np.random.default_rng(0)
  raws = [rng.integers(0, 256, math.prod(r) * nb * fmt.block_bytes, dtype=np.uint8) for r in rows]
  want = [PackedTensor.pack_host(raw, typ, (nb * fmt.block, *reversed(r)))[1] for raw, r in zip(raws, rows)]
  stacked = (*rows[0][:axis], sum(r[axis] for r in rows), *rows[0][axis + 1:])
  for p, at, w in fmt.fields:
    dst = np.full(math.prod(stacked) * nb * w, 0xAB, np.uint8)
    (split_exe / "dst.bin").write_bytes(dst.tobytes())
    for raw, (group, group_dst, first) in zip(raws, placements(rows, axis, nb)):
      (split_exe / "src.bin").write_bytes(raw.tobytes())
      vals = (raw.size // fmt.block_bytes, fmt.block_bytes, at, w, group, group_dst, first)
      subprocess.run([str(split_exe / "split"), "src.bin", "dst.bin", *map(str, vals), "3"], check=True, cwd=split_exe)
    got = np.frombuffer((split_exe / "dst.bin").read_bytes(), np.uint8)
    ref = np.concatenate([h[p] for h in want], axis=axis)
    np.testing.assert_array_equal(got, ref.reshape(-1).view(np.uint8), err_msg=p)

@needs_nvcc
def test_split_kernel_compiles_for_sm90():
  out = run_nvcc_script("import apps\nfrom tinygrad import Device\nfrom apps.readback import _SPLIT_SRC\n"
                        "print(len(Device[Device.DEFAULT].renderer.compiler.compile(_SPLIT_SRC)) > 0)")
  assert out.strip() == "True"

def test_split_kernel_arguments_are_packed_in_order():
  # CUDAProgram packs a launch's values after its pointers by the program's signature: each value at its param
  from tinygrad.runtime.ops_cuda import encode_args
  vals = (240, 18, 2, 16, 80, 112, 32)
  c_args, _ = encode_args((0x1000, 0x2000), vals, R._SPLIT_SIG)
  raw = ctypes.string_at(ctypes.addressof(c_args), ctypes.sizeof(c_args))
  assert raw == np.array([0x1000, 0x2000], np.uint64).tobytes() + np.array(vals, np.uint32).tobytes()

def test_staging_made_on_another_thread_sets_the_context_first(monkeypatch):
  """The slots' events are created with the device's context current: the thread that makes the staging (Opening's worker)
  is not the one that opened the device where the CLI opened it first, and CUDA then answers 201 (invalid context)."""
  import tinygrad.runtime.autogen.cuda as cuda, tinygrad.runtime.ops_cuda as ops_cuda
  calls = []
  monkeypatch.setattr(cuda, "cuCtxSetCurrent", lambda ctx: calls.append(("current", ctx)) or 0, raising=False)
  monkeypatch.setattr(cuda, "cuEventCreate", lambda ev, flags: calls.append(("event", None)) or 0, raising=False)
  monkeypatch.setattr(ops_cuda, "check", lambda r: None)
  monkeypatch.setattr(R, "Device", {"CUDA": SimpleNamespace(context="ctx")})
  R._Staging("CUDA")
  assert calls and calls[0] == ("current", "ctx") and calls.count(("event", None)) == 2, calls

def test_reserve_sizes_both_slots_once():
  st, cu = staging()
  allocs = []
  cu.alloc = (lambda alloc: lambda n, spec: allocs.append(n) or alloc(n, spec))(cu.alloc)
  st.reserve(4096)
  assert sorted(allocs) == [4096, 4096]
  for n in (4096, 100, 4096):   # uploads up to the reserved size take a slot as it is
    st.lend(n); st.give_back()
    st.copy([(DEVICE_BUFFER, np.zeros(n, np.uint8))])
  assert len(allocs) == 2

def test_device_empty_is_tensor_empty_graph():
  """device_empty's view of its buffer is the node UOp.reshape makes of it (hash-consed: the same object), for every rank:
  a loaded model's graphs, and the captures keyed by them, are what Tensor.empty would give."""
  from tinygrad import dtypes
  for shape in ((), (1,), (6,), (1, 1), (2, 3), (2, 3, 4), (3, 1, 5, 2)):
    t = R.device_empty(shape, dtypes.float32)
    assert t.shape == shape and t.uop.is_realized and t.uop.base.reshape(shape) is t.uop

def test_device_full_writes_every_element_without_a_kernel():
  from tinygrad import GlobalCounters, dtypes
  before = GlobalCounters.kernel_count
  for shape, v, dt in (((3, 5), 0, dtypes.float32), ((7,), 1.0, dtypes.float32), ((4, 9), -1, dtypes.int32), ((5,), 7, dtypes.uint32),
                       ((6, 3), 0.5, dtypes.float16), ((3, 2_000_001), 2.0, dtypes.float32)):   # the last in two pieces
    t = R.device_full(shape, v, dt)
    assert t.uop.is_realized and t.shape == shape and t.dtype == dt and (t.numpy() == v).all()
  assert GlobalCounters.kernel_count == before

def test_a_failed_load_leaves_no_worker_waiting(tmp_path, monkeypatch):
  """Engine.load opens the device on a worker while it parses the file (readback.Opening), which on CUDA then waits for
  the staging size: a file that fails to parse must not leave it waiting (the weights' host copies run on the same
  workers). The CPU taken for CUDA here up to that wait (no upload happens)."""
  import threading
  monkeypatch.setattr(R, "staged", lambda device: True)
  from apps.engine import Engine, Source
  from apps.gguf import GGUFError
  (bad := tmp_path / "bad.gguf").write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\xff" * 32)
  with pytest.raises(GGUFError): Engine.load(Source(bad, "bad", "file"), quiet=True)
  barrier = threading.Barrier(R.POOL._max_workers)
  assert all(f.result(timeout=20) is not None for f in [R.POOL.submit(barrier.wait, 20) for _ in range(R.POOL._max_workers)])

def test_copy_host_in_spans():
  """copy_host splits a copy over the pool's workers (MIN_SPAN at least): every byte lands, at span edges and odd sizes."""
  from apps.readback import MIN_SPAN, copy_host
  for n in (0, 1, MIN_SPAN - 1, MIN_SPAN, MIN_SPAN + 7, 7 * MIN_SPAN, 37 * MIN_SPAN + 3):
    src = np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8)
    dst = np.zeros_like(src)
    assert copy_host(dst, src) is dst and np.array_equal(dst, src), n

def test_a_pinned_file_is_copied_from_where_it_lies(monkeypatch, tmp_path):
  """On CUDA the load pins the file's tensor bytes (_Staging.pin, read-only): a tensor's blocks inside them go to the device
  from the mapping itself; anything else still needs a lent slot; the pages are unpinned once the load's copies are done,
  and a driver that refuses the pin leaves the staging as it was."""
  import mmap
  st, cu = staging()
  cu.pins = []
  cu.cuMemHostRegister_v2 = lambda p, n, flags: cu.pins.append(("pin", p.value, n, flags)) or cu.refuse
  cu.cuMemHostUnregister = lambda p: cu.pins.append(("unpin", p.value)) or 0
  st.dev.synchronize = lambda: cu.pins.append(("sync",))
  monkeypatch.setitem(R._stagings, "CUDA", st)
  (f := tmp_path / "w.bin").write_bytes(bytes(range(256)) * 64)
  with open(f, "rb") as fh: mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
  view = np.frombuffer(mm, np.uint8, count=8192, offset=4096)[100:]   # starts inside a page
  cu.refuse = 1
  st.pin(view)
  assert st.pinned is None and not R.in_pinned(view[:64], "CUDA")
  cu.refuse = 0
  st.pin(view)
  lo = view.ctypes.data // mmap.PAGESIZE * mmap.PAGESIZE
  assert cu.pins[-1] == ("pin", lo, view.ctypes.data + view.nbytes - lo, 0x08) and st.pinned == (lo, view.ctypes.data + view.nbytes)
  assert R.in_pinned(view, "CUDA") and R.in_pinned(view[10:50], "CUDA")
  assert not R.in_pinned(view[::2], "CUDA") and not R.in_pinned(np.zeros(64, np.uint8), "CUDA")
  assert not R.in_pinned(view, "CPU")
  split = []
  monkeypatch.setattr(st, "split", lambda raw, bb, fields: split.append(raw.ctypes.data))
  st.lend(64)   # host_arrays lends a slot for the derived parts; the blocks are not copied into it
  R.split_blocks(view[34:34 + 340], 34, [], "CUDA")
  assert split == [view.ctypes.data + 34]
  with pytest.raises(ValueError, match="pinned file"): R.split_blocks(np.zeros(340, np.uint8), 34, [], "CUDA")
  st.trim()
  assert st.pinned is None and ("unpin", lo) in cu.pins and cu.pins.index(("sync",)) < cu.pins.index(("unpin", lo))
  assert not R.in_pinned(view, "CUDA")
  del view
  mm.close()
