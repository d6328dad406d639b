"""An OpenAI-compatible HTTP server for one model: POST /v1/chat/completions and /v1/completions (whole, or streamed as
server-sent events), GET /v1/models, GET /health (JSON) and GET /metrics (Prometheus text).

  python apps/llm.py --model glm-4.7-flash-tiny --serve 8080 --parallel 4
  curl -s localhost:8080/v1/chat/completions -d '{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 16}'

One model on one device, serving up to --parallel requests at once by continuous batching (apps/batching.py: one thread
runs the model, every running request advances in one batched decode step, requests join and leave between steps);
more wait in a bounded FIFO queue, and a full queue answers 503 at once. Bad requests get a 4xx status with OpenAI's
error body {"error": {"message", "type", "param", "code"}}; a too-long prompt is 400 with code "context_length_exceeded",
as OpenAI answers. A client that goes away frees its slot at the next step.

Built on the stdlib's ThreadingHTTPServer: upstream tinygrad's llm/serve.py server is a single-threaded TCPServer that
serves one connection at a time and trusts its input.
"""
from __future__ import annotations
import collections, dataclasses, json, queue, secrets, select, signal, socket, sys, threading, time, uuid
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from apps.chat import ChatError, check_messages
from apps.batching import Request, Scheduler
from apps.engine import Engine, Stats, UserError, note
from apps.sampling import Params

MAX_BODY = 4 << 20     # bytes of a request body
MAX_STOPS = 16         # stop strings per request
IO_TIMEOUT = 60.0      # seconds a client may stall while sending its request or reading the reply

class RequestError(Exception):
  """A request the server refuses: HTTP status and an OpenAI-style error."""
  def __init__(self, status: int, message: str, code: str | None = None, param: str | None = None, kind: str | None = None,
               headers: tuple[tuple[str, str], ...] = ()):
    super().__init__(message)
    self.status, self.message, self.code, self.param, self.headers = status, message, code, param, headers
    self.kind = kind or ("server_error" if status >= 500 else "invalid_request_error")

def error_body(message: str, kind: str, code: str | None = None, param: str | None = None) -> dict:
  return {"error": {"message": message, "type": kind, "param": param, "code": code}}

# ---------------------------------------------------------------- request validation

def _jtype(v: Any) -> str:
  names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null", int: "a number", float: "a number"}
  return names.get(type(v), "?")

def _get(body: dict, key: str, kinds: tuple[type, ...], what: str) -> Any:
  v = body.get(key)
  if v is None: return None
  if isinstance(v, bool) and bool not in kinds or not isinstance(v, kinds):
    raise RequestError(400, f"'{key}' must be {what}, not {_jtype(v)}", "invalid_type", key)
  return v

def _no_constants(name: str):
  raise ValueError(f"{name} is not valid JSON")

def normalize_messages(messages: Any) -> Any:
  """OpenAI's newer message forms, as the chat templates expect them: role "developer" is "system", and content given as a
  list of text parts is their text. Anything else is left for check_messages to judge."""
  if not isinstance(messages, list): return messages
  out = []
  for i, m in enumerate(messages):
    if isinstance(m, dict):
      m = dict(m)
      if m.get("role") == "developer": m["role"] = "system"
      if isinstance(c := m.get("content"), list) and all(isinstance(p, dict) for p in c):
        if any(p.get("type") != "text" or not isinstance(p.get("text"), str) for p in c):
          kinds = sorted({str(p.get("type")) for p in c if p.get("type") != "text"}) or ["text without a 'text' string"]
          raise RequestError(400, f"message {i} has content parts of type {', '.join(kinds)}: only text is supported", "invalid_messages", "messages")
        m["content"] = "".join(p["text"] for p in c)
    out.append(m)
  return out

@dataclass
class ChatRequest:
  messages: list[dict]
  params: Params
  max_tokens: int | None
  stop: list[str]
  stream: bool = False
  include_usage: bool = False
  model: str | None = None
  tools: list | None = None

def _json_body(raw: bytes) -> dict:
  try: body = json.loads(raw, parse_constant=_no_constants)
  except (ValueError, RecursionError) as e: raise RequestError(400, f"the request body is not valid JSON: {e}", "invalid_json") from None
  if not isinstance(body, dict): raise RequestError(400, f"the request body must be a JSON object, not {_jtype(body)}", "invalid_type")
  return body

