"""Continuous batching: many requests share one model, each in its own slot of the latent cache (Transformer(slots=N)).

One thread (run) owns the model. Each turn of its loop it takes waiting requests into free slots and launches one batched
decode step of every running request (Transformer.launch: one launch of each product for all rows) with the next prefill
chunk of the request being started as further rows of it (a mixed step: the chunk's products read the weights with the
step's, and the running streams keep flowing; the shortest chunks, whose rows cost the step least, or QUEUED_CHUNK's while
other prompts wait behind it), then reads the step before it: the device runs a step while the host reads, detokenizes and
sends the previous one's tokens. The step of a prompt's last chunk samples its first token, and the request is a row of the
next step at once. With nothing running a prompt goes alone, in the longest chunks its tokens fill. A request that ends
costs its slot one wasted step.
Requests join and leave at step boundaries; a finished or cancelled request frees its slot at once, which keeps its
tokens' latents: a later request whose prompt starts with them (the next turn of a chat) goes to that slot and prefills
only the rest.
"""
from __future__ import annotations
import bisect, collections, functools, itertools, queue, sys, threading, time, traceback
from dataclasses import dataclass, field
from typing import Callable, Iterator
from apps.chat import reuse
from apps.engine import Engine, Reply, Stats
from apps.model import Prompt
from apps.sampling import Params

@dataclass
class Request:
  """One completion: its prompt ids and limits in, events out: ("text", str) ... then ("done", Stats) or ("error", str)."""
  ids: list[int]
  max_tokens: int
  params: Params = field(default_factory=Params)
  stop: list[str] = field(default_factory=list)
  events: queue.Queue = field(default_factory=queue.Queue)
  cancelled: threading.Event = field(default_factory=threading.Event)
  # the scheduler's
  slot: int = -1
  stats: Stats = field(default_factory=Stats)
  reply: Reply | None = None
  last_token: float = 0.0   # when its latest token was read (perf_counter), for the inter-token histogram

# A prompt that starts beside running requests goes in the shortest chunks: each running stream's next token waits for the
# chunk's rows. While other prompts wait behind it, in chunks of up to this many tokens: the shortest chunks take in fewer
# prompt tokens a step than many clients send (a mix of 1.6 prompt tokens a generated one: 32-token chunks feed 20 streams),
# and a prompt token costs the step less in a longer chunk (H100, Youtu-LLM-2B, 32 clients: 2,208 -> 2,584 tok/s, time to the
# first token p50 534 -> 138 ms, inter-token p50 7.3 -> 10.2 ms; 8 clients as they were; the captures 1.3 GB more).
QUEUED_CHUNK = 128

# Upper bounds (seconds) of the inter-token histogram's buckets: 0.5 ms to 10 s, each 10% above the last. A request's gap is
# the time between the reads of two of its tokens on the model's thread (its steps and the turns between them), before
# detokenizing and streaming (a client's gaps add any text held back: an incomplete UTF-8 character, a possible stop string)
ITL_BOUNDS = tuple(round(5e-4 * 1.1 ** i, 7) for i in range(105))

