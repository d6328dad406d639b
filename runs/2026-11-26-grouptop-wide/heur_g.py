import itertools
from tinygrad.codegen.opt import Opt, OptOps, KernelOptError
from tinygrad.helpers import getenv, DEBUG, prod, NOLOCALS, TC_OPT, TC_SELECT, USE_TC, IMAGE
from tinygrad.uop.ops import Ops, resolve, AxisType
from tinygrad.codegen.late.coalesce import image_valid_dims
from tinygrad.codegen.opt.postrange import Scheduler

def matvec_rows(k:Scheduler) -> int|None:
  """The axis of a matvec's rows, whatever computes the operands from their loads: among the loads the reduction reads, one
  (the matrix) is indexed by every output range any of them uses, and another that is also indexed by a reduce range (the
  vector) lacks some of them, so each of its elements serves many rows. None where the reduction is not such a matvec
  (a matmul's operands each have an output range the other lacks) or its rows are short."""
  # a row shorter than 256 (an MoE mix over a few experts) is cheaper unrolled than shared by a group of threads
  if k.reduceop is None or not all(isinstance(k.full_shape[a], int) for a in k.axes_of(AxisType.REDUCE)) or \
      prod(k.full_shape[a] for a in k.axes_of(AxisType.REDUCE)) < 256: return None
  red, srcs = set(k.ranges_of(AxisType.REDUCE)), k.reduceop.src[0].backward_slice_with_self
  loads = [(rs & red, rs - red) for rs in (set(b.src[1].ranges) for b in k.bufs if b in srcs)]
  outs = set().union(*(o for _, o in loads))
  if not any(r and o == outs for r, o in loads): return None
  rows = [x for r, o in loads if r for x in outs - o if x.arg[-1] is AxisType.GLOBAL]
  return max(k.rngs.index(x) for x in rows) if rows else None

