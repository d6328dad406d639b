"""Load on an OpenAI-compatible server (ours, or llama.cpp's llama-server): C concurrent clients, each streaming chat
completions back to back with a mix of prompt and reply lengths; per concurrency the aggregate output tok/s, the time to
first token and the inter-token latency (p50 / p99), as the clients see them, and the inter-token latency as the server
reads the tokens (its /metrics histogram: no text held back by the detokenizer, no streaming; each value the upper bound of
its bucket, at most 10% above it).

  python3 apps/llm.py --model glm-4.7-flash --serve 8080 --parallel 32 &      # then:
  python3 -m tools.load --port 8080 --clients 1,4,8,16,32 [--requests 16] [--seconds 20] [--json PATH]
  python3 -m tools.load --port 8080 --faults 1000     # requests with cancellations, disconnects and malformed bodies mixed in

Talks to 127.0.0.1 only; bounded in requests and in time (--seconds per concurrency). It starts once /health answers
with no captures left to make (ours makes its batched steps after it answers, while idle). tok/s is the throughput while all
C clients stream (the level's ramp and drained tail left out); `all` counts the whole level. --faults checks afterwards that
/health reports every slot free, nothing waiting and the device memory it reported before the storm (after a warm-up
round), and that a plain request still gets its answer.
"""
from __future__ import annotations
import argparse, json, random, socket, threading, time, urllib.error, urllib.request

WORDS = ("model attention latent cache expert router token prompt decode prefill kernel tensor batch slot stream server "
         "memory bandwidth weight matrix vector norm rotary position head layer").split()
PROMPT_WORDS = (8, 64, 256)     # words of the prompts (a mix: chat turns, a paragraph, a page)
REPLY_TOKENS = (32, 64, 128)    # max_tokens of the replies

def pct(xs: list[float], q: float) -> float:
  if not xs: return float("nan")
  xs = sorted(xs)
  return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))]

def body(rng: random.Random, stream: bool = True) -> dict:
  words = " ".join(rng.choice(WORDS) for _ in range(rng.choice(PROMPT_WORDS)))
  return {"messages": [{"role": "user", "content": f"Summarize: {words}"}], "max_tokens": rng.choice(REPLY_TOKENS), "temperature": 0,
          "stream": stream, "stream_options": {"include_usage": True}}

def stream_one(base: str, req: dict, timeout: float) -> dict:
  """One streamed completion: its start, the arrival time of each content chunk, and the usage's token count."""
  r = urllib.request.Request(base + "/v1/chat/completions", data=json.dumps(req).encode(), headers={"Content-Type": "application/json"})
  t0, stamps, tokens = time.perf_counter(), [], None
  with urllib.request.urlopen(r, timeout=timeout) as resp:
    for raw in resp:
      line = raw.decode().strip()
      if not line.startswith("data: ") or line == "data: [DONE]": continue
      msg = json.loads(line[6:])
      if msg.get("usage"): tokens = msg["usage"]["completion_tokens"]
      if any(c.get("delta", {}).get("content") for c in msg.get("choices", [])): stamps.append(time.perf_counter())
  return {"t0": t0, "end": time.perf_counter(), "stamps": stamps, "tokens": tokens if tokens is not None else len(stamps)}

def concurrent_rate(results: list[dict], clients: int) -> tuple[float, float]:
  """Tokens a second while every client streamed (from the last client's first token to the first client's last), and
  that window's seconds; each reply's tokens spread evenly over its chunks. (nan, 0) when a client got no token."""
  stamps = [[s for r in results if r["client"] == i for s in r["stamps"]] for i in range(clients)]
  if not all(stamps): return float("nan"), 0.0
  w0, w1 = max(min(s) for s in stamps), min(max(s) for s in stamps)
  if w1 <= w0: return float("nan"), 0.0
  return sum(r["tokens"] / len(r["stamps"]) for r in results for s in r["stamps"] if w0 <= s <= w1) / (w1 - w0), w1 - w0