def parse_completion_request(raw: bytes, defaults: Params) -> tuple[str, ChatRequest]:
  """Check a /v1/completions body: its prompt (a string, or an array of one string) and the fields a chat request has."""
  body = _json_body(raw)
  if "prompt" not in body: raise RequestError(400, "'prompt' is required", "missing_field", "prompt")
  prompt = body["prompt"]
  if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str): prompt = prompt[0]
  if not isinstance(prompt, str):
    raise RequestError(400, f"'prompt' must be a string (or an array of one), not {_jtype(prompt)}", "invalid_type", "prompt")
  if not prompt: raise RequestError(400, "'prompt' must not be empty", "invalid_value", "prompt")
  if body.get("echo"): raise RequestError(400, "echo is not supported", "unsupported_value", "echo")
  if body.get("suffix") is not None: raise RequestError(400, "suffix is not supported", "unsupported_value", "suffix")
  return prompt, _parse_fields(body, [], defaults)

def parse_chat_request(raw: bytes, defaults: Params) -> ChatRequest:
  """Check a /v1/chat/completions body: each wrong field is a 400 naming it. Unknown fields are ignored, as OpenAI's clients
  send many; fields that would change the answer in an unsupported way (n > 1, logprobs, penalties) are refused."""
  body = _json_body(raw)
  if "messages" not in body: raise RequestError(400, "'messages' is required", "missing_field", "messages")
  messages = normalize_messages(body["messages"])
  try: check_messages(messages)
  except ChatError as e: raise RequestError(400, str(e), "invalid_messages", "messages") from None
  return _parse_fields(body, messages, defaults)

def _parse_fields(body: dict, messages: list, defaults: Params) -> ChatRequest:
  model = _get(body, "model", (str,), "a string")
  stream = bool(_get(body, "stream", (bool,), "a boolean"))
  opts = _get(body, "stream_options", (dict,), "an object") or {}
  include_usage = bool(_get(opts, "include_usage", (bool,), "a boolean"))
  if _get(body, "n", (int,), "an integer") not in (None, 1): raise RequestError(400, "only n=1 is supported", "unsupported_value", "n")
  if body.get("logprobs") not in (None, False, 0): raise RequestError(400, "logprobs are not supported", "unsupported_value", "logprobs")
  for k in ("frequency_penalty", "presence_penalty"):
    if _get(body, k, (int, float), "a number"):
      raise RequestError(400, f"'{k}' is not supported: use repeat_penalty (llama.cpp's)", "unsupported_value", k)
  max_tokens = None
  for k in ("max_completion_tokens", "max_tokens"):
    if (v := _get(body, k, (int,), "an integer")) is not None:
      if v < 1: raise RequestError(400, f"'{k}' must be at least 1, not {v}", "invalid_value", k)
      max_tokens = v
      break
  over: dict[str, Any] = {}
  for k, key, kinds, what in (("temperature", "temperature", (int, float), "a number"), ("top_p", "top_p", (int, float), "a number"),
                              ("top_k", "top_k", (int,), "an integer"), ("min_p", "min_p", (int, float), "a number"),
                              ("repeat_penalty", "repeat_penalty", (int, float), "a number"),
                              ("repeat_last_n", "repeat_last_n", (int,), "an integer")):
    if (v := _get(body, key, kinds, what)) is not None: over[k] = v
  seed = _get(body, "seed", (int,), "an integer")
  over["seed"] = secrets.randbelow(2**32) if seed is None else seed & 0xFFFFFFFF  # no seed: a new draw, as OpenAI's API
  try: params = dataclasses.replace(defaults, **over)
  except ValueError as e: raise RequestError(400, f"bad sampling parameters: {e}", "invalid_value") from None
  stop = body.get("stop")
  if stop is None: stop = []
  elif isinstance(stop, str): stop = [stop]
  elif not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
    raise RequestError(400, f"'stop' must be a string or an array of strings, not {_jtype(stop)}", "invalid_type", "stop")
  if len(stop) > MAX_STOPS: raise RequestError(400, f"'stop' has {len(stop)} strings, at most {MAX_STOPS} are allowed", "invalid_value", "stop")
  if any(not s for s in stop): raise RequestError(400, "'stop' strings must not be empty", "invalid_value", "stop")
  tools = _get(body, "tools", (list,), "an array")
  return ChatRequest(messages, params, max_tokens, stop, stream, include_usage, model, tools)

# ---------------------------------------------------------------- the model worker

