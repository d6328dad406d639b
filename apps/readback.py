"""Host <-> device transfers outside the scheduler: the sampled token read back without draining the device queue behind
it (Readback), host values written into realized buffers (`upload`), and the weights' way in (`to_device`,
`to_device_stacked`; on CUDA through pinned staging slots, which `host_arrays` lends to a packer, and `split_blocks`,
which sends a tensor's quant blocks whole and splits them into their packed parts on the device).

generate() keeps the device one decode step ahead of the host where it can: it queues step n+1 before it waits for
token n, so the host's part of a step (the JIT replay's Python, the graph launch, the caller's detokenizing) overlaps the
device's. That needs token n captured in queue order, between step n and step n+1 (which overwrites the token in
place), and a wait for that capture alone. On CUDA that is an async copy into pinned host memory on the queue plus an
event; a plain read (`Tensor.item()`) copies synchronously and so would wait for step n+1 too. Elsewhere value() reads
the tensor when called (`in_queue_order` is False), and generate() queues the next step only after it.
"""
from __future__ import annotations
import contextlib, ctypes, math, mmap, os
from concurrent.futures import Future, ThreadPoolExecutor, wait as wait_futures
import numpy as np
from tinygrad import Device, Tensor, dtypes
from tinygrad.device import BufferSpec
from tinygrad.uop.ops import Ops, UOp, shape_to_shape_arg
from tinygrad.dtype import _to_np_dtype, _from_np_dtype

def _whole_buffer(t: Tensor, who: str):
  """The realized buffer that t is all of (t itself, or a reshape of it)."""
  u = t.uop
  while u.op is Ops.RESHAPE: u = u.src[0]
  if u.op is not Ops.BUFFER or not t.uop.is_realized or u.buffer.size != t.numel():
    raise ValueError(f"{who}: the tensor of shape {t.shape} is not a realized buffer")
  return u.buffer

def upload(t: Tensor, values) -> None:
  """Write host `values` (t's element count) into the realized buffer of `t`, in the device's queue order, without a
  schedule: a `t.assign(Tensor(values)).realize()` walks every live tensor of the process to update their graphs, which
  with a model's thousands of weight tensors cost 4-7 ms per call on the H100 (the sampler's eight parameters took 30-55 ms
  before every prefill: OPTIMIZATION_JOURNAL.md). See upload_many."""
  upload_many([(t, values)])

def upload_many(pairs) -> None:
  """upload() of several (tensor, values) pairs, all checked before any is copied. On CUDA the values go through pinned
  host buffers kept per device (_Staging; each tensor an async copy, queued behind earlier kernels): tinygrad's own
  copyin pins a new buffer per copy and frees it only at the next device synchronize, which generate() does not call (it
  waits on events), so generations would leave their pinned buffers behind until something synchronized. Elsewhere it is
  tinygrad's copyin (after a synchronize on CPU and Metal)."""
  items = []
  for t, values in pairs:
    buf = _whole_buffer(t, "upload")
    arr = np.ascontiguousarray(values, dtype=_to_np_dtype(t.dtype)).reshape(-1)
    if arr.nbytes != buf.nbytes: raise ValueError(f"upload: {arr.size} values for a buffer of {buf.size} {t.dtype}")
    items.append((buf, arr))
  _copy_in(items)

def upload_rows(pairs, i: int) -> None:
  """Write host values into row i of realized buffers ((tensor, values) pairs: element i of a 1D one, row i of a 2D one),
  the other rows left as the device holds them (state that the device's steps move on). On CUDA queued copies of the rows
  alone; elsewhere each buffer is read after a synchronize, changed and written back."""
  items = []
  for t, values in pairs:
    buf, arr = _whole_buffer(t, "upload_rows"), np.ascontiguousarray(values, dtype=_to_np_dtype(t.dtype)).reshape(-1)
    n = math.prod(t.shape[1:])
    if arr.size != n or not 0 <= i < t.shape[0]: raise ValueError(f"upload_rows: {arr.size} values for row {i} of a {t.shape} buffer")
    items.append((buf.ensure_allocated(), arr, 1, buf.nbytes, i * arr.nbytes))
  if not items: return
  dev = items[0][0].device
  if dev.split(":")[0] == "CUDA" and all(it[0].device == dev for it in items): return _staging(dev).copy(items)
  for buf, arr, _, _, at in items:
    Device[buf.device].synchronize()
    whole = bytearray(buf.as_memoryview())
    whole[at:at + arr.nbytes] = arr.tobytes()
    buf.allocator._copyin(buf._buf, memoryview(whole))

