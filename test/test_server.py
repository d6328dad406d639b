"""apps/server.py over real HTTP on 127.0.0.1: OpenAI-style chat and text completions (whole and streamed), several
clients at once in batched steps, a client that leaves mid-stream, a full queue, malformed requests, a storm of mixed
and abandoned requests; then `python -m apps.llm --serve` end to end.

One server (one model load, SLOTS requests at once) serves the module. Expected replies come from Engine.complete of the
same model alone on a fresh context (Transformer.generate, not the batched step), computed before the server starts:
greedy and seeded replies must be the same tokens whether a request runs alone or batched with others.
"""
import gc, http.client, json, signal, socket, subprocess, sys, threading, time
from pathlib import Path
import pytest
from apps.engine import Engine, resolve_model
from apps.sampling import Params
from apps.server import LLMServer, MAX_BODY, MAX_STOPS

ROOT = Path(__file__).resolve().parent.parent
PRESET, CTX, SLOTS = "glm-4.7-flash-tiny", 256, 4
MSG_A = [{"role": "user", "content": "Hello"}]
MSG_B = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "What is MLA?"}]
SAMPLED = Params(temperature=0.9, seed=7)

def fresh(eng: Engine, messages, n: int, params: Params | None = None) -> str:
  eng.model.reset()
  out = "".join(eng.complete(eng.chat_ids(messages), n, params or Params()))
  eng.model.reset()
  return out

@pytest.fixture(scope="module")
def srv():
  eng = Engine.load(resolve_model(PRESET, None, None), CTX, quiet=True, slots=SLOTS)
  eng.warmup(Params())
  eng.refs = {"A": fresh(eng, MSG_A, 12), "B": fresh(eng, MSG_B, 12), "A_sampled": fresh(eng, MSG_A, 12, SAMPLED)}
  s = LLMServer(("127.0.0.1", 0), eng, Params(), queue_size=4, max_tokens=16, log=True)
  t = threading.Thread(target=s.serve_forever, daemon=True)
  t.start()
  yield s
  s.close()
  t.join(10)

