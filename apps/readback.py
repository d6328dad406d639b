"""Small host <-> device transfers of persistent state, outside the scheduler: the sampled token read back without
draining the device queue behind it, and host values written into realized buffers (`upload`).

generate() keeps the device one decode step ahead of the host where it can: it queues step n+1 before it waits for
token n, so the host's part of a step (the JIT replay's Python, the graph launch, the caller's detokenizing) overlaps the
device's. That needs token n captured in queue order, between step n and step n+1 (which overwrites the token in
place), and a wait for that capture alone. On CUDA that is an async copy into pinned host memory on the queue plus an
event; a plain read (`Tensor.item()`) copies synchronously and so would wait for step n+1 too. Elsewhere value() reads
the tensor when called (`in_queue_order` is False), and generate() queues the next step only after it.
"""
from __future__ import annotations
import ctypes
import numpy as np
from tinygrad import Device, Tensor, dtypes
from tinygrad.device import BufferSpec
from tinygrad.dtype import _to_np_dtype

def upload(t: Tensor, values) -> None:
  """Write host `values` (t's element count) into the realized buffer of `t`, in the device's queue order, without a
  schedule: a `t.assign(Tensor(values)).realize()` walks every live tensor of the process to update their graphs, which
  with a model's thousands of weight tensors cost 4-7 ms per call on the H100 (the sampler's eight parameters took 30-55 ms
  before every prefill: OPTIMIZATION_JOURNAL.md). The copy is the one tinygrad's own COPY runs (allocator copyin: queued
  behind earlier kernels on CUDA, after a synchronize on CPU and Metal)."""
  if not t.uop.is_realized or t.uop.base is not t.uop: raise ValueError(f"upload: the tensor of shape {t.shape} is not a realized buffer")
  buf = t.uop.buffer
  arr = np.ascontiguousarray(values, dtype=_to_np_dtype(t.dtype)).reshape(-1)
  if arr.nbytes != buf.nbytes: raise ValueError(f"upload: {arr.size} values for a buffer of {buf.size} {t.dtype}")
  buf.allocator._copyin(buf._buf, memoryview(arr).cast("B"))

class Readback:
  """capture(): remember a 1-element int32 device tensor as of this point of the device's queue; value(): the int."""
  def __init__(self, t: Tensor):
    if t.numel() != 1 or t.dtype != dtypes.int32:
      raise ValueError(f"readback of a {t.dtype} tensor of shape {t.shape}: one int32 only")
    self.t, self.dev, self._captured = t, Device[t.device], False
    self.in_queue_order = t.device.split(":")[0] == "CUDA"
    if self.in_queue_order:
      import tinygrad.runtime.autogen.cuda as cuda
      from tinygrad.runtime.ops_cuda import check
      self._cu, self._check = cuda, check
      self._host = self.dev.allocator.alloc(4, BufferSpec(host=True))   # pinned: the async copy's destination
      self._event = cuda.CUevent()
      check(cuda.cuEventCreate(ctypes.byref(self._event), cuda.CU_EVENT_DISABLE_TIMING))

  def capture(self) -> None:
    self._captured = True
    if not self.in_queue_order: return
    cu, check = self._cu, self._check
    check(cu.cuCtxSetCurrent(self.dev.context))
    check(cu.cuMemcpyDtoHAsync_v2(self._host, self.t.uop.buffer.ensure_allocated()._buf, 4, None))
    check(cu.cuEventRecord(self._event, None))

  def value(self) -> int:
    if not self._captured: raise RuntimeError("readback: value() without capture()")
    if not self.in_queue_order: return int(self.t.item())
    self._check(self._cu.cuEventSynchronize(self._event))
    return ctypes.c_int32.from_address(self._host.value).value

  def __del__(self):
    if getattr(self, "in_queue_order", False) and hasattr(self, "_event"):
      self._cu.cuEventDestroy_v2(self._event)
      self.dev.allocator.free(self._host, 4, BufferSpec(host=True))