def _copy_in(items: list[tuple]) -> None:
  """(buffer, flat host array) pairs: on CUDA through the staging buffers, elsewhere tinygrad's copyin (which takes a
  writable buffer, which a read-only file mapping is not)."""
  if not items: return
  devices = {buf.device for buf, _ in items}
  if len(devices) == 1 and (dev := next(iter(devices))).split(":")[0] == "CUDA": return _staging(dev).copy(items)
  for buf, arr in items: buf.allocator._copyin(buf._buf, memoryview(arr if arr.flags.writeable else arr.copy()).cast("B"))

WORKERS = min(16, os.cpu_count() or 1)
POOL = ThreadPoolExecutor(max_workers=WORKERS)  # host copies of weights, in spans (numpy and ctypes release the GIL)
MIN_SPAN = 1 << 20   # a copy goes in a span a worker, none shorter (a task costs tens of us of the GIL)

def to_device(a: np.ndarray, device: str | None = None) -> Tensor:
  """A host array as a realized device tensor of its shape and dtype: its buffer allocated and the bytes copied in (on
  CUDA through the pinned staging buffers, queued: the host goes on while they copy), no schedule. A model's weights
  are a few hundred to a few thousand such tensors, and a realize of each costs milliseconds of scheduling."""
  t = device_empty(a.shape, _from_np_dtype(a.dtype), device)
  _copy_in([(t.uop.buffer, np.ascontiguousarray(a).reshape(-1))])
  return t

def device_empty(shape: tuple[int, ...], dtype, device: str | None = None) -> Tensor:
  """A realized device tensor of shape and dtype, its bytes not written yet (no schedule): Tensor.empty's buffer and
  reshape without its symbolic-shape handling (a model's load makes ~1,400). The RESHAPE node is built as UOp.reshape
  builds it for a shape of ints, without its simplify of the shape: the same node (hash-consed), 20 against 57 us here."""
  buf, shape = UOp.new_buffer(Device.canonicalize(device), math.prod(shape), dtype), tuple(shape)
  t = Tensor(buf if shape == buf.shape else UOp(Ops.RESHAPE, src=(buf, shape_to_shape_arg(shape))))
  buf.buffer.ensure_allocated()
  return t