def run_level(base: str, clients: int, requests: int, seconds: float, seed: int) -> dict:
  """`clients` threads, each up to `requests` completions back to back, none started after `seconds`. tok_s is the rate
  while all of them streamed (concurrent_rate: a level's ramp and its tail, when fewer clients are left, do not count as
  `clients` at once); tok_s_all is every token over the whole level."""
  results, errors, lock = [], [], threading.Lock()
  bounds, itl0 = server_itl(base)
  deadline = time.perf_counter() + seconds
  def client(i: int) -> None:
    rng = random.Random(seed * 1000 + i)
    for _ in range(requests):
      if time.perf_counter() > deadline: break
      try: res = stream_one(base, body(rng), max(1.0, deadline + 300 - time.perf_counter()))
      except (OSError, ValueError) as e:
        with lock: errors.append(f"{type(e).__name__}: {e}")
        continue
      res["client"] = i
      with lock: results.append(res)
  threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
  t0 = time.perf_counter()
  for t in threads: t.start()
  for t in threads: t.join(seconds + 360)
  wall = (max((r["end"] for r in results), default=t0) - t0) or float("nan")
  ttft = [r["stamps"][0] - r["t0"] for r in results if r["stamps"]]
  itl = [b - a for r in results for a, b in zip(r["stamps"], r["stamps"][1:])]
  itl1 = server_itl(base)[1]
  tokens = sum(r["tokens"] for r in results)
  rate, window = concurrent_rate(results, clients)
  return {"clients": clients, "requests": len(results), "errors": len(errors), "first_error": errors[0] if errors else None,
          "tokens": tokens, "wall_s": wall, "tok_s": rate, "window_s": window,
          "tok_s_all": tokens / wall, "ttft_p50_ms": pct(ttft, 50) * 1e3, "ttft_p99_ms": pct(ttft, 99) * 1e3,
          "itl_p50_ms": pct(itl, 50) * 1e3, "itl_p99_ms": pct(itl, 99) * 1e3,
          "server_itl_p50_ms": histogram_pct(bounds, itl0, itl1, 50) * 1e3, "server_itl_p99_ms": histogram_pct(bounds, itl0, itl1, 99) * 1e3}

def server_itl(base: str) -> tuple[list[float], list[int]]:
  """The server's inter-token histogram (/metrics' llm_inter_token_seconds): bucket upper bounds (s) and cumulative counts;
  none where the server has no such histogram (llama-server)."""
  try:
    with urllib.request.urlopen(base + "/metrics", timeout=10) as r: text = r.read().decode()
  except OSError: return [], []
  rows = [line.split() for line in text.splitlines() if line.startswith('llm_inter_token_seconds_bucket{le="')]
  return [float(k.split('"')[1]) for k, _ in rows], [int(v) for _, v in rows]

def histogram_pct(bounds: list[float], before: list[int], after: list[int], q: float) -> float:
  """pct(q) of the gaps counted between two reads of a cumulative histogram, as the upper bound of its bucket (nan: none)."""
  counts = [a - b for a, b in zip(after, before)]
  if not counts or not counts[-1]: return float("nan")
  rank = int(round(q / 100 * (counts[-1] - 1)))
  return next(le for le, c in zip(bounds, counts) if c > rank)

def health(base: str) -> dict:
  with urllib.request.urlopen(base + "/health", timeout=10) as r: return json.loads(r.read())

def wait_ready(base: str, timeout: float) -> None:
  """Until the server answers and has made every capture of its warmup (a server captures its batched steps while idle
  after it answers: a level measured before would time the captures)."""
  deadline = time.monotonic() + timeout
  while time.monotonic() < deadline:
    try:
      if not health(base).get("warming"): return
    except OSError: pass
    time.sleep(1)
  raise SystemExit(f"load: no warm server at {base} after {timeout:.0f} s")

