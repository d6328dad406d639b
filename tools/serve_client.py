"""Client-side speed of the OpenAI-compatible server: streams chat completions and reports what a client sees
(time to first token, generated tokens per second after it), as the server's usage counts them.

  python3 apps/llm.py --model glm-4.7-flash --serve 8080 &      # then, once /health answers:
  python3 -m tools.serve_client --port 8080 --requests 3 --max-tokens 128

Talks to 127.0.0.1 only; bounded in requests and time.
"""
from __future__ import annotations
import argparse, json, statistics, time, urllib.request

def wait_ready(base: str, timeout: float) -> None:
  deadline = time.monotonic() + timeout
  while time.monotonic() < deadline:
    try:
      with urllib.request.urlopen(base + "/health", timeout=5) as r:
        if r.status == 200: return
    except OSError: time.sleep(1)
  raise SystemExit(f"serve_client: no server at {base} after {timeout:.0f} s")

def one(base: str, max_tokens: int, prompt: str) -> dict:
  body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens, "temperature": 0, "stream": True,
          "stream_options": {"include_usage": True}}
  req = urllib.request.Request(base + "/v1/chat/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
  t0, first, usage, chunks = time.perf_counter(), None, None, 0
  with urllib.request.urlopen(req, timeout=600) as r:
    for raw in r:
      line = raw.decode().strip()
      if not line.startswith("data: ") or line == "data: [DONE]": continue
      msg = json.loads(line[6:])
      if msg.get("usage"): usage = msg["usage"]
      if any(c.get("delta", {}).get("content") for c in msg.get("choices", [])):
        chunks += 1
        if first is None: first = time.perf_counter()
  end = time.perf_counter()
  n = usage["completion_tokens"] if usage else chunks
  return {"ttft_s": (first or end) - t0, "tokens": n, "tok_s": (n - 1) / (end - first) if first and n > 1 and end > first else 0.0}

def main() -> None:
  ap = argparse.ArgumentParser(prog="python3 -m tools.serve_client", description=__doc__.split("\n\n")[0])
  ap.add_argument("--port", type=int, default=8080)
  ap.add_argument("--requests", type=int, default=3)
  ap.add_argument("--max-tokens", type=int, default=128)
  ap.add_argument("--wait", type=float, default=600, help="seconds to wait for /health")
  args = ap.parse_args()
  base = f"http://127.0.0.1:{args.port}"
  wait_ready(base, args.wait)
  runs = [one(base, args.max_tokens, f"Write a long story about request {i}.") for i in range(args.requests)]
  for r in runs: print(json.dumps(r))
  steady = runs[1:] or runs  # the first request may pay for compilation
  print(f"client: {statistics.median(r['tok_s'] for r in steady):.1f} tok/s generated (median of {len(steady)}), "
        f"time to first token {statistics.median(r['ttft_s'] for r in steady) * 1e3:.0f} ms", flush=True)

if __name__ == "__main__": main()