def device_full(shape: tuple[int, ...], value, dtype, device: str | None = None) -> Tensor:
  """A realized device tensor of shape and dtype, every element `value`, without a schedule (a model's state at load: a
  realize of Tensor.full is the process's only schedule before its first step, and on a second process that replays its
  captured steps, scheduling for the first time costs ~0.2 s). On CUDA a memset queued on the stream (a latent cache
  can be gigabytes); elsewhere the values copied in from the host, 16 MiB at a time (no host copy of the whole)."""
  t = device_empty(shape, dtype, device)
  buf, arr = t.uop.buffer, np.full(1, value, dtype=_to_np_dtype(dtype))
  if staged(buf.device) and arr.itemsize in (1, 2, 4):
    import tinygrad.runtime.autogen.cuda as cuda
    from tinygrad.runtime.ops_cuda import check
    memset = {1: cuda.cuMemsetD8Async, 2: cuda.cuMemsetD16Async, 4: cuda.cuMemsetD32Async}[arr.itemsize]
    check(cuda.cuCtxSetCurrent(Device[buf.device].context))
    check(memset(buf._buf, int(arr.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[arr.itemsize])[0]), buf.size, None))
  else:
    step = max(1, (16 << 20) // arr.itemsize)
    piece = np.full(min(step, buf.size), value, dtype=arr.dtype)
    for at in range(0, buf.size, step):
      n = min(step, buf.size - at)
      _copy_in([(buf if n == buf.size else buf.view(n, dtype, at * arr.itemsize).ensure_allocated(), piece[:n])])
  return t

def to_device_stacked(arrs: list[np.ndarray], axis: int, device: str | None = None) -> Tensor:
  """Host arrays of one dtype stacked along `axis` as one realized device tensor (to_device of np.concatenate). On CUDA each
  array is copied into its place (a 2D copy whose rows are the dims before axis): no stacked copy on the host."""
  shape = (*arrs[0].shape[:axis], sum(a.shape[axis] for a in arrs), *arrs[0].shape[axis + 1:])
  if len(arrs) == 1 or not staged(device):
    return to_device(arrs[0] if len(arrs) == 1 else np.concatenate(arrs, axis=axis), device)
  t = device_empty(shape, _from_np_dtype(arrs[0].dtype), device)
  buf = t.uop.buffer
  rows, at = math.prod(shape[:axis]), 0
  for a in arrs:
    a = np.ascontiguousarray(a).reshape(-1)
    _staging(buf.device).copy([(buf, a, rows, buf.nbytes // rows, at)])
    at += a.nbytes // rows
  return t

class _Staging:
  """A device's pinned host buffers for upload_many and the weights, two used in turn (a prefill's parameters and its
  prompt are two uploads in a row: the second does not wait for the first; a tensor's packing overlaps the copy of the one
  before), each reused once the copies queued from it are done. A slot is either filled by copy() (a memmove, in spans on
  several threads) or lent out by `host_arrays`, whose arrays are made in place and copied from where they lie."""
  def __init__(self, device: str):
    import tinygrad.runtime.autogen.cuda as cuda
    from tinygrad.runtime.ops_cuda import check
    self.cu, self.check, self.dev = cuda, check, Device[device]
    self.slots = []   # [pinned host pointer or None, its size, its event, whether copies from it were queued]
    check(cuda.cuCtxSetCurrent(self.dev.context))   # made on any thread: the CLI opens the device before Opening's worker runs
    for _ in range(2):
      ev = cuda.CUevent()
      check(cuda.cuEventCreate(ctypes.byref(ev), cuda.CU_EVENT_DISABLE_TIMING))
      self.slots.append([None, 0, ev, False])
    self.turn, self.lent = 0, None
    self.pinned = None   # (first, end) address of a file mapping pinned for the device to read (pin)
    self.scratch, self.splitter = [None, 0], None   # device scratch for split(): [buffer or None, its size]; the kernel

  def reserve(self, nbytes: int) -> None:
    """Both slots at least nbytes long now (a model's load needs them as long as its largest upload)."""
    self.check(self.cu.cuCtxSetCurrent(self.dev.context))
    for _ in range(2): self._take(nbytes)

  def pin(self, view: np.ndarray) -> None:
    """The pages of `view` (a read-only file mapping) pinned for the device's copies to read where they lie
    (cuMemHostRegister, read-only): split_blocks then copies a tensor's blocks from the file itself, without the memmove
    into a slot. Where the driver refuses, nothing changes."""
    lo = view.ctypes.data // mmap.PAGESIZE * mmap.PAGESIZE
    hi = view.ctypes.data + view.nbytes
    self.check(self.cu.cuCtxSetCurrent(self.dev.context))
    if self.cu.cuMemHostRegister_v2(ctypes.c_void_p(lo), hi - lo, 0x08) == 0: self.pinned = (lo, hi)   # CU_MEMHOSTREGISTER_READ_ONLY

  def unpin(self) -> None:
    """The file's pages unpinned once the copies from them are done."""
    if self.pinned is None: return
    self.dev.synchronize()
    self.check(self.cu.cuCtxSetCurrent(self.dev.context))
    self.check(self.cu.cuMemHostUnregister(ctypes.c_void_p(self.pinned[0])))
    self.pinned = None

  def _take(self, nbytes: int) -> list:
    """The next slot, its earlier copies done, at least nbytes long."""
    if self.lent is not None and self.slots[self.turn] is self.lent[0]: self.turn = 1 - self.turn   # the other one, while lent
    slot = self.slots[self.turn]
    self.turn = 1 - self.turn
    if slot[3]: self.check(self.cu.cuEventSynchronize(slot[2]))
    slot[3] = False
    if nbytes > slot[1]:
      if slot[0] is not None: self.dev.allocator.free(slot[0], slot[1], BufferSpec(host=True))
      slot[1] = max(nbytes, 4096)
      slot[0] = self.dev.allocator.alloc(slot[1], BufferSpec(host=True))
    return slot

  def lend(self, nbytes: int):
    """An allocator of host arrays in a slot of nbytes (np.empty's signature), or None when one is already lent."""
    if self.lent is not None: return None
    self.check(self.cu.cuCtxSetCurrent(self.dev.context))
    slot, used = self._take(nbytes), 0
    self.lent = (slot, slot[0].value, slot[0].value + nbytes)
    def empty(shape, dtype) -> np.ndarray:
      nonlocal used
      n = math.prod(shape) * np.dtype(dtype).itemsize
      if used + n > nbytes: return np.empty(shape, dtype)   # more than was asked for: copied as any other array
      a = np.frombuffer((ctypes.c_uint8 * n).from_address(slot[0].value + used), dtype=dtype).reshape(shape)
      used += -(-n // 64) * 64
      return a
    return empty

  def give_back(self) -> None: self.lent = None

  def split(self, raw: np.ndarray, block_bytes: int, fields: list[tuple]) -> None:
    """raw: whole blocks in the lent slot. They go to the device once, into a scratch buffer; then each field (buffer, byte
    of the block it starts at, its width, group, group_dst, first) is gathered into its buffer there, one kernel each: block
    i's field goes to block (i // group) * group_dst + first + i % group of the buffer (a tensor stacked with others)."""
    cu, check = self.cu, self.check
    check(cu.cuCtxSetCurrent(self.dev.context))
    if raw.nbytes > self.scratch[1]:   # the kernels that read the old one are queued before anything that reuses it
      if self.scratch[0] is not None: self.dev.allocator.free(self.scratch[0], self.scratch[1], BufferSpec())
      self.scratch = [self.dev.allocator.alloc(raw.nbytes, BufferSpec()), raw.nbytes]
    check(cu.cuMemcpyHtoDAsync_v2(self.scratch[0], ctypes.c_void_p(raw.ctypes.data), raw.nbytes, None))
    if self.splitter is None: self.splitter = _splitter(self.dev)
    n = raw.nbytes // block_bytes
    for buf, at, width, group, group_dst, first in fields:
      self.splitter(buf.ensure_allocated()._buf, self.scratch[0], global_size=(min(-(-n * width // 256), 4096), 1, 1),
                    local_size=(256, 1, 1), vals=(n, block_bytes, at, width, group, group_dst, first))
    check(cu.cuEventRecord(self.lent[0][2], None))
    self.lent[0][3] = True

  def trim(self) -> None:
    """Free the scratch buffer and the slots (a model's load grows them to its largest tensor) and unpin the file once their
    copies are done."""
    self.unpin()
    self.dev.synchronize()
    if self.scratch[0] is not None: self.dev.allocator.free(self.scratch[0], self.scratch[1], BufferSpec())
    for slot in self.slots:
      if slot[0] is not None: self.dev.allocator.free(slot[0], slot[1], BufferSpec(host=True))
      slot[0], slot[1], slot[3] = None, 0, False
    self.scratch = [None, 0]

  def copy(self, items: list) -> None:
    cu, check = self.cu, self.check
    check(cu.cuCtxSetCurrent(self.dev.context))
    if self.lent is not None and all(self.lent[1] <= it[1].ctypes.data and it[1].ctypes.data + it[1].nbytes <= self.lent[2] for it in items):
      slot, srcs = self.lent[0], [it[1].ctypes.data for it in items]   # made in the lent slot: copied from where they lie
    else:
      slot = self._take(sum(it[1].nbytes for it in items))
      offs = np.cumsum([0] + [it[1].nbytes for it in items]).tolist()
      srcs = [slot[0].value + off for off in offs[:-1]]
      _memmove([(src, it[1].ctypes.data, it[1].nbytes) for it, src in zip(items, srcs)])
    for it, src in zip(items, srcs):
      dst, src = it[0].ensure_allocated()._buf, ctypes.c_void_p(src)
      if len(it) == 2: check(cu.cuMemcpyHtoDAsync_v2(dst, src, it[1].nbytes, None))
      else:  # (buf, arr, rows, the buffer's row pitch, the byte in a row where arr's rows go)
        _, arr, rows, pitch, at = it
        p = cu.CUDA_MEMCPY2D(srcMemoryType=cu.CU_MEMORYTYPE_HOST, srcHost=src, srcPitch=arr.nbytes // rows, dstMemoryType=cu.CU_MEMORYTYPE_DEVICE,
                             dstDevice=cu.CUdeviceptr_v2(dst.value + at), dstPitch=pitch, WidthInBytes=arr.nbytes // rows, Height=rows)
        check(cu.cuMemcpy2DAsync_v2(ctypes.byref(p), None))
    check(cu.cuEventRecord(slot[2], None))
    slot[3] = True

# Byte j of the fields of n blocks: a thread a byte (bytes of a packed field lie at any offset in a block; the loads of
# neighbouring threads fall in one block and its neighbours, so they coalesce). 64-bit indices: a tensor may pass 4 GB.
_SPLIT_SRC = r"""extern "C" __global__ void __launch_bounds__(256) split_fields(unsigned char* __restrict__ dst,
    const unsigned char* __restrict__ src, unsigned int n, unsigned int block_bytes, unsigned int at, unsigned int width,
    unsigned int group, unsigned int group_dst, unsigned int first) {
  unsigned long long total = (unsigned long long)n * width;
  for (unsigned long long j = (unsigned long long)blockIdx.x * 256 + threadIdx.x; j < total; j += (unsigned long long)gridDim.x * 256) {
    unsigned long long i = j / width, k = j - i * width;
    dst[((i / group) * group_dst + first + i % group) * width + k] = src[i * block_bytes + at + k];
  }
}
"""

# its params as a TinyELF signature (the pointers as device addresses): CUDAProgram packs the values after them by it
_SPLIT_SIG = (("dst", 0, dtypes.uint64, ()), ("src", 1, dtypes.uint64, ())) + \
  tuple((n, i, dtypes.uint32, ()) for i, n in enumerate(("n", "block_bytes", "at", "width", "group", "group_dst", "first"), 2))

def _splitter(dev):
  """The split kernel as a CUDA program of this device (compiled once; tinygrad's disk cache keeps the binary)."""
  from tinygrad.device import TinyELF
  return dev.runtime(TinyELF(dev.renderer.compiler.compile_cached(_SPLIT_SRC), "split_fields", dev.renderer.target, _SPLIT_SIG))

_stagings: dict[str, _Staging] = {}
def _staging(device: str) -> _Staging:
  if device not in _stagings: _stagings[device] = _Staging(device)
  return _stagings[device]

class Opening:
  """A device opened, and on CUDA its staging slots sized for a model's largest upload, on a worker thread while the caller
  parses the model file: the CUDA context (~0.3 s on the H200's host) and the pinned slots (~0.4 s for two of 150 MB,
  cProfile) overlap the vocabulary's parse and the tokenizer. `reserve(nbytes)` once the size is known, `wait()` before the first
  tensor (tinygrad's devices are not opened from two threads at once), `close()` in any case (a caller that failed)."""
  def __init__(self, device: str | None):
    self.device, self.size = Device.canonicalize(device), Future()
    self.done = POOL.submit(self._open)
  def _open(self) -> None:
    Device[self.device]
    nbytes, view = self.size.result()
    if staged(self.device) and view is not None: _staging(self.device).pin(view)
    # pinned: the slots hold only the derived parts, grown as they are asked for
    if staged(self.device) and nbytes and _staging(self.device).pinned is None: _staging(self.device).reserve(nbytes)
  def reserve(self, nbytes: int, view: np.ndarray | None = None) -> None:
    """The largest upload's host bytes, and the file's tensor bytes to pin (on CUDA: _Staging.pin)."""
    if not self.size.done(): self.size.set_result((nbytes, view))
  def wait(self) -> None:
    self.reserve(0)
    self.done.result()
  def close(self) -> None:
    self.reserve(0)
    wait_futures([self.done])
    if self.device in _stagings: _stagings[self.device].unpin()   # a load that failed before trim

def staged(device: str | None) -> bool:
  """Whether uploads to `device` go through the pinned staging slots, which host_arrays lends, and packed blocks are split
  into their fields there (`split_blocks`): on CUDA."""
  return Device.canonicalize(device).split(":")[0] == "CUDA"

def split_blocks(raw: np.ndarray, block_bytes: int, fields: list[tuple], device: str | None = None) -> None:
  """Blocks of a file (host bytes, anywhere) to the device whole, each field then gathered into its buffer there
  (_Staging.split). Inside `host_arrays`: the host copy is one memmove into the lent slot, in spans on several threads."""
  st = _staging(Device.canonicalize(device))
  if st.lent is None or not (st.lent[1] <= raw.ctypes.data < st.lent[2] or in_pinned(raw, device)):
    raise ValueError("split_blocks: the blocks must be made by host_arrays' allocator (copy_host) or lie in the pinned file")
  st.split(raw, block_bytes, fields)

def in_pinned(a: np.ndarray, device: str | None = None) -> bool:
  """Whether `a` is contiguous and lies in the file mapping pinned for `device` (_Staging.pin): the device copies it from
  where it is."""
  st = _stagings.get(Device.canonicalize(device))
  return st is not None and st.pinned is not None and a.flags.c_contiguous and st.pinned[0] <= a.ctypes.data and \
    a.ctypes.data + a.nbytes <= st.pinned[1]

def _memmove(copies: list[tuple[int, int, int]]) -> None:
  """(dst address, src address, bytes) copies, each in a span a worker (MIN_SPAN at least; ctypes releases the GIL): one core
  of a server copies a few GB/s, and most weight tensors are a few MB."""
  spans = [(d + lo, s + lo, min(step, n - lo)) for d, s, n in copies
           for step in [max(MIN_SPAN, -(-n // WORKERS))] for lo in range(0, n, step)]
  list(POOL.map(lambda c: ctypes.memmove(*c), spans))

def copy_host(dst: np.ndarray, src: np.ndarray) -> np.ndarray:
  """dst[:] = src for contiguous arrays of one size (_memmove)."""
  assert dst.nbytes == src.nbytes and dst.flags.c_contiguous and src.flags.c_contiguous
  _memmove([(dst.ctypes.data, src.ctypes.data, src.nbytes)])
  return dst

def trim(device: str | None = None) -> None:
  """After loading: give back the staging memory the load grew (the next upload allocates what it needs)."""
  if (dev := Device.canonicalize(device)) in _stagings: _stagings[dev].trim()

@contextlib.contextmanager
def host_arrays(nbytes: int, device: str | None = None):
  """An allocator (np.empty's signature) of host arrays that to_device sends on to `device` without copying them again:
  on CUDA they are made in a pinned staging buffer of nbytes, and its DMA overlaps the next tensor's packing; elsewhere
  (or past nbytes) np.empty. Copy them with to_device / to_device_stacked inside the block."""
  dev = Device.canonicalize(device)
  empty = _staging(dev).lend(nbytes) if staged(dev) else None
  try: yield empty or np.empty
  finally:
    if empty is not None: _staging(dev).give_back()

class Readback:
  """capture(): remember a realized int32 device buffer as of this point of the device's queue; value() / values(): its
  int(s). On CUDA an async copy into pinned memory queued there (later work may overwrite the buffer); elsewhere the
  buffer is read at capture()."""
  def __init__(self, t: Tensor):
    if t.dtype != dtypes.int32 or not t.uop.is_realized:
      raise ValueError(f"readback of a {t.dtype} tensor of shape {t.shape}: a realized int32 buffer only")
    self.t, self.dev, self._captured, self.n = t, Device[t.device], False, t.numel()
    self.in_queue_order = t.device.split(":")[0] == "CUDA"
    if self.in_queue_order:
      import tinygrad.runtime.autogen.cuda as cuda
      from tinygrad.runtime.ops_cuda import check
      self._cu, self._check = cuda, check
      self._host = self.dev.allocator.alloc(4 * self.n, BufferSpec(host=True))   # pinned: the async copy's destination
      self._event = cuda.CUevent()
      check(cuda.cuEventCreate(ctypes.byref(self._event), cuda.CU_EVENT_DISABLE_TIMING))

  def capture(self) -> None:
    self._captured = True
    if not self.in_queue_order:   # read now: the device is synchronized, later work may overwrite the buffer
      self.dev.synchronize()
      self._values = _whole_buffer(self.t, "readback").numpy().tolist()
      return
    cu, check = self._cu, self._check
    check(cu.cuCtxSetCurrent(self.dev.context))
    check(cu.cuMemcpyDtoHAsync_v2(self._host, self.t.uop.buffer.ensure_allocated()._buf, 4 * self.n, None))
    check(cu.cuEventRecord(self._event, None))

  def value(self) -> int: return self.values()[0]

  def values(self) -> list[int]:
    if not self._captured: raise RuntimeError("readback: values() without capture()")
    if not self.in_queue_order: return self._values
    self._check(self._cu.cuEventSynchronize(self._event))
    return list((ctypes.c_int32 * self.n).from_address(self._host.value))

  def __del__(self):
    if getattr(self, "in_queue_order", False) and hasattr(self, "_event"):
      self._cu.cuEventDestroy_v2(self._event)
      self.dev.allocator.free(self._host, 4 * self.n, BufferSpec(host=True))
