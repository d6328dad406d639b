"""One stream's inter-token gaps while a long prompt starts beside it: a server on 127.0.0.1:PORT (llm.py --serve), one
streaming client (a short prompt, 96 tokens), and after its 8th token a second request whose prompt is LONG tokens long.
Prints the stream's gaps (ms): median, and the largest while the long prompt was being prefilled (from its submission to
its first token), and the long request's time to its first token."""
import json, sys, threading, time, urllib.request
from tools.load import stream_one, health

port, long_words = int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 1400
base = f"http://127.0.0.1:{port}"
deadline = time.monotonic() + 900
while True:
  try:
    health(base); break
  except OSError:
    if time.monotonic() > deadline: raise SystemExit("no server")
    time.sleep(1)
def req(text, n): return {"messages": [{"role": "user", "content": text}], "max_tokens": n, "temperature": 0, "stream": True,
                         "stream_options": {"include_usage": True}}
def round_(salt: str):
  res, long_res = {}, {}
  def streamer(): res.update(stream_one(base, req(f"Tell me about latent attention {salt}.", 96), 900))
  t = threading.Thread(target=streamer); t.start()
  time.sleep(2.0)   # the stream runs
  t_long = time.perf_counter()
  long_res.update(stream_one(base, req(salt + " " + " ".join(["expert router latent cache"] * (long_words // 4)), 2), 900))
  t.join()
  return res, long_res, t_long
round_("first")   # the greedy sampler's steps are captured on their first use: not timed
res, long_res, t_long = round_("second")   # (another prompt: no prefix of it is cached)
st = res["stamps"]
gaps = [(b - a) * 1e3 for a, b in zip(st, st[1:])]
during = [(b - a) * 1e3 for a, b in zip(st, st[1:]) if b > t_long and a < long_res["stamps"][0]]
gaps.sort()
print(json.dumps({"median_gap_ms": round(gaps[len(gaps) // 2], 1), "max_gap_during_long_prefill_ms": round(max(during, default=0), 1),
                  "gaps_during": len(during), "long_ttft_s": round(long_res["stamps"][0] - long_res["t0"], 2), "stream_tokens": len(st)}))
