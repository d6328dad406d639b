"""tools.load's throughput at a concurrency: only while every client streams."""
import math
from tools.load import concurrent_rate, histogram_pct

def reply(client: int, stamps: list[float], tokens: int | None = None) -> dict:
  return {"client": client, "stamps": stamps, "tokens": len(stamps) if tokens is None else tokens}

def test_window_leaves_out_ramp_and_tail():
  # client 0 streams 0..10 s a token a second; client 1 only 2..6: the window is 2..6 and holds 5 + 5 tokens
  rate, window = concurrent_rate([reply(0, [float(t) for t in range(11)]), reply(1, [2.0, 3.0, 4.0, 5.0, 6.0])], 2)
  assert window == 4.0 and rate == 10 / 4

def test_window_spans_a_clients_replies_and_spreads_tokens_over_chunks():
  # client 0's two replies (the gap between them inside the window); client 1's one reply of 20 tokens in 5 chunks
  rs = [reply(0, [0.0, 1.0]), reply(0, [3.0, 4.0]), reply(1, [0.5, 1.5, 2.5, 3.5, 4.5], tokens=20)]
  rate, window = concurrent_rate(rs, 2)
  assert window == 3.5 and rate == (3 + 4 * 4) / 3.5   # client 0: 1, 3, 4; client 1: 4 chunks of 4 tokens

def test_no_window_without_every_client():
  rate, window = concurrent_rate([reply(0, [0.0, 1.0]), reply(1, [])], 2)
  assert math.isnan(rate) and window == 0.0
  rate, window = concurrent_rate([reply(0, [0.0, 1.0]), reply(1, [5.0, 6.0])], 2)   # never both at once
  assert math.isnan(rate) and window == 0.0

def test_server_itl_percentiles_from_a_histograms_two_reads():
  # cumulative counts before and after a level: the level's gaps are 2 in (0, 1], 0 in (1, 2], 97 in (2, 4], 1 past 4
  bounds, before, after = [1.0, 2.0, 4.0, math.inf], [5, 6, 6, 6], [7, 8, 105, 106]
  assert histogram_pct(bounds, before, after, 50) == 4.0 and histogram_pct(bounds, before, after, 1) == 1.0
  assert histogram_pct(bounds, before, after, 100) == math.inf
  assert math.isnan(histogram_pct(bounds, before, before, 50)) and math.isnan(histogram_pct([], [], [], 99))