def request(port: int, method: str, path: str, body=None, raw: bytes | None = None, timeout: float = 120):
  c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
  try:
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    c.request(method, path, body=data, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
  finally: c.close()

def chat(srv, body, **kw):
  status, headers, payload = request(srv.server_address[1], "POST", "/v1/chat/completions", body, **kw)
  return status, headers, payload

def sse(payload: bytes) -> list:
  events = []
  for block in payload.decode().split("\n\n"):
    if not block: continue
    assert block.startswith("data: "), block
    events.append(block[6:] if block[6:] == "[DONE]" else json.loads(block[6:]))
  return events

def streamed_text(events: list) -> str:
  return "".join(e["choices"][0]["delta"].get("content", "") for e in events if isinstance(e, dict) and e.get("choices"))

def assert_error(status, payload, want_status: int, code: str | None = None, fragment: str = "") -> dict:
  assert status == want_status, payload
  err = json.loads(payload)["error"]
  assert isinstance(err["message"], str) and err["message"] and isinstance(err["type"], str)
  if code is not None: assert err["code"] == code, err
  assert fragment in err["message"], err
  return err

# ---------------------------------------------------------------- answers

def test_models_and_health(srv):
  status, headers, payload = request(srv.server_address[1], "GET", "/v1/models")
  assert status == 200 and headers["content-type"] == "application/json"
  body = json.loads(payload)
  assert body["object"] == "list" and [m["id"] for m in body["data"]] == [PRESET]
  status, _, payload = request(srv.server_address[1], "GET", "/health")
  health = json.loads(payload)
  assert status == 200 and health["status"] == "ok" and health["slots"] == SLOTS and health["slots_busy"] == 0 and health["waiting"] == 0
  assert health["warming"] == 0
  status, headers, payload = request(srv.server_address[1], "GET", "/metrics")
  metrics = dict(line.split() for line in payload.decode().splitlines() if not line.startswith("#"))
  assert status == 200 and headers["content-type"].startswith("text/plain") and metrics["llm_slots"] == str(SLOTS)
  assert {"llm_slots_busy", "llm_waiting", "llm_warming", "llm_decode_tokens_per_second", "llm_steps_total", "llm_tokens_total"} <= set(metrics)

def test_metrics_count_each_tokens_gap_to_the_last(srv):
  """/metrics' inter-token histogram: a reply of n tokens adds its n - 1 gaps (n with an end-of-generation token drawn
  after them), in buckets of cumulative counts that end at +Inf with the count, and their seconds to the sum."""
  def hist():
    rows = [line.split() for line in request(srv.server_address[1], "GET", "/metrics")[2].decode().splitlines() if not line.startswith("#")]
    buckets = [(k.split('"')[1], int(v)) for k, v in rows if k.startswith("llm_inter_token_seconds_bucket")]
    m = dict(rows)
    return buckets, int(m["llm_inter_token_seconds_count"]), float(m["llm_inter_token_seconds_sum"])
  b0, n0, s0 = hist()
  status, _, payload = request(srv.server_address[1], "POST", "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 9, "temperature": 0})
  tokens = json.loads(payload)["usage"]["completion_tokens"]
  b1, n1, s1 = hist()
  assert status == 200 and tokens >= 2 and n1 - n0 in (tokens - 1, tokens) and s1 > s0
  counts = [v for _, v in b1]
  assert b1[-1] == ("+Inf", n1) and counts == sorted(counts) and [k for k, _ in b0] == [k for k, _ in b1]
  assert all(float(k) < float(k2) for (k, _), (k2, _) in zip(b1[:-2], b1[1:-1]))

def test_text_completion(srv):
  """/v1/completions: the prompt text as it is (no chat template), whole and streamed."""
  prompt = "Once upon a time"
  srv.engine.model.reset()
  want = "".join(srv.engine.complete(srv.engine.text_ids(prompt), 8, Params()))
  status, _, payload = request(srv.server_address[1], "POST", "/v1/completions", {"prompt": prompt, "max_tokens": 8, "temperature": 0})
  body = json.loads(payload)
  assert status == 200 and body["object"] == "text_completion" and body["id"].startswith("cmpl-") and body["choices"][0]["text"] == want
  status, _, payload = request(srv.server_address[1], "POST", "/v1/completions", {"prompt": [prompt], "max_tokens": 8, "stream": True})
  events = sse(payload)
  assert status == 200 and events[-1] == "[DONE]" and "".join(e["choices"][0]["text"] for e in events[:-1]) == want
  for body, fragment in (({"max_tokens": 2}, "'prompt' is required"), ({"prompt": 3}, "must be a string"), ({"prompt": ""}, "must not be empty")):
    assert_error(*request(srv.server_address[1], "POST", "/v1/completions", body)[::2], 400, fragment=fragment)

def test_completion_is_the_greedy_reply(srv):
  status, headers, payload = chat(srv, {"model": PRESET, "messages": MSG_A, "max_tokens": 12, "temperature": 0})
  assert status == 200 and headers["content-type"] == "application/json"
  body = json.loads(payload)
  assert body["object"] == "chat.completion" and body["model"] == PRESET and body["id"].startswith("chatcmpl-")
  choice = body["choices"][0]
  assert choice["message"] == {"role": "assistant", "content": srv.engine.refs["A"]}
  n_prompt = len(srv.engine.chat_ids(MSG_A))
  assert choice["finish_reason"] in ("length", "stop")
  usage = body["usage"]
  assert usage["prompt_tokens"] == n_prompt and usage["total_tokens"] == n_prompt + usage["completion_tokens"]
  assert usage["completion_tokens"] == 12 or choice["finish_reason"] == "stop"

def test_stream_is_the_same_reply(srv):
  body = {"messages": MSG_B, "max_tokens": 12, "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}
  status, headers, payload = chat(srv, body)
  assert status == 200 and headers["content-type"] == "text/event-stream"
  events = sse(payload)
  assert events[-1] == "[DONE]"
  assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
  assert all(e["object"] == "chat.completion.chunk" for e in events[:-1])
  assert streamed_text(events) == srv.engine.refs["B"]
  finish = [e["choices"][0]["finish_reason"] for e in events[:-1] if e["choices"]]
  assert finish[-1] in ("length", "stop") and all(f is None for f in finish[:-1])
  usage = events[-2]["usage"]
  assert events[-2]["choices"] == [] and usage["prompt_tokens"] == len(srv.engine.chat_ids(MSG_B))

def test_seeded_sampling_and_stop_strings(srv):
  body = {"messages": MSG_A, "max_tokens": 12, "temperature": 0.9, "seed": 7}
  replies = [json.loads(chat(srv, body)[2])["choices"][0]["message"]["content"] for _ in range(2)]
  assert replies[0] == replies[1] == srv.engine.refs["A_sampled"]
  ref = srv.engine.refs["A"]
  stop = ref[len(ref) // 2:len(ref) // 2 + 3]
  assert stop and ref.find(stop) > 0
  body = json.loads(chat(srv, {"messages": MSG_A, "max_tokens": 12, "temperature": 0, "stop": [stop, "\x00never"]})[2])
  assert body["choices"][0] == {"index": 0, "message": {"role": "assistant", "content": ref[:ref.find(stop)]}, "finish_reason": "stop"}

def test_newer_message_forms(srv):
  """Content as a list of text parts, and the "developer" role, mean what the plain forms mean."""
  parts = [{"role": "user", "content": [{"type": "text", "text": "Hel"}, {"type": "text", "text": "lo"}]}]
  developer = [{"role": "developer", "content": MSG_B[0]["content"]}, MSG_B[1]]
  for messages, ref in ((parts, "A"), (developer, "B")):
    status, _, payload = chat(srv, {"messages": messages, "max_tokens": 12, "temperature": 0})
    assert status == 200 and json.loads(payload)["choices"][0]["message"]["content"] == srv.engine.refs[ref]
  image = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]
  assert_error(*chat(srv, {"messages": image})[::2], 400, "invalid_messages", "only text is supported")

def test_concurrent_clients_each_get_their_answer(srv):
  """More clients than slots, greedy and seeded sampling mixed: they run in batched steps (and wait for slots), and each
  gets the reply it gets alone."""
  steps = srv.scheduler.steps
  jobs = [(MSG_A, False, 0), (MSG_B, True, 0), (MSG_B, False, 0), (MSG_A, True, 0.9), (MSG_A, False, 0), (MSG_B, True, 0)]
  results: list = [None] * len(jobs)
  def client(i, messages, stream, temperature):
    body = {"messages": messages, "max_tokens": 12, "temperature": temperature, "seed": 7, "stream": stream}
    status, _, payload = chat(srv, body)
    results[i] = (status, streamed_text(sse(payload)) if stream else json.loads(payload)["choices"][0]["message"]["content"])
  threads = [threading.Thread(target=client, args=(i, *job)) for i, job in enumerate(jobs)]
  for t in threads: t.start()
  for t in threads: t.join(300)
  refs = srv.engine.refs
  assert results == [(200, refs["A_sampled"] if t else refs["A"] if m is MSG_A else refs["B"]) for m, _, t in jobs]
  assert srv.scheduler.steps - steps < 12 * len(jobs) - 6   # fewer steps than one request at a time: batched

def test_a_prompt_beside_running_streams_goes_in_short_chunks(srv, monkeypatch):
  """A prompt that starts while other requests decode goes in the shortest chunks, as rows of their steps (mixed steps),
  a prompt alone in the longest its tokens fill, alone."""
  model, sched, before = srv.engine.model, srv.scheduler, len(srv.finished)
  seen, chunks, launch, mixed = [], model._chunks, model.launch, []
  def recorded(n, start, longest=None):
    for c in chunks(n, start, longest):
      if n > 100: seen.append((c[2], len(sched.running)))   # the long prompts' chunks
      yield c
  def launched(slots, prompt=None, chunk=None):
    if prompt is not None and len(prompt.ids) > 100: mixed.append(len(slots))
    return launch(slots, prompt, chunk)
  monkeypatch.setattr(model, "_chunks", recorded)
  monkeypatch.setattr(model, "launch", launched)
  def long_prompt(words: str) -> dict:   # ~170 tokens: past the second longest chunk; unlike the other's from its first word
    return {"messages": [{"role": "user", "content": " ".join([words] * 40)}], "max_tokens": 4, "temperature": 0}
  assert chat(srv, long_prompt("tell me about attention"))[0] == 200
  assert seen and seen[0][0] > min(model.prefill_chunks) and all(r == 0 for _, r in seen), seen
  seen.clear()
  stream = open_stream(srv, {"messages": MSG_A, "max_tokens": 200, "temperature": 0})
  read_chunks(stream, 3)   # it decodes
  assert chat(srv, long_prompt("explain the latent cache"))[0] == 200
  stream.close()
  wait_for(lambda: len(srv.finished) >= before + 3)   # the stream's request ends (cancelled) before the next test counts
  assert len(seen) > 2 and all(L == min(model.prefill_chunks) and r > 0 for L, r in seen), seen
  assert len(mixed) == len(seen) and all(mixed), mixed   # each of its chunks a step's rows beside the stream's

def test_prompts_queued_beside_running_streams_go_in_longer_chunks(srv, monkeypatch):
  """While another prompt waits behind it, a prompt beside running streams goes in chunks of up to batching.QUEUED_CHUNK
  tokens (as rows of their steps); the last one left goes in the shortest again. Each reply is the one it gets alone."""
  from apps.batching import Request
  model, sched = srv.engine.model, srv.scheduler
  launch, mixed = model.launch, []
  def launched(slots, prompt=None, chunk=None):   # a long prompt's chunk beside the stream: (its slot, tokens, prompts starting)
    done, starting = prompt.done if prompt else 0, len(sched.starting)
    step = launch(slots, prompt, chunk)
    if prompt is not None and len(prompt.ids) > 100: mixed.append((prompt.slot, prompt.done - done, starting))
    return step
  monkeypatch.setattr(model, "launch", launched)
  ids = [srv.engine.text_ids(" ".join([w] * 50)) for w in ("tell me about attention", "explain the latent cache")]
  assert all(len(i) > sched.queued_chunk + min(model.prefill_chunks) for i in ids) and sched.queued_chunk > min(model.prefill_chunks)
  def run(reqs: list[Request]) -> list[list[str]]:
    with sched._lock:   # admitted in one turn: both given a slot before either's first chunk
      for r in reqs: sched.waiting.put_nowait(r)
    sched._wake.set()
    out = []
    for r in reqs:
      texts = []
      while (ev := r.events.get(timeout=300))[0] == "text": texts.append(ev[1])
      assert ev[0] == "done", ev
      out.append(texts)
    return out
  alone = [run([Request(list(i), 6)])[0] for i in ids]
  for slot in sched.free: model.reset(slot)   # (idle) nothing of the prompts cached: each prefills whole again
  stream = open_stream(srv, {"messages": MSG_A, "max_tokens": 200, "temperature": 0})
  read_chunks(stream, 3)   # it decodes
  mixed.clear()
  reqs = [Request(list(i), 6) for i in ids]
  assert run(reqs) == alone
  stream.close()
  wait_for(lambda: not sched.running and not sched.starting)   # the stream's request ends (cancelled) before the next test
  by_slot = {}
  for slot, m, starting in mixed: by_slot.setdefault(slot, []).append((m, starting))
  assert len(by_slot) == 2 and sum(m for _, m, _ in mixed) == sum(map(len, ids)), mixed   # every prompt token beside the stream
  a, b = sorted(by_slot.values(), key=lambda c: -c[0][1])   # the first prompt started with the other waiting behind it
  S = min(model.prefill_chunks)
  assert a[0] == (sched.queued_chunk, 2) and all(m <= S for m, n in a + b if n == 1), mixed

# ---------------------------------------------------------------- leaving clients, a full queue

def open_stream(srv, body) -> socket.socket:
  s = socket.create_connection(srv.server_address[:2], timeout=120)
  data = json.dumps({**body, "stream": True}).encode()
  s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(data), data))
  return s

def read_chunks(s: socket.socket, n: int) -> bytes:
  buf = b""
  while buf.count(b"data: ") < n:
    got = s.recv(65536)
    assert got, buf
    buf += got
  return buf

def wait_for(cond, timeout=120.0):
  deadline = time.monotonic() + timeout
  while not cond():
    assert time.monotonic() < deadline, "timed out"
    time.sleep(0.05)

def test_disconnect_mid_stream_then_full_queue(srv):
  before = len(srv.finished)
  longs = [open_stream(srv, {"messages": MSG_A, "max_tokens": 200, "temperature": 0}) for _ in range(SLOTS)]
  for s in longs: read_chunks(s, 3)  # every slot is generating
  # four more wait in the queue (its size), the next one is refused at once
  waiting = [open_stream(srv, {"messages": MSG_B, "max_tokens": 2, "temperature": 0}) for _ in range(4)]
  wait_for(lambda: json.loads(request(srv.server_address[1], "GET", "/health")[2])["waiting"] == 4)
  status, headers, payload = chat(srv, {"messages": MSG_A, "max_tokens": 2})
  assert_error(status, payload, 503, "server_busy")
  assert headers["retry-after"] == "1"
  for s in longs: s.close()  # the clients leave: their generations stop, their slots free, the queue drains
  outs = []
  for s in waiting:
    with s:
      buf = b""
      while got := s.recv(65536): buf += got
    outs.append(buf)
  for buf in outs: assert buf.startswith(b"HTTP/1.0 200") and buf.endswith(b"data: [DONE]\n\n")
  wait_for(lambda: len(srv.finished) >= before + SLOTS + 4)
  # each long one stopped soon after its client left; in any order with the waiting ones (a client's leaving is seen by its
  # own handler thread, so a freed slot's waiting request can end before another long one is seen to be gone)
  done = list(srv.finished)[before:]
  cancelled = [c for c in done if c.finish_reason == "cancelled"]
  assert len(cancelled) == SLOTS and all(c.completion_tokens < 100 for c in cancelled), [(c.finish_reason, c.completion_tokens) for c in done]
  assert sum(c.finish_reason == "length" and c.completion_tokens == 2 for c in done) == 4, done
  status, _, payload = chat(srv, {"messages": MSG_A, "max_tokens": 12, "temperature": 0})
  assert status == 200 and json.loads(payload)["choices"][0]["message"]["content"] == srv.engine.refs["A"]

def test_disconnect_while_waiting_for_a_whole_reply(srv):
  before = len(srv.finished)
  s = socket.create_connection(srv.server_address[:2], timeout=60)
  data = json.dumps({"messages": MSG_B, "max_tokens": 200, "temperature": 0}).encode()
  s.sendall(b"POST /v1/chat/completions HTTP/1.0\r\nContent-Length: %d\r\n\r\n%s" % (len(data), data))
  wait_for(lambda: any(r.stats.completion_tokens > 2 for r in list(srv.scheduler.running.values())))  # it is generating
  s.close()
  wait_for(lambda: len(srv.finished) > before)
  assert srv.finished[before].finish_reason == "cancelled" and srv.finished[before].completion_tokens < 100

def test_warmup_of_batched_steps_waits_for_an_idle_server(srv):
  """warmup(now=1), as `llm.py --serve` starts: the default sampling's prefill and one-row steps at once; greedy's, then
  the steps of 2 and 4 rows left (/health's "warming") for the model's thread, which makes them one at a time while no
  request is in a slot or waiting. A request that comes while one is being made goes before the rest and gets its exact
  reply; then they are all made."""
  sched, port, gate, started = srv.scheduler, srv.server_address[1], threading.Event(), threading.Event()
  def blocker():   # a capture under way when the request comes
    started.set()
    assert gate.wait(60)
  sched.pending.append(blocker)
  wait_for(started.is_set)
  sched.warmup([SAMPLED, Params()], now=1)   # (the model's thread is inside blocker, which leaves the model alone)
  before, ran = len(srv.finished), []
  def wrap(task):
    def run():
      ran.append(len(srv.finished))
      task()
    return run
  tasks = list(sched.pending)[1:]   # (the first: blocker, under way)
  assert len(tasks) >= 8   # greedy's prefill and steps, the steps of 2 and 4 rows, each with its mixed steps
  assert [(t.func.__name__, t.args) for t in tasks[:2]] == [("prefill", (Params(),)), ("steps", (1, Params()))]
  assert all(t.func.__name__ == "mixed" or t.args[0] > 1 for t in tasks[2:]) and any(t.args[-1] == SAMPLED for t in tasks[2:])
  while len(sched.pending) > 1: sched.pending.pop()
  sched.pending.extend(wrap(t) for t in tasks)
  assert json.loads(request(port, "GET", "/health")[2])["warming"] == 1 + len(tasks)
  reply = []
  client = threading.Thread(target=lambda: reply.append(chat(srv, {"messages": MSG_A, "max_tokens": 12, "temperature": 0})))
  client.start()
  wait_for(lambda: sched.waiting.qsize() == 1)
  gate.set()
  client.join(120)
  status, _, payload = reply[0]
  assert status == 200 and json.loads(payload)["choices"][0]["message"]["content"] == srv.engine.refs["A"]
  wait_for(lambda: json.loads(request(port, "GET", "/health")[2])["warming"] == 0)
  assert len(ran) == len(tasks) and min(ran) > before   # each made after the request's reply
  jits = srv.engine.model.captures.jits
  assert all(any(k[:2] == ("rows", B) and j.captured is not None for k, j in jits.items()) for B in (2, 4))
  assert sorted(sched.free) == list(range(SLOTS)) and not any(srv.engine.model.slot_cached)   # each capture resets its slots

def test_warmup_leaves_its_later_captures_until_its_own_are_made(srv, monkeypatch):
  """A server's model thread runs beside `llm.py --serve`'s warmup(now=1) and takes what is pending while idle: warmup puts
  its later captures there only once the ones it makes itself are made, so no two captures run at once (tinygrad: "TinyJit
  inside another TinyJit", seen on a first server)."""
  sched, seen, ran = srv.scheduler, [], threading.Event()
  tasks = [(0, 0, lambda: seen.append(len(sched.pending))), (0, 1, ran.set), (1, 0, lambda: seen.append(len(sched.pending)))]
  monkeypatch.setattr(sched, "_warm_tasks", lambda structures: iter(tasks))
  sched.warmup([SAMPLED, Params()], now=1)
  assert seen == [0, 0] and ran.wait(30)   # the later one (structure 1) made by the model's thread afterwards
  wait_for(lambda: not sched.pending)

def test_warmup_captures_a_prefill_chunk_of_every_length(srv):
  """warmup() makes the prefill steps of every chunk length, as a chunk followed by others and as a prompt's last chunk, so
  no prompt's length leaves a capture for its request to wait on (the 128s were missed: a first server's first prompt of
  128-511 tokens waited 5.1 s on the H100)."""
  model = srv.engine.model
  srv.scheduler.warmup([Params()])   # (the server is idle)
  jits = model.captures.jits
  lengths = [c for c in model.prefill_chunks if c + 1 < model.max_context]
  assert 128 in lengths, model.prefill_chunks
  for c in lengths:
    assert jits.get(("fill", c)) is not None and jits[("fill", c)].captured is not None, c
    assert any(k[0] == "step" and k[-1] == c and j.captured is not None for k, j in jits.items()), c

def test_a_failed_capture_leaves_the_server_serving(srv):
  """One of warmup's captures that raises (a bug, or the device out of memory) is reported on stderr and dropped; the
  slots are reset and the next request gets its exact reply."""
  def broken():
    for _ in srv.engine.model.start(1, [3, 4, 5]): pass   # a slot half made when it fails
    raise RuntimeError("capture failed")
  srv.scheduler.pending.append(broken)
  wait_for(lambda: not srv.scheduler.pending)
  assert not srv.engine.model.slot_cached[1]
  status, _, payload = chat(srv, {"messages": MSG_A, "max_tokens": 12, "temperature": 0})
  assert status == 200 and json.loads(payload)["choices"][0]["message"]["content"] == srv.engine.refs["A"]

def test_storm_of_mixed_and_abandoned_requests(srv):
  """Many clients at once, each at random: a whole reply, a stream read to its end, a stream abandoned after a chunk, a
  request abandoned before its reply, a malformed body. The server keeps serving, every slot comes back, the device
  memory returns to its idle level, and a last request gets its exact answer. (CI's small version of the H100 load test:
  python -m tools.load --faults.)"""
  import random
  from tinygrad import GlobalCounters
  rng, port = random.Random(5), srv.server_address[1]
  srv.scheduler.warmup([Params(), Params(temperature=0.8)])   # every batch size's step of the storm's samplers exists (the server is idle)
  gc.collect()   # other tests' garbage (this worker may have run them) would be freed during the storm and read as less memory
  mem0 = GlobalCounters.mem_used
  def client(i: int) -> None:
    kind = rng.choice(["whole", "stream", "abandon_stream", "abandon", "malformed"])
    body = {"messages": MSG_A if i % 2 else MSG_B, "max_tokens": rng.randint(1, 20), "temperature": rng.choice([0, 0.8]), "seed": i}
    try:
      if kind == "whole": assert chat(srv, body)[0] in (200, 503)
      elif kind == "malformed": assert chat(srv, None, raw=b'{"messages": [')[0] == 400
      else:
        s = open_stream(srv, body) if kind != "abandon" else socket.create_connection(srv.server_address[:2], timeout=60)
        if kind == "abandon":
          data = json.dumps(body).encode()
          s.sendall(b"POST /v1/chat/completions HTTP/1.0\r\nContent-Length: %d\r\n\r\n%s" % (len(data), data))
        elif kind == "stream":
          while s.recv(65536): pass
        else: s.recv(1)
        s.close()
    except OSError: pass
  threads = [threading.Thread(target=client, args=(i,)) for i in range(48)]
  for t in threads: t.start()
  for t in threads: t.join(300)
  wait_for(lambda: not srv.scheduler.running and not srv.scheduler.starting and srv.scheduler.waiting.empty())
  assert sorted(srv.scheduler.free) == list(range(SLOTS))
  health = json.loads(request(port, "GET", "/health")[2])
  assert health["slots_busy"] == 0 and health["waiting"] == 0
  gc.collect()
  assert GlobalCounters.mem_used == mem0
  status, _, payload = chat(srv, {"messages": MSG_A, "max_tokens": 12, "temperature": 0})
  assert status == 200 and json.loads(payload)["choices"][0]["message"]["content"] == srv.engine.refs["A"]

# ---------------------------------------------------------------- malformed requests

OK = {"messages": MSG_A, "max_tokens": 2}

@pytest.mark.parametrize("raw,code,fragment", [
  (b"{bad", "invalid_json", "not valid JSON"), (b"", "invalid_json", "not valid JSON"), (b"[1, 2]", "invalid_type", "JSON object"),
  (b"\xff\xfe\x00garbage", "invalid_json", "not valid JSON"), (b"[" * 100000, "invalid_json", "not valid JSON"),
  (b'{"messages": [{"role": "user", "content": "x"}], "temperature": NaN}', "invalid_json", "NaN"),
])
def test_malformed_json(srv, raw, code, fragment):
  status, _, payload = chat(srv, None, raw=raw)
  assert_error(status, payload, 400, code, fragment)

@pytest.mark.parametrize("body,code,fragment", [
  ({}, "missing_field", "'messages' is required"), ({"messages": "hi"}, "invalid_messages", "list"),
  ({"messages": []}, "invalid_messages", "empty"), ({"messages": [{"role": "wizard", "content": "x"}]}, "invalid_messages", "unknown role"),
  ({"messages": [{"role": "user"}]}, "invalid_messages", "no 'content'"), ({"messages": [{"role": "user", "content": 5}]}, "invalid_messages", "int"),
  ({**OK, "max_tokens": "5"}, "invalid_type", "'max_tokens' must be an integer"), ({**OK, "max_tokens": 0}, "invalid_value", "at least 1"),
  ({**OK, "max_tokens": 2.5}, "invalid_type", "integer"), ({**OK, "temperature": -1}, "invalid_value", "temperature must be >= 0"),
  ({**OK, "temperature": True}, "invalid_type", "number"), ({**OK, "top_p": 2}, "invalid_value", "top_p"),
  ({**OK, "top_k": -3}, "invalid_value", "top_k"), ({**OK, "stop": 5}, "invalid_type", "'stop'"), ({**OK, "stop": [""]}, "invalid_value", "empty"),
  ({**OK, "stop": ["x"] * (MAX_STOPS + 1)}, "invalid_value", "at most"), ({**OK, "n": 2}, "unsupported_value", "n=1"),
  ({**OK, "stream": "yes"}, "invalid_type", "boolean"), ({**OK, "model": 3}, "invalid_type", "'model'"),
  ({**OK, "stream_options": []}, "invalid_type", "stream_options"), ({**OK, "presence_penalty": 0.5}, "unsupported_value", "repeat_penalty"),
  ({"messages": [{"role": "user", "content": "word " * 400}]}, "context_length_exceeded", f"the context holds {CTX}"),
])
def test_wrong_fields(srv, body, code, fragment):
  status, _, payload = chat(srv, body)
  err = assert_error(status, payload, 400, code, fragment)
  assert err["type"] == "invalid_request_error"

def test_paths_methods_and_http_errors(srv):
  port = srv.server_address[1]
  for method, path, want in (("POST", "/v1/nothing", 404), ("GET", "/", 404), ("GET", "/v1/chat/completions", 405), ("POST", "/v1/models", 405),
                             ("DELETE", "/v1/models", 405), ("PUT", "/v1/chat/completions", 405)):
    status, headers, payload = request(port, method, path, {} if method in ("POST", "PUT") else None)
    assert_error(status, payload, want)
    if want == 405: assert "allow" in headers
  def raw(data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
      s.sendall(data)
      buf = b""
      while got := s.recv(65536): buf += got
    return buf
  def status_body(buf: bytes) -> tuple[int, bytes]:
    head, _, body = buf.partition(b"\r\n\r\n")
    return int(head.split()[1]), body
  cases = ((b"GARBAGE\r\n\r\n", 400), (b"POST /v1/chat/completions HTTP/1.0\r\n\r\n", 411),
           (b"POST /v1/chat/completions HTTP/1.0\r\nContent-Length: %d\r\n\r\n" % (MAX_BODY + 1), 413),
           (b"POST /v1/chat/completions HTTP/1.0\r\nContent-Length: -5\r\n\r\n", 400),
           (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 411))
  for data, want in cases:
    status, body = status_body(raw(data))
    assert_error(status, body, want)
  # a client that sends less than its Content-Length and leaves: nothing breaks
  with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
    s.sendall(b"POST /v1/chat/completions HTTP/1.0\r\nContent-Length: 100\r\n\r\n{")
  status, _, payload = chat(srv, {**OK, "max_tokens": 12, "temperature": 0})
  assert status == 200 and json.loads(payload)["choices"][0]["message"]["content"] == srv.engine.refs["A"]

# ---------------------------------------------------------------- the CLI's --serve, end to end

@pytest.mark.slow
def test_cli_serve_subprocess(srv, tmp_path):
  errfile = open(tmp_path / "stderr.txt", "w+")
  proc = subprocess.Popen([sys.executable, "-m", "apps.llm", "--model", PRESET, "--max-context", str(CTX), "--temperature", "0", "--serve", "0"],
                          cwd=ROOT, stdout=subprocess.PIPE, stderr=errfile, text=True)
  try:
    line = [None]
    threading.Thread(target=lambda: line.__setitem__(0, proc.stdout.readline()), daemon=True).start()
    wait_for(lambda: line[0] is not None or proc.poll() is not None, timeout=300)
    assert line[0] and "serving glm-4.7-flash-tiny on http://127.0.0.1:" in line[0], (tmp_path / "stderr.txt").read_text()
    port = int(line[0].split("http://127.0.0.1:")[1].split("/")[0])
    status, _, payload = request(port, "GET", "/v1/models")
    assert status == 200 and json.loads(payload)["data"][0]["id"] == PRESET
    status, _, payload = request(port, "POST", "/v1/chat/completions", {"messages": MSG_A, "max_tokens": 12})
    assert status == 200 and json.loads(payload)["choices"][0]["message"]["content"] == srv.engine.refs["A"]  # --temperature 0: greedy
    status, _, payload = request(port, "POST", "/v1/chat/completions", None, raw=b"{oops")
    assert_error(status, payload, 400, "invalid_json")
    wait_for(lambda: json.loads(request(port, "GET", "/health")[2])["warming"] == 0, timeout=300)   # the batched steps, made while idle
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 0
  finally:
    if proc.poll() is None: proc.kill()
  err = (tmp_path / "stderr.txt").read_text()
  assert "server stopped" in err and "Traceback" not in err and "warm: the steps of up to 4 requests are captured" in err
