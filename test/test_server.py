"""apps/server.py over real HTTP on 127.0.0.1: OpenAI-style chat completions (whole and streamed), several clients at once,
a client that leaves mid-stream, a full queue, and malformed requests; then `python -m apps.llm --serve` end to end.

One server (one model load) serves the module. Expected replies come from Engine.complete on a fresh context, computed
before the server starts, and from the sampling parameters' own defaults.
"""
import http.client, json, signal, socket, subprocess, sys, threading, time
from pathlib import Path
import pytest
from apps.engine import Engine, resolve_model
from apps.sampling import Params
from apps.server import LLMServer, MAX_BODY, MAX_STOPS

ROOT = Path(__file__).resolve().parent.parent
PRESET, CTX = "glm-4.7-flash-tiny", 256
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
  eng = Engine.load(resolve_model(PRESET, None, None), CTX, quiet=True)
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
  assert status == 200 and json.loads(payload)["status"] == "ok"

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
  jobs = [(MSG_A, False), (MSG_B, True), (MSG_B, False), (MSG_A, True)]
  results: list = [None] * len(jobs)
  def client(i, messages, stream):
    status, _, payload = chat(srv, {"messages": messages, "max_tokens": 12, "temperature": 0, "stream": stream})
    results[i] = (status, streamed_text(sse(payload)) if stream else json.loads(payload)["choices"][0]["message"]["content"])
  threads = [threading.Thread(target=client, args=(i, m, s)) for i, (m, s) in enumerate(jobs)]
  for t in threads: t.start()
  for t in threads: t.join(300)
  refs = srv.engine.refs
  assert results == [(200, refs["A"] if m is MSG_A else refs["B"]) for m, _ in jobs]

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
  long = open_stream(srv, {"messages": MSG_A, "max_tokens": 200, "temperature": 0})
  read_chunks(long, 3)  # it is generating
  # four more wait in the queue (its size), the next one is refused at once
  waiting = [open_stream(srv, {"messages": MSG_B, "max_tokens": 2, "temperature": 0}) for _ in range(4)]
  wait_for(lambda: json.loads(request(srv.server_address[1], "GET", "/health")[2])["waiting"] == 4)
  status, headers, payload = chat(srv, {"messages": MSG_A, "max_tokens": 2})
  assert_error(status, payload, 503, "server_busy")
  assert headers["retry-after"] == "1"
  long.close()  # the client leaves: its generation stops, the queue drains
  outs = []
  for s in waiting:
    with s:
      buf = b""
      while got := s.recv(65536): buf += got
    outs.append(buf)
  for buf in outs: assert buf.startswith(b"HTTP/1.0 200") and buf.endswith(b"data: [DONE]\n\n")
  wait_for(lambda: len(srv.finished) >= before + 5)
  cancelled = srv.finished[before]
  assert cancelled.finish_reason == "cancelled" and cancelled.completion_tokens < 100
  status, _, payload = chat(srv, {"messages": MSG_A, "max_tokens": 12, "temperature": 0})
  assert status == 200 and json.loads(payload)["choices"][0]["message"]["content"] == srv.engine.refs["A"]

def test_disconnect_while_waiting_for_a_whole_reply(srv):
  before, old = len(srv.finished), srv.engine.stats
  s = socket.create_connection(srv.server_address[:2], timeout=60)
  data = json.dumps({"messages": MSG_B, "max_tokens": 200, "temperature": 0}).encode()
  s.sendall(b"POST /v1/chat/completions HTTP/1.0\r\nContent-Length: %d\r\n\r\n%s" % (len(data), data))
  wait_for(lambda: srv.engine.stats is not old and srv.engine.stats.completion_tokens > 2)  # it is generating
  s.close()
  wait_for(lambda: len(srv.finished) > before)
  assert srv.finished[before].finish_reason == "cancelled" and srv.finished[before].completion_tokens < 100

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
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 0
  finally:
    if proc.poll() is None: proc.kill()
  err = (tmp_path / "stderr.txt").read_text()
  assert "server stopped" in err and "Traceback" not in err