class Scheduler:
  """The request loop of one engine whose model has slots. submit() from any thread; run() on the thread that owns the model."""

  def __init__(self, engine: Engine, queue_size: int = 8):
    self.engine, self.model = engine, engine.model
    self.queue_size = queue_size
    self.waiting: queue.Queue[Request] = queue.Queue()   # without a slot yet; more than queue_size: submit refuses
    self.running: dict[int, Request] = {}      # slot -> its request, decoding
    self.inflight: tuple[object, list[Request]] | None = None   # a launched step not read yet, and its requests
    self.starting: collections.deque[tuple[Request, Prompt]] = collections.deque()   # given a slot, to prefill in turn (Transformer.begin)
    self.free = list(range(self.model.slots))
    self.pending: collections.deque[Callable[[], None]] = collections.deque()   # warmup's captures left for idle turns
    self.on_warm: Callable[[], None] | None = None   # told when the last of them is made
    self.queued_chunk = max((c for c in self.model.prefill_chunks if c <= QUEUED_CHUNK), default=min(self.model.prefill_chunks))
    self.finished: collections.deque[Stats] = collections.deque(maxlen=256)
    self.recent: collections.deque[tuple[float, int]] = collections.deque()   # (time, tokens) of recent steps: tok/s
    self.itl = [0] * (len(ITL_BOUNDS) + 1)   # tokens by the bucket of their gap to the request's previous one (the last: longer)
    self.itl_sum = 0.0
    self.steps = self.tokens = 0
    self._wake, self._stop, self._lock = threading.Event(), threading.Event(), threading.Lock()

  # ---- any thread
  def submit(self, req: Request) -> None:
    """Queue a request; queue.Full when queue_size requests would be left waiting after every free slot took one."""
    with self._lock:
      if self.waiting.qsize() >= self.queue_size + self.model.slots - len(self.running) - len(self.starting): raise queue.Full
      self.waiting.put_nowait(req)
    self._wake.set()

  def stop(self) -> None:
    self._stop.set()
    self._wake.set()

  def status(self) -> dict:
    """Slots in use, requests waiting for one, warmup's captures still to make, decode tok/s of the last 10 s, steps and
    tokens so far, and the device memory tinygrad holds (weights, caches, captured steps' buffers)."""
    from tinygrad import GlobalCounters
    now = time.perf_counter()
    toks = sum(n for t, n in list(self.recent) if now - t <= 10.0)
    return {"slots": self.model.slots, "slots_busy": len(self.running) + len(self.starting), "waiting": self.waiting.qsize(),
            "warming": len(self.pending),
            "decode_tokens_per_s": round(toks / 10.0, 1), "steps": self.steps, "tokens": self.tokens, "device_memory_bytes": GlobalCounters.mem_used}

  def itl_histogram(self) -> tuple[list[tuple[str, int]], float]:
    """The inter-token histogram as Prometheus has it: (upper bound, tokens whose gap was at most it) per bucket, the last
    "+Inf" with every token counted, and the gaps' seconds summed."""
    cum = list(itertools.accumulate(list(self.itl)))
    return list(zip([*map(str, ITL_BOUNDS), "+Inf"], cum)), self.itl_sum

  # ---- the model's thread
  def run(self) -> None:
    """Serve until stop(): a failure of the model is reported to the requests it touched, and the loop goes on."""
    while not self._stop.is_set():
      try: busy = self.turn()
      except Exception as e:   # a bug, not a client's fault: report it to the requests in flight and keep serving
        traceback.print_exc(file=sys.stderr)
        for req in [*self.running.values(), *(r for r, _ in self.starting)]: self._fail(req, f"{type(e).__name__}: {e}")
        self.inflight = None
        self.model.forget_steps()
        busy = True
      if not busy:
        self._wake.wait(0.2)
        self._wake.clear()
    for req in [*self.running.values(), *(r for r, _ in self.starting)]: self._fail(req, "the server is shutting down")
    while True:
      try: self._fail(self.waiting.get_nowait(), "the server is shutting down", free=False)
      except queue.Empty: break

  def turn(self) -> bool:
    """One turn: cancelled requests leave, waiting ones get the free slots, one decode step with a prefill chunk (of the
    first request given a slot) as further rows, or that chunk alone; with no request at all, one of warmup's captures.
    Whether there was anything to do."""
    for req in [*self.running.values(), *(r for r, _ in self.starting)]:
      if req.cancelled.is_set():
        req.stats.finish_reason = "cancelled"
        self._finish(req)
    if self.inflight is not None and self.free and self.waiting.qsize(): self._collect()   # a slot freed settles first
    with self._lock:   # a request moves from waiting to a slot at once for submit's count
      while self.free and self._admit(): pass
    if self.pending and not (self.running or self.starting or self.inflight):   # idle: the next of warmup's captures
      try: self.pending[0]()   # (counted in status() until made)
      except BaseException:   # (run() forgets the launched steps)
        for s in range(self.model.slots): self.model.reset(s)   # every slot was free: what the capture left in them is not known
        raise
      finally:
        self.pending.popleft()
        if not self.pending and self.on_warm is not None: self.on_warm()
      return True
    req, prompt = self.starting[0] if self.starting else (None, None)
    if self.running:
      step = self.model.launch(list(self.running), prompt, self.queued_chunk if len(self.starting) > 1 else None)
      launched = (step, list(self.running.values()) + ([req] if step.first is not None else []))
      if step.first is not None:   # its first token comes with this step; it is a row of the next
        self.starting.popleft()
        self.running[req.slot] = req
      if self.inflight is not None: self._collect()
      self.inflight = launched
      return True
    did = self.inflight is not None
    if did: self._collect()
    if prompt is None: return did
    first = self.model.fill_chunk(prompt)   # alone: the longest chunk its tokens fill
    if first is not None:
      self.starting.popleft()
      self.running[req.slot] = req
      self._take(req, first, time.perf_counter())
    return True

  def _collect(self) -> None:
    """Read the launched step's tokens and hand them to their requests (one that ended since gets none)."""
    (step, reqs), self.inflight = self.inflight, None
    toks = self.model.collect(step)
    now = time.perf_counter()
    self.steps, self.tokens = self.steps + 1, self.tokens + len(toks)
    self.recent.append((now, len(toks)))
    while self.recent and now - self.recent[0][0] > 10.0: self.recent.popleft()
    for req, t in zip(reqs, toks):
      if req.slot >= 0 and self.running.get(req.slot) is req: self._take(req, t, now)

  def _admit(self) -> bool:
    """Give the next waiting request a free slot; False when none waits."""
    while True:
      try: req = self.waiting.get_nowait()
      except queue.Empty: return False
      if not req.cancelled.is_set(): break
    # the free slot that holds the longest prefix of this prompt (the earlier turns of its chat), else the least recent
    slot = max(self.free, key=lambda s: reuse(self.model.slot_cached[s], req.ids)[0])
    self.free.remove(slot)
    req.slot, req.stats = slot, Stats(prompt_tokens=len(req.ids), reused=reuse(self.model.slot_cached[slot], req.ids)[0])
    req.reply = Reply(self.engine.tok, req.stats, req.stop)   # its clock starts now: prefill_s is the time in a slot
    self.starting.append((req, self.model.begin(slot, req.ids, req.params)))   # its chunks in its turn
    return True

  def _take(self, req: Request, t: int, now: float) -> None:
    """A new token of a running request, read at `now`: its gap to the request's previous one counted, its text out, or
    the end of the request."""
    if req.last_token:
      gap = now - req.last_token
      self.itl[bisect.bisect_left(ITL_BOUNDS, gap)] += 1
      self.itl_sum += gap
    req.last_token = now
    text, done = req.reply.add(t)
    if text: req.events.put(("text", text))
    if done: return self._finish(req)
    if req.stats.completion_tokens >= req.max_tokens or len(self.model.slot_cached[req.slot]) >= self.model.max_context:
      if text := req.reply.end(): req.events.put(("text", text))
      self._finish(req)

  def _finish(self, req: Request) -> None:
    self._release(req)
    self.finished.append(req.stats)
    req.events.put(("done", req.stats))

  def _fail(self, req: Request, message: str, free: bool = True) -> None:
    if free: self._release(req)
    req.events.put(("error", message))

  def _release(self, req: Request) -> None:
    """Free the request's slot (its cached tokens stay, for a later prompt that starts with them)."""
    if self.running.get(req.slot) is req: del self.running[req.slot]
    for i, (r, _) in enumerate(self.starting):
      if r is req:
        del self.starting[i]
        self.model.reset(req.slot)   # a prefill cut short: what its slot holds is not known
        break
    if req.slot >= 0 and req.slot not in self.free and req.slot not in self.running: self.free.append(req.slot)
    req.slot = -1

  def warmup(self, structures: list[Params], now: int | None = None) -> None:
    """Capture (or load) the prefill steps of a short and of a long prompt (one chunk of each length), every batch size's
    step, and every batch size's mixed steps (a prompt's chunk that is not its last, and its last), for these samplers'
    structures: the first structure's that serve up to `now` requests at once here (default: all of them), the rest
    later, one at a time in run() while no request is in a slot or waiting (status()'s "warming"), by the requests they
    serve. A first server of many slots then answers within the time of one request's steps; a step not captured yet when
    requests need it captures itself then. The later ones reach `pending` only after those made here: the model's thread
    (running beside this one in a server) takes them from there, and two captures at once are two users of one model."""
    later = []
    for B, i, task in sorted(self._warm_tasks(structures), key=lambda t: t[:2]):
      if now is None or (B <= now and i == 0): task()
      else: later.append(task)
    self.pending.extend(later)

  def _warm_tasks(self, structures: list[Params]) -> Iterator[tuple[int, int, Callable[[], None]]]:
    """(requests it serves, its structure's index, capture) of every step warmup() makes; each capture leaves every slot
    reset."""
    short = self.engine.text_ids("Hello")
    # for each chunk length c a prompt of c tokens (c its last chunk) and one of c + 1 (a chunk of c, then the shortest as
    # its last): a prompt of any length then runs captured steps, where a missing one would capture while its request
    # waits (seconds on a full-size model)
    L, S = max(self.model.prefill_chunks), min(self.model.prefill_chunks)
    lengths = sorted({n for c in self.model.prefill_chunks for n in (c, c + 1)} - {S})
    prompts = [(short * (L + 1))[:n] for n in lengths if n + 1 < self.model.max_context and n > len(short)]
    def clear(n: int) -> None:   # (a free slot keeps its last request's tokens, which a prompt here would partly reuse)
      for s in range(n): self.model.reset(s)
    def prefill(params: Params) -> None:
      for ids in prompts:
        clear(1)
        for _ in self.model.start(0, ids, params): pass
      clear(1)
    def steps(B: int, params: Params) -> None:
      clear(B)
      for s in range(B):
        for _ in self.model.start(s, short, params): pass
      for _ in range(3): self.model.step(list(range(B)))
      clear(B)
    def mixed(n: int, k: int, bound: int, params: Params) -> None:
      clear(n + 1)
      for s in range(n):
        for _ in self.model.start(s, short, params): pass
      prompt = self.model.begin(n, (short * (k + 1))[:k], params)
      while prompt.done < len(prompt.ids): self.model.collect(self.model.launch(list(range(n)), prompt, bound))
      clear(n + 1)
    for i, params in enumerate(structures):
      yield 0, i, functools.partial(prefill, params)
      for B in self.model.step_sizes:
        yield B, i, functools.partial(steps, B, params)
        # the mixed steps of B rows: the most running requests that take this size (one slot left for the prompt)
        n = min(B, self.model.slots - 1)
        if n and next(b for b in self.model.step_sizes if b >= n) == B:
          # a chunk of the shortest length, then one token (its last); one of the queued prompts' length, then its last
          # (a shortest one), and that length as its last
          Q = self.queued_chunk
          for k, bound in [(S + 1, S)] + ([(Q + 1, Q), (Q, Q)] if Q != S and Q + 1 < self.model.max_context else []):
            yield n + 1, i, functools.partial(mixed, n, k, bound, params)