class LLMServer(ThreadingHTTPServer):
  daemon_threads = True
  allow_reuse_address = True
  request_queue_size = 64

  def __init__(self, address: tuple[str, int], engine: Engine, defaults: Params | None = None, queue_size: int = 8,
               max_tokens: int = 256, stop: list[str] = (), max_connections: int = 64, log: bool = True):
    self.engine, self.defaults, self.max_tokens, self.stop, self.log = engine, defaults or Params(), max_tokens, list(stop), log
    self.scheduler = Scheduler(engine, queue_size)   # the engine's model serves engine.model.slots requests at once
    self.max_connections, self._conns, self._conns_lock = max_connections, 0, threading.Lock()
    super().__init__(address, Handler)
    self.worker = threading.Thread(target=self.scheduler.run, name="llm-model", daemon=True)
    self.worker.start()

  @property
  def finished(self) -> collections.deque[Stats]: return self.scheduler.finished   # recent completions, newest last

  @property
  def url(self) -> str:
    host, port = self.server_address[:2]
    return f"http://{host}:{port}"

  # a bound on connections (each has a thread): past it, 503 at once
  def process_request(self, request, client_address):
    with self._conns_lock:
      busy = self._conns >= self.max_connections
      if not busy: self._conns += 1
    if busy:
      data = json.dumps(error_body("too many connections: retry later", "server_error", "too_many_connections")).encode()
      try: request.sendall(b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
                           b"Content-Length: %d\r\n\r\n%s" % (len(data), data))
      except OSError: pass
      self.shutdown_request(request)
      return
    super().process_request(request, client_address)

  def process_request_thread(self, request, client_address):
    try: super().process_request_thread(request, client_address)
    finally:
      with self._conns_lock: self._conns -= 1

  def close(self, serving: bool = True) -> None:
    """Stop serving (from another thread than serve_forever's, unless it has returned) and let the worker finish: what
    runs or waits is answered with an error."""
    if serving: self.shutdown()
    self.server_close()
    self.scheduler.stop()
    self.worker.join(30)

class ClientGone(Exception):
  pass