def matvec_opts(k:Scheduler, rows:int) -> Scheduler:
  """Unroll the short reduce ranges (a packed block's elements come from registers), spread the longest over a group of
  threads (coalesced loads, one reduction in shared memory) and give each thread and workgroup a few rows (each vector
  load serves all of them). Raises KernelOptError where an opt does not apply."""
  k, rows_id = k.copy(), k.rngs[rows].arg[0]
  axis = lambda rid: next(i for i,r in enumerate(k.rngs) if r.arg[0] == rid)
  red = sorted(k.axes_of(AxisType.REDUCE), key=lambda a: -k.full_shape[a])
  longest, short = k.rngs[red[0]].arg[0], [k.rngs[a].arg[0] for a in red[1:]]
  for rid in short:
    if k.upcast_size() * k.full_shape[axis(rid)] <= 64: k.apply_opt(Opt(OptOps.UNROLL, k.unrollable_dims.index(axis(rid)), 0))
  # a group of 32/16/8 threads, the longest range padded (masked) to a multiple of it where that adds at most an eighth:
  # 342 blocks of a 10944-long row take 32 threads, not the 2 that divide it
  size = k.full_shape[axis(longest)]
  group = next((g for g in (32, 16, 8) if -size % g <= size // 8), None) or next(g for g in (4, 2) if size % g == 0)
  if size % group: k.apply_opt(Opt(OptOps.PADTO, axis(longest), group))
  k.apply_opt(Opt(OptOps.GROUP, k.axes_of(AxisType.REDUCE).index(axis(longest)), group))
  for op, sizes in ((OptOps.UPCAST, (4, 2)), (OptOps.LOCAL, (4, 2))):
    if (sz := next((s for s in sizes if k.full_shape[axis(rows_id)] % s == 0), None)) is not None: k.apply_opt(Opt(op, axis(rows_id), sz))
  return k

def hand_coded_optimizations(k:Scheduler) -> Scheduler:
  # first try the tensor cores
  """ Attempts to apply a tensor core optimization to the kernel. If one exists and applies properly, return true, otherwise return false.
  Tensor cores are optimized instructions that matrix multiply-accumulate across a wave of threads: D(M, N) = A(M, K) * B(K, N) + C(M, N).

  Keyword arguments:
  use_tensor_cores -- controls how tensor cores are applied (default 1)
    0: will disable any tensor core matching
    1: enable tensor cores
    2: apply tensor core shape but don't use UOp.WMMA
  extra_opts -- additional Opt's to apply after the tensor core instead of the hand-coded additional Opt's (default None)
  tc_select -- specifies which tensor core(s) to use for optimization (default -1)
    -1: iterates through all available tensor cores in order and uses the first one that matches the requirements (dims and dtypes)
    [0-N]: uses only the n'th tensor core available; useful for search
  tc_opt -- controls which kinds of kernels may be eligible for tensor cores application (default 2 during BEAM, 0 otherwise)
    0: applies to only kernels with a single reduce axis and direct Ops.LOAD into Ops.MUL
    1: allows kernels with multiple reduce axes and also multiplication of Ops.CAST'd buffers
    2: allows kernels with M, N, K axes that are not multiples of the tensor core dimensions by applying padding those axes as needed
  """
  # NOTE: unless TC_OPT is > 0, we only trigger tensor cores if there's only one reduce axis
  if USE_TC > 0 and (len(k.axes_of(AxisType.GROUP_REDUCE, AxisType.REDUCE)) == 1 or (TC_OPT.value >= 1)):
    for axis in range(3):
      tk = k.copy()
      # check TC first and apply hand-coded opts if successful
      try: rngs = tk.apply_opt(Opt(OptOps.TC, axis, (TC_SELECT.value, TC_OPT.value, USE_TC.value)))
      except KernelOptError: continue
      for tc_dim in [1,0]: # attempt to upcast M and N
        szs = [sz for sz in [5,4,3,2] if rngs[tc_dim].src[0].divides(sz) is not None]
        if szs:
          # set it to the replaced range
          rngs[tc_dim] = tk.apply_opt(Opt(OptOps.UPCAST, tk.rngs.index(rngs[tc_dim]), szs[0]))[0]
      if (szs := [sz for sz in [4,2] if rngs[0].src[0].divides(sz) is not None]): # attempt to local N
        tk.apply_opt(Opt(OptOps.LOCAL, tk.rngs.index(rngs[0]), szs[0]))
      return tk

  # make a copy so it does not mutate the input
  k = k.copy()

  # upcast float4 images, this must be early so we don't accidentally add locals before the upcast
  if IMAGE:
    for buf_index,buf in enumerate(k.bufs):
      if image_valid_dims(buf.src[0].dtype, buf.src[0].max_numel(), k.ren.target.arch):
        idx = k.bufs[buf_index].src[1]
        # IMAGE upcasts require one validity shared by all four unit-stride lanes so memory_coalescing can combine them into one vector read.
        unit_stride_axes_mul_4 = [k.rngs.index(c) for c in idx.get_idx().split_uop(Ops.ADD) if
          c.op is Ops.RANGE and (c.vmax+1)%4 == 0 and c not in idx.get_valid().backward_slice]
        if len(unit_stride_axes_mul_4):
          if (axis:=unit_stride_axes_mul_4[0]) in k.upcastable_dims:
            k.apply_opt(Opt(OptOps.UPCAST, axis, 4))
          elif axis in k.unrollable_dims:
            k.apply_opt(Opt(OptOps.UNROLL, k.unrollable_dims.index(axis), 4))

  # should use matvec - TODO: adjust/tune based on the wide vs tall/large vs small mat
  MV_BLOCKSIZE, MV_THREADS_PER_ROW, MV_ROWS_PER_THREAD = getenv("MV_BLOCKSIZE", 4), getenv("MV_THREADS_PER_ROW", 8), getenv("MV_ROWS_PER_THREAD", 4)
  if k.ren.has_local and getenv("MV",1) != 0 and (MV_BLOCKSIZE > 1 or MV_THREADS_PER_ROW > 1 or MV_ROWS_PER_THREAD > 1) and  \
    k.reduceop is not None and k.reduceop.arg[0] is Ops.ADD and len(k.full_shape) >= 2 and k.ren.has_shared and \
    (mulop:=k.reduceop.src[0]).op is Ops.MUL and mulop.src[0].op is Ops.INDEX and mulop.src[1].op is Ops.INDEX:
    idx0, idx1 = mulop.src[0].src[1].get_idx(), mulop.src[1].src[1].get_idx()
    if k.ranges_of(AxisType.REDUCE):
      first_reduce_rng = k.ranges_of(AxisType.REDUCE)[0]
      if any(u is first_reduce_rng for u in idx0.split_uop(Ops.ADD)) and all(r in idx1.ranges for r in idx0.ranges):
        for global_idx in k.axes_of(AxisType.GLOBAL):
          if first_reduce_rng.src[0].divides(MV_THREADS_PER_ROW) is not None and k.full_shape[global_idx]%(MV_BLOCKSIZE*MV_ROWS_PER_THREAD) == 0:
            if DEBUG >= 3:
              print(f"MATVEC: {k.full_shape=} {first_reduce_rng.render()} {MV_BLOCKSIZE=} {MV_THREADS_PER_ROW=} {MV_ROWS_PER_THREAD=}")
            try:
              if MV_THREADS_PER_ROW > 1: k.apply_opt(Opt(OptOps.GROUP, 0, MV_THREADS_PER_ROW))
            except KernelOptError: pass
            if MV_BLOCKSIZE > 1: k.apply_opt(Opt(OptOps.LOCAL, global_idx, MV_BLOCKSIZE))
            if MV_ROWS_PER_THREAD > 1: k.apply_opt(Opt(OptOps.UPCAST, global_idx, MV_ROWS_PER_THREAD))
            return k

  # a matvec whose operands are computed from their loads (a weight dequantized from packed blocks, a cast) does not match
  # MUL(INDEX, INDEX) above, and with more than 2048 rows it gets no grouped reduction below: one thread would walk a row
  if k.ren.has_local and k.ren.has_shared and getenv("MV",1) != 0 and k.reduceop is not None and k.reduceop.arg[0] is Ops.ADD and \
      (rows := matvec_rows(k)) is not None:
    try: return matvec_opts(k, rows)
    except (KernelOptError, StopIteration): pass

  # are we grouping? (requires local shape support)
  if resolve(prod(k.output_shape[i] for i in k.upcastable_dims) <= (240 if NOLOCALS else 2048), False):
    for axis, sz in itertools.product((0, 1, 2), (16,)):
      try:
        # a reduction over a symbolic length (a sequence so far) no size divides: pad it, masked, to a multiple of the group
        if axis < len(red:=k.axes_of(AxisType.REDUCE)) and not isinstance(k.full_shape[red[axis]], int):
          (tk:=k.copy()).apply_opt(Opt(OptOps.PADTO, red[axis], sz))
          tk.apply_opt(Opt(OptOps.GROUPTOP, axis, sz))
          k = tk
        else:
          # few outputs over a long constant reduction: a wider group (fewer serial steps a thread), while each thread still
          # sums at least 8 elements and the grid stays within 4096 threads
          if axis < len(red) and (S := k.full_shape[red[axis]]) and (O := prod(k.output_shape[i] for i in k.upcastable_dims)) is not None and \
              (not getenv("GT_INT", 0) or all(isinstance(d, int) for d in k.full_shape)):
            sz = next((g for g in (256, 128, 64, 32) if g <= getenv("GT_MAX", 256) and S % g == 0 and S // g >= 8 and
                       resolve(O * g <= 4096, False)), sz)
          k.apply_opt(Opt(OptOps.GROUPTOP, axis, sz))
        break
      except KernelOptError: pass

  # no more opt if we are grouping
  if k.group_for_reduces: return k

  # **** below this line need to be optional and benchmarked ****

  # if there are small dims with lots of valid masks, upcast them (they might be from Tensor.stack)
  to_upcast: list[int] = []
  where_gate_rngs = {r for u in k.ast.backward_slice if u.op is Ops.WHERE for r in u.src[0].ranges}
  # upcast leading axes first (hack-ish for winograd; we actually want to upcast masked axes with low stride first)
  for axis in k.upcastable_dims:
    # for Schedule, we check if the range is used in INDEX gates or WHERE gates
    is_masked = k.rngs[axis] in where_gate_rngs
    if k.full_shape[axis] <= 7 and is_masked and prod(k.full_shape[j] for j in to_upcast) * k.full_shape[axis] <= 7 * 7:
      # upcasting a masked global axis moves that range out of the launch grid into each work-item
      # under IMAGE, skip the upcast unless enough global work-items remain after it to hide memory latency
      if IMAGE and k.axis_types[axis] is AxisType.GLOBAL:
        global_upcast = prod(k.full_shape[i] for i in to_upcast if k.axis_types[i] is AxisType.GLOBAL) * k.full_shape[axis]
        global_items_after = prod(k.full_shape[i] for i in k.axes_of(AxisType.GLOBAL)) // global_upcast
        if resolve(global_items_after < getenv("OCCUPANCY_FLOOR", 4096), False): continue
      if DEBUG >= 4: print(f"upcasting masked axis : {axis}")
      to_upcast.append(axis)
  for axis in to_upcast[::-1]: k.apply_opt(Opt(OptOps.UPCAST, axis, 0))

  # potentially do more upcasts of non reduce axes based on a heuristic
  is_dsp = k.ren is not None and k.ren.target.device == "DSP"
  upcasted_axis: set[int] = set()
  # fewer outputs than a GPU runs threads, all of constant count, each reduced over a symbolic length (attention of one token
  # over the keys so far): a thread an output and small workgroups, since each thread walks the whole length and the
  # parallelism an upcast trades for reuse is what such a kernel lacks
  red = k.axes_of(AxisType.REDUCE)
  one_per_thread = k.ren.has_local and any(not isinstance(k.full_shape[a], int) for a in red) and \
    all(isinstance(s, int) for a, s in enumerate(k.full_shape) if a not in red) and \
    prod(s for a, s in enumerate(k.full_shape) if a not in red) <= 65536
  # a reduction's output dim of symbolic size (keys so far, in a chunk's attention scores) is a candidate too, padded (masked)
  # to a multiple of 4: an operand that does not index it is then read once for 4 outputs
  padded = lambda axis: not isinstance(k.full_shape[axis], int)
  while not one_per_thread and resolve(prod(k.output_shape[i] for i in k.upcastable_dims) >= 1024) and (k.upcast_size() < 32):
    xb_choices = []
    sym = [a for a in k.axes_of(AxisType.GLOBAL) if padded(a) and k.rngs[a].src[0].vmin > 0] if k.reduceop is not None and not is_dsp else []
    # consider all upcastable axes with 3 or 4 upcast (128 on the DSP)
    for axis, upcast_amount in itertools.product(k.upcastable_dims + sym, ([128] if not len(upcasted_axis) else []) if is_dsp else [3,4]):
      # if we haven't upcasted it, it mods, and buffer has stride 0 on axis while having no stride 0 in the upcasted axis already
      if axis in upcasted_axis or (upcast_amount != 4 if padded(axis) else k.full_shape[axis]%upcast_amount != 0): continue
      rng = k.rngs[axis]
      if any(rng not in b.src[1].get_idx().backward_slice and all(r2 in b.src[1].get_idx().backward_slice
          for r2 in k.ranges_of(AxisType.UPCAST, AxisType.UNROLL)) for b in k.bufs):
        num_strides, sum_strides = 0, 0
        for b in k.bufs:
          idx = b.src[1].get_idx()
          if rng in idx.backward_slice: num_strides += 1
          for c in idx.split_uop(Ops.ADD):
            if c is rng: sum_strides += 1
            if c.op is Ops.MUL and c.src[0] is rng and c.src[1].op is Ops.CONST: sum_strides += c.src[1].val
            if c.op is Ops.MUL and c.src[1] is rng and c.src[0].op is Ops.CONST: sum_strides += c.src[0].val
        xb_choices.append((num_strides, sum_strides, axis, upcast_amount))
    if xb_choices:
      xb_choices = sorted(xb_choices)
      if DEBUG >= 4: print(f"more upcast axis : {xb_choices}")
      axis, amt = xb_choices[0][2:]
      if padded(axis):
        try:
          tk = k.copy()
          if tk.rngs[axis].src[0].divides(amt) is None: tk.apply_opt(Opt(OptOps.PADTO, axis, amt))
          tk.apply_opt(Opt(OptOps.UPCAST, axis, amt))
          k = tk
        except KernelOptError: pass
      else: k.apply_opt(Opt(OptOps.UPCAST, axis, amt))
      upcasted_axis.add(axis)
    else: break

  # if last reduce dim is small(ish), loop unroll the reduce
  # NOTE: this can fail on multireduce with mismatching dimensions, this is okay
  try:
    if k.unrollable_dims and (k.upcast_size() <= 4 or not k.axes_of(AxisType.UNROLL)) and (k.upcast_size() < 64):
      if (s:=k.full_shape[k.unrollable_dims[-1]]) <= 32:
        k.apply_opt(Opt(OptOps.UNROLL, len(k.unrollable_dims)-1, 0))
        # if it's small, upcast a second reduce dimension too
        if k.unrollable_dims and s <= 3 and k.full_shape[k.unrollable_dims[-1]] <= 3:
          k.apply_opt(Opt(OptOps.UNROLL, len(k.unrollable_dims)-1, 0))
      else:
        for splits in [4]:
          if k.full_shape[axis:=k.unrollable_dims[-1]]%splits == 0:
            k.apply_opt(Opt(OptOps.UNROLL, len(k.unrollable_dims)-1, splits))
            break
  except KernelOptError: pass

  # if nothing at all is upcasted and it's easy to, do an upcast (on a dim of symbolic size too where the amount divides it,
  # a token count times a width: else that kernel runs a thread a workgroup and a value a thread)
  for splits in ([] if one_per_thread else [4]):
    if not k.upcasted and k.upcastable_dims and k.full_shape[k.upcastable_dims[-1]] % splits == 0:
      k.apply_opt(Opt(OptOps.UPCAST, k.upcastable_dims[-1], splits))
    elif not k.upcasted and not k.upcastable_dims and \
        (sym:=[i for i in k.axes_of(AxisType.GLOBAL, AxisType.WEAK) if k.rngs[i].src[0].divides(splits) is not None]):
      k.apply_opt(Opt(OptOps.UPCAST, sym[-1], splits))

  # **** local groups ****

  if k.ren.has_local:
    if NOLOCALS:
      k.apply_opt(Opt(OptOps.NOLOCALS))
    else:
      # prioritize making expand axes local
      # a dim of symbolic size takes a workgroup where its size is a known multiple of it
      local_axis_ranking = [(any(k.rngs[axis] not in b.src[1].get_idx().backward_slice for b in k.bufs), axis) \
                              for axis in k.axes_of(AxisType.GLOBAL, AxisType.WEAK) \
                              if k.rngs[axis].src[0].op is Ops.CONST or k.rngs[axis].src[0].divides(2) is not None]
      to_local: list[tuple[int, int]] = []
      for _, axis in sorted(local_axis_ranking, key=lambda x: (-x[0], -x[1])):
        local_size = prod(sz for _, sz in to_local)
        local_sz: int|None = next((x for x in ([32] * (axis == 0) + [16,8,4,3,2])
                                   if k.rngs[axis].src[0].divides(x) is not None and local_size * x <= (32 if one_per_thread else 128)), None)
        if local_sz is not None: to_local.append((axis, local_sz))
      deleted_shape = 0
      for axis, local_sz in sorted(to_local[:3]):
        axis = axis - deleted_shape
        will_delete_shape = local_sz == k.full_shape[axis]
        k.apply_opt(Opt(OptOps.LOCAL, axis, local_sz))
        if will_delete_shape: deleted_shape += 1

  # **** threading ****

  if k.ren.has_threads and k.ren.global_max is not None:
    for threads in [32,16,12,8,6,5,4,3,2]:
      # Skip if too many threads. Heuristic: use about 128K ops per thread
      if threads > k.ren.global_max[0] or resolve(prod(k.full_shape) // (128 << 10) < threads): continue
      for axis in k.axes_of(AxisType.WEAK):
        if k.full_shape[axis] % threads == 0:
          try: k.apply_opt(Opt(OptOps.THREAD, axis, threads))
          except KernelOptError: pass
          break
      if k.applied_opts and k.applied_opts[-1].op is OptOps.THREAD: break

  return k