def faults(base: str, port: int, n: int, clients: int, seed: int) -> dict:
  """n requests from `clients` threads, each at random: streamed to its end, abandoned after its first chunk, abandoned
  before any reply, a malformed body, or a whole reply. Then the server must be idle again."""
  lock, counts = threading.Lock(), {}
  stream_one(base, body(random.Random(2)), 600)   # (the server's warm-up captured every batch size's step)
  before = health(base)
  todo = list(range(n))
  def one(r: random.Random) -> str:
    kind = r.choice(["stream", "abandon_stream", "abandon", "malformed", "whole"])
    req = body(r, stream=kind != "whole")
    req["max_tokens"] = r.randint(1, 48)
    if kind in ("stream", "whole"):
      if kind == "stream": stream_one(base, req, 600)
      else:
        rq = urllib.request.Request(base + "/v1/chat/completions", data=json.dumps(req).encode(), headers={"Content-Type": "application/json"})
        try: urllib.request.urlopen(rq, timeout=600).read()
        except urllib.error.HTTPError as e:
          if e.code != 503: raise
          return "busy"
      return kind
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    with s:
      data = b'{"messages": [{"role": "user", "content": "x"}' if kind == "malformed" else json.dumps(req).encode()
      s.sendall(b"POST /v1/chat/completions HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(data), data))
      if kind == "malformed":
        reply = s.recv(65536)
        if not reply.startswith(b"HTTP/1.0 400"): raise ValueError(f"malformed body answered {reply[:40]!r}")
      elif kind == "abandon_stream": s.recv(1)
    return kind
  def client(i: int) -> None:
    r = random.Random(seed * 7919 + i)
    while True:
      with lock:
        if not todo: return
        todo.pop()
      try: kind = one(r)
      except (OSError, ValueError) as e: kind = f"error {type(e).__name__} {getattr(e, 'code', '')}".strip()
      with lock: counts[kind] = counts.get(kind, 0) + 1
  threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
  for t in threads: t.start()
  for t in threads: t.join(3600)
  deadline = time.monotonic() + 120
  while (h := health(base))["slots_busy"] or h["waiting"]:
    if time.monotonic() > deadline: break
    time.sleep(0.5)
  ok = stream_one(base, body(random.Random(1)), 600)
  return {"requests": n, "kinds": counts, "before": before, "idle_after": h, "plain_request_tokens": ok["tokens"]}

def main() -> None:
  ap = argparse.ArgumentParser(prog="python3 -m tools.load", description=__doc__.split("\n\n")[0])
  ap.add_argument("--port", type=int, default=8080)
  ap.add_argument("--clients", default="1,4,8,16,32", help="concurrency levels")
  ap.add_argument("--requests", type=int, default=16, help="completions per client at each level, at most")
  ap.add_argument("--seconds", type=float, default=20, help="none started after this many seconds of a level")
  ap.add_argument("--faults", type=int, default=0, help="instead: this many requests with faults mixed in, then an idle check")
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--wait", type=float, default=600, help="seconds to wait for /health")
  ap.add_argument("--json", help="write the results here")
  args = ap.parse_args()
  base = f"http://127.0.0.1:{args.port}"
  wait_ready(base, args.wait)
  if args.faults:
    res = faults(base, args.port, args.faults, 16, args.seed)
    print(json.dumps(res))
    if args.json:
      with open(args.json, "w") as f: json.dump(res, f, indent=1)
    h = res["idle_after"]
    same_memory = h.get("device_memory_bytes") == res["before"].get("device_memory_bytes")
    print(f"load: idle after {args.faults} requests: {not h['slots_busy'] and not h['waiting']}, device memory as before: {same_memory}")
    raise SystemExit(0 if not h["slots_busy"] and not h["waiting"] and same_memory and res["plain_request_tokens"] > 0 else 1)
  rows = []
  print(f"{'clients':>7s} {'reqs':>5s} {'tok/s':>8s} {'window':>7s} {'all':>8s} {'TTFT p50':>9s} {'p99':>8s} {'ITL p50':>8s} "
        f"{'p99':>8s} {'server ITL p50':>14s} {'p99':>6s} (ms)", flush=True)
  for c in (int(x) for x in args.clients.split(",")):
    r = run_level(base, c, args.requests, args.seconds, args.seed)
    rows.append(r)
    print(f"{c:7d} {r['requests']:5d} {r['tok_s']:8.1f} {r['window_s']:6.1f}s {r['tok_s_all']:8.1f}"
          f" {r['ttft_p50_ms']:9.0f} {r['ttft_p99_ms']:8.0f} {r['itl_p50_ms']:8.1f} {r['itl_p99_ms']:8.1f}"
          f" {r['server_itl_p50_ms']:14.1f} {r['server_itl_p99_ms']:6.1f}"
          + (f"  {r['errors']} errors: {r['first_error']}" if r["errors"] else ""), flush=True)
  if args.json:
    with open(args.json, "w") as f: json.dump({"levels": rows}, f, indent=1)
  print(f"server: {json.dumps(health(base))}")

if __name__ == "__main__": main()