class Handler(BaseHTTPRequestHandler):
  server: LLMServer
  protocol_version = "HTTP/1.0"  # one request per connection: a streamed reply ends when the connection closes
  default_request_version = "HTTP/1.0"  # a malformed request line still gets a status line and headers (not an HTTP/0.9 bare body)
  timeout = IO_TIMEOUT
  server_version = "tinygrad-mla"

  # ---- plumbing
  def log_request(self, code="-", size="-"): pass
  def log_message(self, format, *args):
    if self.server.log: sys.stderr.write(f"llm: {self.address_string()} {format % args}\n")
  def log_line(self, status: int, what: str) -> None:
    if self.server.log: sys.stderr.write(f"llm: {getattr(self, 'command', None) or '-'} {getattr(self, 'path', '-')} {status}: {what}\n")

  def send_json(self, status: int, obj: dict, headers: tuple[tuple[str, str], ...] = ()) -> None:
    data = json.dumps(obj).encode()
    self.send_response(status)
    self.send_header("Content-Type", "application/json")
    self.send_header("Content-Length", str(len(data)))
    for k, v in headers: self.send_header(k, v)
    self.end_headers()
    if self.command != "HEAD": self.wfile.write(data)

  def send_request_error(self, e: RequestError) -> None:
    self.log_line(e.status, e.message)
    self.send_json(e.status, error_body(e.message, e.kind, e.code, e.param), e.headers)

  def send_error(self, code, message=None, explain=None):
    """http.server's own errors (a malformed request line, headers too long, ...) as JSON too."""
    self.close_connection = True
    try:
      self.send_request_error(RequestError(code, message or HTTPStatus(code).phrase, HTTPStatus(code).phrase.lower().replace(" ", "_")))
    except OSError: pass

  def client_gone(self) -> bool:
    """Whether the client closed its end (readable with nothing to read), without consuming anything it sent."""
    try:
      readable, _, _ = select.select([self.connection], [], [], 0)
      return bool(readable) and self.connection.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError: return False
    except (OSError, ValueError): return True

  def path_only(self) -> str: return self.path.split("?", 1)[0]

  ROUTES = {"/v1/chat/completions": ("POST",), "/v1/completions": ("POST",), "/v1/models": ("GET",), "/health": ("GET",), "/metrics": ("GET",)}

  def route(self, method: str) -> None:
    path = self.path_only()
    try:
      allowed = self.ROUTES.get(path)
      if allowed is None: raise RequestError(404, f"no such endpoint: {path} (try POST /v1/chat/completions or GET /v1/models)", "not_found")
      if method not in allowed:
        raise RequestError(405, f"{path} takes {' or '.join(allowed)}, not {method}", "method_not_allowed", headers=(("Allow", ", ".join(allowed)),))
      if path == "/v1/models": self.send_json(200, {"object": "list", "data": [{"id": self.server.engine.name, "object": "model",
                                                                                 "created": int(time.time()), "owned_by": "tinygrad-mla"}]})
      elif path == "/health": self.send_json(200, {"status": "ok", **self.server.scheduler.status()})
      elif path == "/metrics": self.send_metrics()
      elif path == "/v1/completions": self.completions()
      else: self.chat_completions()
    except RequestError as e:
      try: self.send_request_error(e)
      except OSError: self.close_connection = True   # the client left before its answer
    except ClientGone: self.close_connection = True
    except (BrokenPipeError, ConnectionResetError, TimeoutError): self.close_connection = True

  def do_GET(self): self.route("GET")
  def do_POST(self): self.route("POST")
  def do_PUT(self): self.route("PUT")
  def do_DELETE(self): self.route("DELETE")
  def do_PATCH(self): self.route("PATCH")
  def do_HEAD(self): self.route("HEAD")
  def do_OPTIONS(self): self.route("OPTIONS")

  def read_body(self) -> bytes:
    if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
      raise RequestError(411, "chunked request bodies are not supported: send Content-Length", "length_required")
    length = self.headers.get("Content-Length")
    if length is None: raise RequestError(411, "a Content-Length header is required", "length_required")
    try: n = int(length)
    except ValueError: n = -1
    if n < 0: raise RequestError(400, f"bad Content-Length {length!r}", "invalid_header")
    if n > MAX_BODY: raise RequestError(413, f"the request body has {n} bytes, more than the {MAX_BODY} allowed", "request_too_large")
    data = self.rfile.read(n)
    if len(data) < n: raise ClientGone()
    return data

  def send_metrics(self) -> None:
    st = self.server.scheduler.status()
    lines = [f"# TYPE llm_{k} gauge\nllm_{k} {v}" for k, v in (("slots", st["slots"]), ("slots_busy", st["slots_busy"]), ("waiting", st["waiting"]),
                                                              ("warming", st["warming"]),
                                                              ("decode_tokens_per_second", st["decode_tokens_per_s"]),
                                                              ("device_memory_bytes", st["device_memory_bytes"]))]
    lines += [f"# TYPE llm_{k}_total counter\nllm_{k}_total {st[k]}" for k in ("steps", "tokens")]
    buckets, total_s = self.server.scheduler.itl_histogram()
    lines += ["# TYPE llm_inter_token_seconds histogram", *(f'llm_inter_token_seconds_bucket{{le="{le}"}} {n}' for le, n in buckets),
              f"llm_inter_token_seconds_sum {total_s:.6f}", f"llm_inter_token_seconds_count {buckets[-1][1]}"]
    data = ("\n".join(lines) + "\n").encode()
    self.send_response(200)
    self.send_header("Content-Type", "text/plain; version=0.0.4")
    self.send_header("Content-Length", str(len(data)))
    self.end_headers()
    if self.command != "HEAD": self.wfile.write(data)

  # ---- /v1/chat/completions and /v1/completions
  def chat_completions(self) -> None:
    srv, engine = self.server, self.server.engine
    req = parse_chat_request(self.read_body(), srv.defaults)
    try: ids = engine.chat_ids(req.messages, **({"tools": req.tools} if req.tools else {}))
    except ChatError as e: raise RequestError(400, str(e), "invalid_messages", "messages") from None
    self.run_request(req, ids, "messages", chat=True)

  def completions(self) -> None:
    prompt, req = parse_completion_request(self.read_body(), self.server.defaults)
    self.run_request(req, self.server.engine.text_ids(prompt), "prompt", chat=False)

  def run_request(self, req: ChatRequest, ids: list[int], param: str, chat: bool) -> None:
    srv, engine = self.server, self.server.engine
    if not engine.fits(len(ids)):
      raise RequestError(400, f"the prompt has {len(ids)} tokens, but the context holds {engine.max_context} (and the reply needs at least one): "
                         f"shorten the {'conversation' if chat else 'prompt'}", "context_length_exceeded", param)
    job = Request(ids, req.max_tokens or srv.max_tokens, req.params, req.stop + srv.stop)
    try: srv.scheduler.submit(job)
    except queue.Full:
      raise RequestError(503, f"the server is busy ({srv.scheduler.queue_size} requests are waiting): retry later", "server_busy",
                         headers=(("Retry-After", "1"),)) from None
    meta = {"id": f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex[:24]}", "created": int(time.time()), "model": engine.name}
    try:
      if req.stream: self.stream_reply(job, meta, req.include_usage, chat)
      else: self.whole_reply(job, meta, chat)
    finally: job.cancelled.set()  # a no-op when done; otherwise the worker drops or stops it

  def next_event(self, job: Request) -> tuple:
    """The worker's next event for this job; ClientGone when the client leaves meanwhile."""
    while True:
      if self.client_gone(): raise ClientGone()  # checked per event too: a busy worker never lets get() time out
      try: return job.events.get(timeout=0.2)
      except queue.Empty: pass

  @staticmethod
  def usage(job: Request, st: Stats) -> dict:
    return {"prompt_tokens": len(job.ids), "completion_tokens": st.completion_tokens, "total_tokens": len(job.ids) + st.completion_tokens}

  def whole_reply(self, job: Request, meta: dict, chat: bool = True) -> None:
    parts: list[str] = []
    while (ev := self.next_event(job))[0] == "text": parts.append(ev[1])
    if ev[0] == "error": raise RequestError(500, f"generation failed: {ev[1]}", "internal_error")
    st: Stats = ev[1]
    self.log_line(200, st.line())
    text = "".join(parts)
    choice = {"index": 0, "message": {"role": "assistant", "content": text}} if chat else {"index": 0, "text": text, "logprobs": None}
    self.send_json(200, {**meta, "object": "chat.completion" if chat else "text_completion", "usage": self.usage(job, st),
                         "choices": [{**choice, "finish_reason": st.finish_reason}]})

  def stream_reply(self, job: Request, meta: dict, include_usage: bool, chat: bool = True) -> None:
    self.send_response(200)
    self.send_header("Content-Type", "text/event-stream")
    self.send_header("Cache-Control", "no-cache")
    self.end_headers()
    def send(obj: dict | str) -> None:
      if self.client_gone(): raise ClientGone()
      self.wfile.write(b"data: " + (obj if isinstance(obj, str) else json.dumps(obj)).encode() + b"\n\n")
      self.wfile.flush()
    def chunk(delta: dict, finish: str | None = None) -> dict:
      if chat: return {**meta, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
      return {**meta, "object": "text_completion",
              "choices": [{"index": 0, "text": delta.get("content", ""), "logprobs": None, "finish_reason": finish}]}
    if chat: send(chunk({"role": "assistant", "content": ""}))
    while (ev := self.next_event(job))[0] == "text": send(chunk({"content": ev[1]}))
    if ev[0] == "error":
      self.log_line(500, ev[1])
      send(error_body(f"generation failed: {ev[1]}", "server_error", "internal_error"))
      return
    st: Stats = ev[1]
    send(chunk({}, st.finish_reason))
    if include_usage: send({**meta, "object": "chat.completion.chunk" if chat else "text_completion", "choices": [], "usage": self.usage(job, st)})
    send("[DONE]")
    self.log_line(200, "stream: " + st.line())

# ---------------------------------------------------------------- entry point (apps/llm.py --serve)

def serve(engine: Engine, host: str, port: int, defaults: Params, queue_size: int = 8, max_tokens: int = 256, stop: list[str] = ()) -> int:
  try: srv = LLMServer((host, port), engine, defaults, queue_size, max_tokens, stop)
  except OSError as e: raise UserError(f"cannot listen on {host}:{port}: {e.strerror or e}: choose another --serve port or --host") from None
  slots = engine.model.slots
  structures = list({p.structure: p for p in (defaults, Params())}.values())   # the default sampling's, then greedy's
  later = (["greedy's"] if len(structures) > 1 else []) + ([f"the steps of 2-{slots} requests"] if slots > 1 else [])
  note("warming up (the prefill and the one-request steps of the default sampling"
       + (f"; {' and '.join(later)} follow while the server is idle)" if later else ")"))
  t0 = time.perf_counter()
  srv.scheduler.on_warm = lambda: note(f"warm: the steps of up to {slots} requests are captured "
                                       f"({time.perf_counter() - t0:.0f} s after the warmup began)")
  srv.scheduler.warmup(structures, now=1)   # one JIT capture per structure and batch size
  def stop_on_term(signum, frame): raise KeyboardInterrupt
  signal.signal(signal.SIGTERM, stop_on_term)
  print(f"llm: serving {engine.name} on {srv.url}/v1 (POST /v1/chat/completions, /v1/completions, GET /v1/models; {engine.model.slots} at once); "
        "Ctrl-C stops", flush=True)
  try: srv.serve_forever(poll_interval=0.2)
  except KeyboardInterrupt: pass
  finally: srv.close(serving=False)
  note("server stopped")
  return 0
