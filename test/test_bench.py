"""The measuring instruments: bench_block.py statistics, weight accounting and split-mask plumbing, search2.py's searches,
cache and outputs, and tools/profile.py's per-part attribution, on CPU with the tiny presets."""
import dataclasses, json, os, re, struct, subprocess, sys, types, zlib
from pathlib import Path
import numpy as np
import pytest
from hypothesis import given, strategies as st
import bench_block as bb
from tinygrad import Tensor
import search2
from apps.quantized import packed_bytes

ROOT = Path(__file__).resolve().parent.parent
PRESET = "glm-4.7-flash-tiny"

# ---------------------------------------------------------------- statistics

SAMPLES = [[1.0], [3.0, 1.0, 2.0], [5.0, 1.0, 4.0, 2.0, 3.0, 10.0], [2.0, 2.0, 2.0, 7.0], list(np.random.default_rng(0).standard_normal(101))]

@pytest.mark.parametrize("xs", SAMPLES, ids=lambda x: f"n{len(x)}")
def test_summary_matches_numpy(xs):
  a = np.asarray(xs)
  s = bb.summarize(xs)
  for q in (0, 10, 25, 50, 75, 90, 100): assert bb.percentile(xs, q) == pytest.approx(np.percentile(a, q), rel=1e-12, abs=1e-12)
  assert s["median"] == pytest.approx(np.median(a), rel=1e-12)
  assert (s["p10"], s["p90"]) == pytest.approx((np.percentile(a, 10), np.percentile(a, 90)), rel=1e-12, abs=1e-12)
  assert s["iqr"] == pytest.approx(np.subtract(*np.percentile(a, [75, 25])), rel=1e-12, abs=1e-12)
  assert s["mad"] == pytest.approx(np.median(np.abs(a - np.median(a))), rel=1e-12, abs=1e-12)
  assert (s["min"], s["max"], s["n"]) == (a.min(), a.max(), len(a))

@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=40), st.floats(0, 100))
def test_percentile_any_sample(xs, q):
  assert bb.percentile(xs, q) == pytest.approx(np.percentile(np.asarray(xs), q), rel=1e-9, abs=1e-6)

def test_rounds_median_of_medians():
  rounds = [[1.0, 2.0, 9.0], [4.0, 5.0, 6.0], [0.5, 3.0, 3.5]]
  r = bb.combine_rounds(rounds)
  assert r["round_medians"] == [2.0, 5.0, 3.0]
  assert r["median"] == np.median([np.median(x) for x in rounds]) == 3.0
  assert len(r["rounds"]) == 3 and r["spread"] == pytest.approx((5.0 - 2.0) / 3.0)

def test_percentile_empty_is_an_error():
  with pytest.raises(ValueError, match="empty"): bb.percentile([], 50)

# ---------------------------------------------------------------- the model under test

@pytest.fixture(scope="module")
def bench():
  bb.setup(["--model", PRESET, "--target", "block", "--bank", "2", "--pos", "16", "--max-context", "256"])
  return bb._ensure()

def _gguf_reference(path: Path):
  from gguf import GGUFReader
  r = GGUFReader(str(path))
  kv = {f.name: f.parts[f.data[0]].tolist() for f in r.fields.values() if f.data}
  return r, kv

def test_active_weight_bytes_match_the_file(bench):
  """Independent of the attribute walk: every blk.* tensor in the file (gguf-py's listing), at its device size, k of n_expert
  for routed experts, must be what active_weight_bytes counts for the stack; and the walk must not miss a tensor."""
  m = bench.m
  r, kv = _gguf_reference(bb._S.path)
  k, n = kv["deepseek2.expert_used_count"][0], kv["deepseek2.expert_count"][0]
  full = active = 0
  for t in r.tensors:
    if not t.name.startswith("blk.") or int(t.name.split(".")[1]) >= m.cfg.n_layer: continue
    ne = [int(x) for x in t.shape]
    size = packed_bytes(t.tensor_type, ne) if len(ne) > 1 else int(np.prod(ne)) * (2 if t.tensor_type.name == "F16" else 4)
    full += size
    active += size * k // n if "_exps." in t.name else size
  refs = [w for b in m.blocks for w in bb.block_weights(b)]
  assert sum(w.nbytes for w in refs) == full
  assert bb.active_weight_bytes(m.blocks)["total"] == active
  parts = bb.active_weight_bytes(m)
  assert parts["embedding"] == m.token_embd.w.nbytes // m.cfg.vocab_size and parts["output"] == m.output.w.nbytes
  assert parts["total"] == active + parts["embedding"] + parts["output"] + m.output_norm.nbytes()

def test_halves_compose_to_the_block(bench):
  """attn_half and ffn_half (the per-part targets) are Block.__call__ split in two: same result, bit for bit."""
  m, b = bench.m, bench.bank[0]
  x = bench.xs[1]
  args = m.rope_args(16, 1)
  whole = b(x, m.caches[b.i], *args).numpy()
  halves = bb.ffn_half(b, bb.attn_half(b, x, m.caches[b.i], *args)).numpy()
  np.testing.assert_array_equal(whole, halves)

def test_split_mask_changes_the_kernels_not_the_result(bench):
  """A mask re-traces the loaded blocks (no reload) into a different kernel graph that computes the same values."""
  full = (1 << len(bb.SPLIT_POINTS)) - 1
  weights = [id(t.uop.base.buffer) for w in bb.block_weights(bench.bank[0]) for t in w.tensors]
  g0, g1 = bb.kernel_graph(0, "block"), bb.kernel_graph(full, "block")
  assert g0 != g1 and len(g1) > len(g0)
  assert bb.graph_key(0) != bb.graph_key(full)
  outs = []
  for mask in (0, full):
    bb.set_split_mask(bench.m, mask)
    step = bench.step("block")
    bb.warm(step, extra=0)
    outs.append(step.fn(*step.args(3)).numpy().copy())
  np.testing.assert_allclose(outs[1], outs[0], rtol=1e-5, atol=1e-5)  # fp32 sums in another order, nothing more
  assert [id(t.uop.base.buffer) for w in bb.block_weights(bench.bank[0]) for t in w.tensors] == weights

def test_graph_key_equals_kernel_identity(bench):
  """graph_key (schedule only) agrees with the compiled kernels: a mask whose key equals mask 0's runs the same programs."""
  k0 = bb.graph_key(0)
  keys = {1 << i: bb.graph_key(1 << i) for i in range(len(bb.SPLIT_POINTS))}
  same, diff = [m for m, k in keys.items() if k == k0], [m for m, k in keys.items() if k != k0]
  assert diff, "no split point changes the kernels"
  names0 = bb.kernel_graph(0, "block")
  if same: assert bb.kernel_graph(same[0], "block") == names0
  assert bb.kernel_graph(diff[0], "block") != names0

def test_bench_mask_reuses_weights(bench):
  bb.setup(["--model", PRESET, "--target", "block", "--bank", "2", "--pos", "16", "--max-context", "256"])  # same config: no reload
  assert bb._ensure() is bench
  n = len(bb._S.calls)
  ms = [bb.bench_mask(m, 3, 0) for m in (0, 1 << bb.SPLIT_POINTS.index("router"))]
  assert all(np.isfinite(x) and x > 0 for x in ms) and len(bb._S.calls) == n + 2
  assert bb._ensure() is bench and "|block|pos16|bank2|CPU|" in bb.cache_key()

def test_kernel_counts_under_a_graph():
  """On a device with JIT graphs (NULL's NullGraph), a graph launch holds many kernels: counted apart, and GlobalCounters
  sees only the launch."""
  code = """
import bench_block as bb
from tinygrad import Tensor
from tinygrad import Tensor, TinyJit, GlobalCounters
a = Tensor.ones(64).contiguous().realize()
def f(a):
  for _ in range(5): a = (a * 2 + 1).contiguous()
  return a.sum().realize()
j = TinyJit(f)
for _ in range(3): j(a)
GlobalCounters.reset(); j(a)
print(bb.kernel_counts(j), GlobalCounters.kernel_count)
"""
  out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, "DEV": "NULL"}, capture_output=True, text=True, timeout=120)
  assert out.returncode == 0, out.stderr
  counts, launched = out.stdout.strip().rsplit(" ", 1)
  counts = eval(counts)
  assert counts["kernels"] == 6 and counts["graphs"] == 1 and counts["launches"] == 1 and int(launched) == 1

def test_bench_block_json_end_to_end():
  cmd = [sys.executable, "bench_block.py", "3", "--rounds", "2", "--json", "--model", PRESET, "--pos", "16", "--max-context", "256",
         "--bank", "2", "--copy-mib", "8"]
  out = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "DEV": "CPU"}, capture_output=True, text=True, timeout=300)
  assert out.returncode == 0, out.stderr[-2000:]
  res = json.loads(out.stdout)
  import apply_patches
  h = res["header"]
  assert h["device"] == "CPU" and h["tinygrad_series"] == apply_patches.series_key() and h["BEAM"] == 0 and h["bandwidth_GBps"] > 0
  assert list(res["results"]) == list(bb.DEFAULT_TARGETS)
  for t, r in res["results"].items():
    assert len(r["rounds"]) == 2 and all(x["n"] == 3 for x in r["rounds"])
    assert all(x["p10"] <= x["median"] <= x["p90"] and x["iqr"] >= 0 and x["mad"] >= 0 for x in r["rounds"])
    assert r["median"] == np.median(r["round_medians"])
    # CPU: the step's kernels replay in graphs (patches/0040), which tinygrad's counter counts a launch each; decode reads its
    # token from the model's device state, so no input copy is launched either
    assert r["launches"] == r["counter_kernels"] and 0 < r["launches"] < r["kernels"]
    assert r["weight_bytes"] > 0 and r["est_bytes"] > 0
    assert r["floor_ms"] == pytest.approx((r["weight_bytes"] + r["cache_bytes"]) / (h["bandwidth_GBps"] * 1e9) * 1e3)
  s, d, blk = res["results"]["stack"], res["results"]["decode"], res["results"]["block"]
  assert s["tok_s"] == pytest.approx(1e3 / s["ms"]) and blk["ms_per_block"] == pytest.approx(blk["ms"] / 2)
  assert d["weight_bytes"] > s["weight_bytes"] and d["kernels"] > s["kernels"]  # the head and sampler on top of the stack

def test_fill_is_one_prefill_chunk(bench):
  """The fill target runs Transformer._fill on a chunk of the shortest prefill length at pos: its output is the eager stack's last row for
  the same tokens and cache, it is timed per chunk (tok/s = tokens / time), and its weights are every tensor whole."""
  m = bench.m
  step = bench.step("fill")
  T = m.prefill_chunks[-1]
  assert step.tokens == T and step.per == "chunk" and T > 1
  r = bb.measure(step, 2, 1)
  assert r["tok_s"] == pytest.approx(T * 1e3 / r["ms"]) and r["kernels"] > 0
  assert r["weight_bytes"] == bb.active_weight_bytes(m, whole=True)["total"] > bb.active_weight_bytes(m)["total"]
  assert r["cache_bytes"] == bb.cache_bytes(m, m.cfg.n_layer, bench.pos, T)
  jit_out = step.fn(*step.args(0)).numpy()
  eager = m.hidden(Tensor(bench.fill_ids[bench.pos:bench.pos + T], device=m.device), bench.pos)[-1:].numpy()
  np.testing.assert_allclose(jit_out, eager, rtol=1e-4, atol=1e-4)
  from tools import profile
  res = profile.profile(bench, "fill", repeat=1, count=1)
  assert len(res["rows"]) == res["kernels"] and {"attention", "experts", "router"} <= {row.part for row in res["rows"]}

def test_prompt_is_the_last_prefill_chunk(bench):
  """The prompt target runs the chunk as generate() runs a prompt's last one (Transformer._prompt): the fill's kernels
  plus the head and the sampling; the greedy token it leaves in the model's token buffer is the argmax of the eager
  logits of the chunk's last row."""
  m = bench.m
  fill, prompt = bench.step("fill"), bench.step("prompt")
  T = m.prefill_chunks[-1]
  assert prompt.tokens == T and prompt.per == "chunk"
  r, rf = bb.measure(prompt, 2, 1), bb.measure(fill, 2, 1)
  assert r["kernels"] > rf["kernels"] and r["tok_s"] == pytest.approx(T * 1e3 / r["ms"])
  prompt.fn(*prompt.args(0))
  ids = Tensor(bench.fill_ids[bench.pos:bench.pos + T], device=m.device)
  assert m.token.item() == int(m.head(m.hidden(ids, bench.pos)[-1:]).numpy()[0].argmax())

def test_bench_block_bad_model():
  out = subprocess.run([sys.executable, "bench_block.py", "--model", "no-such-model"], cwd=ROOT, env={**os.environ, "DEV": "CPU"},
                       capture_output=True, text=True, timeout=120)
  assert out.returncode != 0 and "unknown model 'no-such-model'" in out.stderr and "Traceback" not in out.stderr

# ---------------------------------------------------------------- profile

def test_profile_attributes_kernels_to_parts(bench):
  from tools import profile
  res = profile.profile(bench, "decode", repeat=1, count=2)
  rows = res["rows"]
  assert len(rows) == res["kernels"] and all(r.time_s > 0 for r in rows)
  parts = {r.part for r in rows}
  assert {"attention", "router", "experts", "shared_expert", "dense_ffn", "norms", "embedding", "output", "sampling"} <= parts
  for r in rows:
    if "_experts_" in r.name: assert r.part == "experts"
    if "_batched_" in r.name: assert r.part == "attention"
  # every weight is read by exactly one kernel per token: the kernels' weight bytes add up to active_weight_bytes
  assert sum(r.weight_bytes for r in rows) == bb.active_weight_bytes(bench.m)["total"]
  assert sum(r.cache_bytes for r in rows) >= bb.cache_bytes(bench.m, bench.m.cfg.n_layer, bench.pos)
  assert any(r.part == "norms" and r.how == "norms-consumer" for r in rows)  # the rms reductions
  assert "experts" in "\n".join(profile.report(res))

def test_profile_critical_path(bench):
  """Each kernel waits for earlier ones only (the writers of what it touches, the readers of what it writes); the critical
  path is a chain of such waits through every block, and the longest by time: a kernel off it made slow enough joins it."""
  from tools import profile
  res = profile.profile(bench, "decode", repeat=1, count=1)
  rows = res["rows"]
  assert all(d < r.index for r in rows for d in r.deps) and sum(bool(r.deps) for r in rows) > len(rows) // 2
  path = profile.critical_path(rows)
  assert all(path[k] in rows[path[k + 1]].deps for k in range(len(path) - 1)) and not rows[path[0]].deps
  assert {rows[i].block for i in path if rows[i].block >= 0} == set(range(bench.m.cfg.n_layer))
  assert "critical path:" in "\n".join(profile.report(res))
  off = next(r for r in rows if r.index not in path and r.deps)
  off.time_s = 2 * sum(r.time_s for r in rows)
  assert off.index in profile.critical_path(rows)

def test_profile_batched_step():
  """`tools.profile --batch N`: the batched decode step (Transformer.step's capture) of N sequences at --pos, each in its slot:
  one step writes a token a row, each row continuing a token of its own (as the server's sequences do: one token repeated
  would route every row of a MoE model to the same experts), each row's token what that token alone gives at that position;
  the profile attributes its kernels to the model's parts."""
  m = bb.load_model(bb.resolve_model(PRESET), 64, bb.DEFAULT_SPLIT_MASK, slots=2)
  bench = bb.Bench(m, 16, 2, rows=2)
  step = bench.step("decode")
  assert step.per == "step" and step.tokens == 2 and step.cache == 2 * bb.cache_bytes(m, m.cfg.n_layer, 16)
  last = m.slot_tokens.tolist()
  step.fn(*step.args(0))
  got = m._row_out[:2].tolist()
  assert last[0] != last[1] and all(0 <= t < m.cfg.vocab_size for t in got)
  for b in range(2):   # each row alone: its token at position 16 over an empty cache, one row of the same step
    for c in m.caches: c.assign(c.zeros_like()).realize()
    m.slot_tokens.assign(Tensor([last[b]] * 2, dtype=m.slot_tokens.dtype, device=m.device)).realize()
    step.fn(*step.args(0))
    assert m._row_out[:2].tolist() == [got[b]] * 2, b
  from tools import profile
  res = profile.profile(bench, "decode", repeat=1, count=1)
  assert len(res["rows"]) == res["kernels"] and {"attention", "experts", "output", "sampling"} <= {r.part for r in res["rows"]}
  # its weight bytes: the routed experts two distinct tokens reach (more than one token's k), the rest once
  two, one = bb.active_weight_bytes(m, tokens=2)["total"], bb.active_weight_bytes(m)["total"]
  assert step.weights["total"] == two > one
  assert sum(r.weight_bytes for r in res["rows"]) == pytest.approx(two, abs=len(res["rows"]))   # (rounded a tensor at a time)
  with pytest.raises(SystemExit, match="3 rows need a model of as many slots"): bb.Bench(m, 16, 2, rows=3)

def test_weight_share_of_several_tokens():
  """WeightRef.share: a routed expert tensor's share that n distinct tokens reach, each choosing k of E experts uniformly,
  is 1 - (1 - k/E)^n (k/E for one token, all of it for many); an embedding a row a token; any other tensor whole."""
  exps = bb.WeightRef(0, "ffn_gate_exps", "experts", "ffn", (), 64 * 1000, 6 / 64)
  assert exps.share(1) == 6 / 64 and exps.share(8) == pytest.approx(1 - (58 / 64) ** 8) and exps.share(400) == pytest.approx(1.0)
  assert exps.reached(8) == round(64 * 1000 * (1 - (58 / 64) ** 8))
  emb = bb.WeightRef(-1, "token_embd", "embedding", "model", (), 1000 * 64, 1 / 1000)
  assert emb.share(8) == pytest.approx(8 / 1000) and emb.share(5000) == 1.0
  assert bb.WeightRef(0, "attn_q_b", "attention", "attn", (), 10, 1.0).share(8) == 1.0

def test_profile_mixed_step():
  """`tools.profile --target mixed --batch N --chunk C`: the batched step of N sequences with a prompt's chunk of C tokens
  (slot N) as further rows (Transformer._step_mixed, as launch(slots, prompt) runs it): its rows' tokens are the decode
  step's (the chunk is another sequence's), the chunk's latents land in slot N's cache rows at --pos, and the profile
  attributes its kernels to the model's parts; a model without the spare slot is refused."""
  m = bb.load_model(bb.resolve_model(PRESET), 64, bb.DEFAULT_SPLIT_MASK, slots=3)
  m.set_prefill_chunks(8)
  bench = bb.Bench(m, 16, 2, rows=2)
  step = bench.step("decode")
  step.fn(*step.args(0))
  want = m._row_out[:2].tolist()
  for c in m.caches: c.assign(c.zeros_like()).realize()
  step = bench.step("mixed")                                       # the rows' last tokens set as the decode step's were
  assert step.per == "step" and step.tokens == 2 + 8
  step.fn(*step.args(0))
  assert m._row_out[:2].tolist() == want
  chunk_rows = m.caches[0].numpy()[2 * m.max_context + 16:2 * m.max_context + 24]
  assert np.abs(chunk_rows).max(-1).min() > 0                                              # every row of the chunk written
  assert not np.abs(m.caches[0].numpy()[2 * m.max_context + 24:]).any()                    # nothing past it
  from tools import profile
  res = profile.profile(bench, "mixed", repeat=1, count=1)
  assert len(res["rows"]) == res["kernels"] and {"attention", "output", "sampling"} <= {r.part for r in res["rows"]}
  with pytest.raises(SystemExit, match="a mixed step of 3 rows needs a model of 4 slots"): bb.Bench(m, 16, 2, rows=3).step("mixed")

def test_beam_kernels_runs_each_pick_on_the_kernels_buffers(capsys):
  """`tools.beam_kernels`: a decode step's slowest kernel searched at BEAM=1 on the CPU and its pick run on the buffers of
  the kernel's call: one row with both times, and the pick's outputs the heuristics' from the same inputs, to fp32's rounding
  of the product's 256 terms (which pick wins depends on the timings; one that splits the sum otherwise rounds otherwise)."""
  from tools import beam_kernels
  assert beam_kernels.main(["--model", PRESET, "--target", "decode", "--pos", "8", "--max-context", "64", "--top", "1",
                            "--beam", "1", "--repeat", "1", "--kernels", "generated"]) == 0
  out = capsys.readouterr().out.splitlines()
  row = out[out.index(next(line for line in out if line.startswith("kernel "))) + 1].split()
  heur_us, beam_us, diff = float(row[3]), float(row[4]), float(row[6])
  assert heur_us > 0 and beam_us > 0 and diff <= 4 * 256 ** 0.5 * 2.0 ** -24 + 2.0 ** -22 and "WRONG" not in row, row

def test_profile_takes_nsight_compute_times(bench, tmp_path, capsys):
  """--ncu-csv: each program's time and DRAM bytes come from the CSV, in launch order; copies are not in the CSV."""
  from tools import profile
  res = profile.profile(bench, "decode", repeat=1, count=1)
  doc = json.loads(json.dumps({"header": {"pos": bench.pos}, **{k: v for k, v in res.items() if k != "rows"},
                               "rows": [dataclasses.asdict(r) for r in res["rows"]]}, default=str))
  progs = [r for r in res["rows"] if r.kernel]
  head = '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC",' \
         '"Section Name","Metric Name","Metric Unit","Metric Value"'
  lines = ["==PROF== Connected to process 1", head]
  for i, r in enumerate(progs):
    for metric, unit, v in (("dram__bytes_read.sum", "Kbyte", "1,024.00"), ("dram__bytes_write.sum", "byte", "0"),
                            ("gpu__time_duration.sum", "usecond", f"{i + 1}.50")):
      lines.append(f'"{i}","1","python3","h","{r.name}","1","7","(32, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","{metric}","{unit}","{v}"')  # noqa: E501
  (tmp_path / "ncu.csv").write_text("\n".join(lines) + "\n")
  merged = profile.merge_ncu(doc, profile.read_ncu_csv(tmp_path / "ncu.csv"))
  got = [r for r in merged["rows"] if r.kernel]
  assert [r.time_s for r in got] == pytest.approx([(i + 1.5) * 1e-6 for i in range(len(progs))])
  assert all(r.dram_bytes == 1_024_000 for r in got)
  assert merged["kernel_sum_s"] == pytest.approx(sum((i + 1.5) * 1e-6 for i in range(len(progs))))
  text = "\n".join(profile.report(merged))
  assert "Nsight Compute" in text and "DRAM GB/s" in text
  with pytest.raises(SystemExit, match="kernels in the CSV"):
    profile.merge_ncu(doc, profile.read_ncu_csv(tmp_path / "ncu.csv")[:-1])
  # --like: another step's kernels take the measured times by name (a name's median), its critical path from them
  other, missing = profile.timed_by_name(merged["rows"], profile.rows_of(doc))
  name = progs[0].name
  same = sorted(r.time_s for r in got if r.name == name)
  assert not missing and all(r.time_s == same[len(same) // 2] for r in other if r.name == name)
  (tmp_path / "rows.json").write_text(json.dumps(doc))
  capsys.readouterr()
  assert profile.main(["--ncu-csv", str(tmp_path / "ncu.csv"), "--rows", str(tmp_path / "rows.json"), "--like", str(tmp_path / "rows.json")]) == 0
  assert capsys.readouterr().out.startswith(f"{tmp_path / 'rows.json'}: critical path: ")

def test_profile_reads_a_nsight_compute_csv_alone(tmp_path, capsys):
  """--ncu-csv without --rows (its run's JSON lost, or a pass cut short): the kernels summed by name, the slowest first."""
  from tools import profile
  head = '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC",' \
         '"Section Name","Metric Name","Metric Unit","Metric Value"'
  lines = [head]
  for i, (name, ns) in enumerate((("small", "1,000"), ("big", "5,000"), ("small", "2,000"))):
    for metric, unit, v in (("dram__bytes_read.sum", "byte", "3,000"), ("gpu__time_duration.sum", "ns", ns)):
      lines.append(f'"{i}","1","python3","h","{name}","1","7","(32, 1, 1)","(1, 1, 1)","0","9.0","metrics","{metric}","{unit}","{v}"')
  (tmp_path / "ncu.csv").write_text("\n".join(lines) + "\n")
  assert profile.main(["--ncu-csv", str(tmp_path / "ncu.csv")]) == 0
  out = capsys.readouterr().out.splitlines()
  assert out[0].startswith("device times (Nsight Compute): 0.008 ms over 3 kernels, 2 distinct"), out[0]
  big, small = out[2].split(), out[3].split()
  assert big[:4] == ["big", "1", "5.0", "62.5%"] and small[:5] == ["small", "2", "3.0", "37.5%", "1.5"], out

# ---------------------------------------------------------------- search2 on a fake module with a known cost

def fake_module(weights, beam_bonus=0.0, no_op=(), fail_after=None):
  """cost(mask, beam) = 10 + sum of the weights of set bits - beam_bonus * beam * bit0; bits in no_op do not change the kernels."""
  mod = types.ModuleType("fakebench")
  mod.SPLIT_POINTS = tuple(f"p{i}" for i in range(len(weights)))
  mod.DEFAULT_SPLIT_MASK = 0
  mod.calls, mod.keys = [], []
  live = sum(1 << i for i in range(len(weights)) if i not in no_op)
  def bench_mask(mask, iters, beam):
    if fail_after is not None and len(mod.calls) >= fail_after: raise KeyboardInterrupt
    mod.calls.append((mask, beam))
    return 10 + sum(w for i, w in enumerate(weights) if mask >> i & 1) - beam_bonus * beam * (mask & 1)
  mod.bench_mask = bench_mask
  mod.cache_key = lambda: f"fake{weights}{beam_bonus}"
  if no_op:
    def graph_key(mask):
      mod.keys.append(mask)
      return str(mask & live)
    mod.graph_key = graph_key
  return mod

def run_search(mod, tmp_path, *args):
  return search2.main(["--cache-dir", str(tmp_path), *args], module=mod, log=lambda *a: None)

W = [0.5, -0.8, 0.3, -0.2, 0.1, -0.4]

def test_exhaustive_finds_the_optimum_and_writes_outputs(tmp_path):
  mod = fake_module(W)
  out = run_search(mod, tmp_path, "--mode", "exhaustive")
  best = min(range(64), key=lambda m: 10 + sum(w for i, w in enumerate(W) if m >> i & 1))
  assert out["best"]["mask"] == best == 0b101010 and len(mod.calls) == 64
  assert out["default_line"].startswith("DEFAULT_SPLIT_MASK = 0b101010  # p1+p3+p5")
  files = {k: Path(v) for k, v in out["files"].items()}
  rows = files["csv"].read_text().splitlines()
  assert rows[0].startswith("rank,mask,bits,splits,ms,best_beam") and len(rows) == 65 and rows[1].split(",")[1] == str(best)
  assert json.loads(files["json"].read_text())["best"]["mask"] == best
  png = files["png"].read_bytes()
  assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR"
  w, h = struct.unpack(">II", png[16:24])
  idat = png.index(b"IDAT")
  raw = zlib.decompress(png[idat + 4:idat + 4 + struct.unpack(">I", png[idat - 4:idat])[0]])
  assert len(raw) == h * (1 + 3 * w)
  pixels = {raw[i:i + 3] for y in range(h) for i in range(y * (1 + 3 * w) + 1, (y + 1) * (1 + 3 * w), 3)}
  assert bytes(search2.PALETTE[0]) in pixels and bytes((220, 30, 30)) in pixels  # the points and the ring around the best

def test_greedy_reaches_the_optimum_of_a_separable_cost(tmp_path):
  mod = fake_module(W)
  out = run_search(mod, tmp_path, "--mode", "greedy", "--min-gain", "0")
  assert out["best"]["mask"] == 0b101010
  path = [p["ms"] for p in out["greedy_path"]]
  assert path == sorted(path, reverse=True) and len(path) == 4  # three helpful bits, taken best first
  assert [p["mask"] for p in out["greedy_path"]][1] == 0b000010     # p1 (-0.8) first
  assert len(mod.calls) < 64

def test_random_sample(tmp_path):
  mod = fake_module(W)
  out = run_search(mod, tmp_path, "--mode", "random", "--samples", "10", "--seed", "3")
  masks = [r["mask"] for r in out["rows"]]
  assert len(set(masks)) == 10 and 0 in masks and len(mod.calls) == 10
  assert out["best"]["ms"] == min(r["ms"] for r in out["rows"])

def test_coupled_search_over_beam(tmp_path):
  """With BEAM=2 bit 0 pays off (0.5 - 1.0 * 2 = -1.5): the best mask changes with the BEAM level, and the coupled search finds both."""
  mod = fake_module(W, beam_bonus=1.0)
  out = run_search(mod, tmp_path, "--mode", "exhaustive", "--beams", "0,2")
  assert out["per_beam_best"]["0"]["mask"] == 0b101010 and out["per_beam_best"]["2"]["mask"] == 0b101011
  assert (out["best"]["mask"], out["best"]["beam"]) == (0b101011, 2) and len(mod.calls) == 128

def test_resume_measures_nothing_twice(tmp_path):
  mod = fake_module(W)
  with pytest.raises(KeyboardInterrupt): run_search(fake_module(W, fail_after=20), tmp_path, "--mode", "exhaustive", "--repeat", "2")
  out = run_search(mod, tmp_path, "--mode", "exhaustive", "--repeat", "2")
  assert len(mod.calls) == 128 - 20 and out["measured_now"] == 108
  again = fake_module(W)
  out2 = run_search(again, tmp_path, "--mode", "exhaustive", "--repeat", "2")
  assert again.calls == [] and out2["measured_now"] == 0 and out2["best"] == out["best"]

def test_repeat_scores_the_median(tmp_path):
  mod = fake_module([0.0, 0.0])
  noise = iter([5.0, 1.0, 3.0] * 4)
  mod.bench_mask = lambda mask, iters, beam: next(noise) + mask
  out = run_search(mod, tmp_path, "--mode", "exhaustive", "--repeat", "3")
  # passes interleave the masks, so each mask sees the noise in another order; the median removes it
  assert {r["mask"]: r["ms"] for r in out["rows"]} == {m: 3.0 + m for m in range(4)}
  assert all(sorted(r["reps"]["0"]) == [1.0 + r["mask"], 3.0 + r["mask"], 5.0 + r["mask"]] for r in out["rows"])

def test_graph_key_skips_no_op_bits(tmp_path):
  mod = fake_module(W, no_op=(3, 4, 5))
  out = run_search(mod, tmp_path, "--mode", "exhaustive")
  assert len(mod.calls) == 8 and len(mod.keys) == 64 and out["distinct_graphs"] == 8
  assert out["no_op_bits"] == ["p3", "p4", "p5"] and out["best"]["mask"] == 0b000010
  again = fake_module(W, no_op=(3, 4, 5))
  run_search(again, tmp_path, "--mode", "exhaustive")
  assert again.calls == [] and again.keys == []  # graph keys are cached too

def test_bits_restrict_the_space(tmp_path):
  mod = fake_module(W)
  out = run_search(mod, tmp_path, "--mode", "exhaustive", "--bits", "p0,p1", "--base", "32")
  assert sorted(r["mask"] for r in out["rows"]) == [32, 33, 34, 35] and out["best"]["mask"] == 34

def test_cache_of_another_configuration_is_refused(tmp_path):
  run_search(fake_module(W), tmp_path, "--mode", "exhaustive", "--bits", "p0")
  stem = next(tmp_path.glob("*.jsonl"))
  # a file whose first line names another configuration (a hash collision or a hand-copied file) is not mixed in
  lines = stem.read_text().splitlines()
  stem.write_text(json.dumps({"key": "foreign"}) + "\n" + "\n".join(lines[1:]) + "\n")
  with pytest.raises(SystemExit, match="another configuration"): run_search(fake_module(W), tmp_path, "--mode", "exhaustive", "--bits", "p0")

def test_search2_drives_bench_block(tmp_path, bench):
  """The real module through the generic interface: graph keys dedupe the masks, results land in the cache."""
  out = search2.main(["--cache-dir", str(tmp_path), "--mode", "random", "--samples", "3", "--iters", "2", "--", "--model", PRESET,
                      "--target", "block", "--bank", "2", "--pos", "16", "--max-context", "256"], log=lambda *a: None)
  assert out["module"] == "bench_block" and 1 <= out["measured_now"] <= 3 and out["graph_keys_now"] == 3
  assert all(r["ms"] > 0 for r in out["rows"])

def test_prefill_probe_parts_add_up(capsys):
  """tools/prefill_probe.py on a tiny model (CPU): the steady replays and the parts of one prefill (host set-up, each chunk
  of the model's lengths, the first token's read), whose sum is about the whole."""
  from tools import prefill_probe
  assert prefill_probe.main(["--presets", "youtu-llm-2b-tiny", "--prefill", "40", "--runs", "1", "--chunks", "32+8"]) == 0
  out = capsys.readouterr().out
  assert "chunks 32+8, prompt 40" in out and "steady median" in out
  for part in ("sampler.configure", "token buffer", "chunk 0..31 (length 32)", "chunk 32..39 (last, length 8)", "read first token",
               "the first chunk without head (fill)", "the same, 4 calls back to back, per call", "graphs: host sum, device sum"):
    assert part in out, out
  # each part's time to the sync and, in parentheses, the call's own (the host's share): never more than the whole
  for line in out.splitlines():
    if (pairs := re.findall(r"([\d.]+) \(\s*([\d.]+)\)", line)):
      assert len(pairs) == 3 and all(float(host) <= float(total) for total, host in pairs), line

def test_bench_quantized_opts_variants():
  """tools.bench_quantized times a generated product under variants of its opts in interleaved rounds: each variant a row
  with a time per round and its output checked against float64; one whose opts do not apply is left out, said so."""
  cmd = [sys.executable, "-m", "tools.bench_quantized", "--quick", "--types", "Q4_0", "--kernels", "generated", "--shapes", "128:256:r",
         "--opts", "heur", "R1:0,R2:0,R1:0,U0:4", "U0:7", "--rounds", "2", "--dtype", "float"]
  out = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "DEV": "CPU"}, capture_output=True, text=True, timeout=300)
  assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
  assert re.search(r"U0:7: left out \(KernelOptError", out.stdout)
  rows = [l for l in out.stdout.splitlines() if l.startswith("  Q4_0  128x256+r") and "rounds" in l]
  assert [l.split("rounds")[0].split()[-1] for l in rows] == ["heur", "R1:0,R2:0,R1:0,U0:4"]
  assert all(len(l.split("rounds")[1].split()) == 2 for l in rows)
  assert "all 2 shapes match the float64 reference" in out.stdout

def test_start_time_times_the_load_step_by_step(tmp_path):
  """tools.start_time --repeat 2 --calls --cli --sampled: two second processes, each with its load's steps timed (the uploads,
  the wait for the device), the same first token as the first process's (drawn with the CLI's default sampling, seeded);
  and the CLI's own time to its first printed byte, twice."""
  out = tmp_path / "start.json"
  cmd = [sys.executable, "-m", "tools.start_time", "--presets", "youtu-llm-2b-tiny", "--repeat", "2", "--calls", "--cli", "--sampled",
         "--json", str(out)]
  r = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "DEV": "CPU"}, capture_output=True, text=True, timeout=600)
  assert r.returncode == 0, r.stderr[-2000:]
  row = json.loads(out.read_text())[0]
  assert row["sampled"] and "(default sampling) first:" in r.stdout
  assert len(row["seconds_first_token_s"]) == 2 and row["second"]["first_token_s"] in row["seconds_first_token_s"]
  calls = row["second"]["load_calls"]
  assert row["second"]["token"] == row["first"]["token"] and calls["Opening.wait"][0] == 1 and calls["PackedTensor.upload"][0] > 0
  assert all(n > 0 and 0 <= longest <= total for n, total, longest in calls.values())
  assert "second load, step by step" in r.stdout
  assert len(row["cli_first_token_s"]) == 2 and all(0 < t < 60 for t in row["cli_first_token_s"]) and "llm.py -p: first token at" in r.stdout

def test_start_time_times_a_server_to_ready(tmp_path):
  """tools.start_time --serve 2: llm.py --serve with 2 slots to its /health answering and to its warmup's last capture (the
  step of 2 rows, made after it answers), a first server (its warmup captures the steps) and two later ones, the slower
  dropped (they load them: faster)."""
  out = tmp_path / "start.json"
  cmd = [sys.executable, "-m", "tools.start_time", "--presets", "youtu-llm-2b-tiny", "--serve", "2", "--json", str(out)]
  r = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "DEV": "CPU"}, capture_output=True, text=True, timeout=900)
  assert r.returncode == 0, r.stderr[-2000:]
  row = json.loads(out.read_text())[0]
  s, w = row["serve_ready_s"], row["serve_warm_s"]
  assert s["slots"] == 2 and len(s["later"]) == 1 and max(s["later"]) < s["first"], s
  assert w["first"] > s["first"] and max(w["later"]) < w["first"] and all(a <= b for a, b in zip(s["later"], w["later"])), row
  assert "llm.py --serve (2 slots) ready at" in r.stdout and "warm at" in r.stdout

def test_start_time_writes_the_missing_bytecode(tmp_path):
  """tools.start_time's set-up: bytecode for imported sources outside the tree that lack it (or whose bytecode is stale), and
  has_bytecode's rule is importlib's: a process then runs the cached code, not the source (same size and mtime, other text)."""
  from tools import start_time as stt
  pkg = tmp_path / "pkg_bc"
  pkg.mkdir()
  (pkg / "__init__.py").write_text("")
  (pkg / "mod.py").write_text("Y = 2\n")
  srcs = {"pkg_bc": str(pkg / "__init__.py"), "pkg_bc.mod": str(pkg / "mod.py")}
  assert not any(stt.has_bytecode(f) for f in srcs.values())
  assert stt.write_bytecode(srcs) == {"pkg_bc": 2} and all(stt.has_bytecode(f) for f in srcs.values()) and stt.write_bytecode(srcs) == {}
  st0 = os.stat(pkg / "mod.py")
  (pkg / "mod.py").write_text("Y = 3\n")
  os.utime(pkg / "mod.py", ns=(st0.st_atime_ns, st0.st_mtime_ns))
  assert stt.has_bytecode(srcs["pkg_bc.mod"])
  run = lambda: subprocess.run([sys.executable, "-c", "import pkg_bc.mod; print(pkg_bc.mod.Y)"], cwd=tmp_path, capture_output=True, text=True,
                               env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(tmp_path)}).stdout.strip()
  assert run() == "2"                           # the cached code ran
  (pkg / "mod.py").write_text("Y = 33\n")        # another size: stale, compiled again
  assert not stt.has_bytecode(srcs["pkg_bc.mod"]) and stt.write_bytecode(srcs) == {"pkg_bc": 1} and run() == "33"
  import apps.engine
  assert stt.outside_sources({"apps.engine": apps.engine, "pkg_bc.mod": types.SimpleNamespace(__file__=srcs["pkg_bc.mod"])}) == \
    {"pkg_bc.mod": srcs["pkg_bc.mod"]}

def test_sass_mix_counts_the_mma_loop():
  """tools.sass_mix: of cuobjdump's SASS, the innermost loop that holds the mma instructions (not the outer loop around
  it, not a loop without them) is counted by opcode, predicates and modifiers dropped."""
  from tools import sass_mix
  lines = ["IMAD.MOV.U32 R1, RZ, RZ, c[0x0][0x28]", "LDS R2, [R3]", "ISETP.GE.AND P0, PT, R2, 0x8, PT",   # 0x00-0x20
           "LDGSTS.E.BYPASS.128 [R4], desc[UR4][R6.64]", "IMMA.16832.S8.S8 R8, R12, R16, R8", "LOP3.LUT R5, R5, 0xf0f, RZ, 0xc0, !PT",
           "IMMA.16832.S8.S8 R20, R12, R18, R20", "I2FP.F32.S32 R9, R8", "FFMA R30, R9, R31, R30", "@P0 BRA 0x30",   # 0x30-0x90
           "@!P1 BRA 0x10", "IADD3 R1, R1, 0x1, RZ", "@P2 BRA 0xb0", "EXIT"]   # 0xa0: the outer loop; 0xc0: one without mma
  sass = "\n".join(f"        /*{16 * i:04x}*/                   {t} ;   /* 0x0 */" for i, t in enumerate(lines))
  lp = sass_mix.mma_loop(sass)
  assert (lp.start, lp.end) == (0x30, 0x90) and lp.size == 7 and lp.kind("mma") == 2 and lp.ops["BRA"] == 1
  assert lp.kind("float") == 2 and lp.kind("integer") == 1 and lp.kind("global") == 1
  with pytest.raises(ValueError, match="no loop holds an mma"): sass_mix.mma_loop(sass.replace("IMMA", "IADD3"))

def test_ncu_source_ranks_instructions(tmp_path, capsys):
  """tools.ncu_source: the hottest SASS instructions of an Nsight Compute source page first, with their largest stalls, and
  the samples by instruction kind; a CSV without stall samples is a one-line error."""
  from tools import ncu_source
  f = tmp_path / "src.csv"
  f.write_text('"Kernel Name","k",\n"Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)",'
               '"stall_long_sb","stall_barrier"\n"0x10","LDG.E.128 R4, desc[UR4][R2.64]","100","90","80","0"\n'
               '"0x20","@P0 BAR.SYNC.DEFER_BLOCKING 0x0","50","50","0","45"\n"0x30","HMMA.1688.F32.TF32 R8, R4, R2, R8","1,200","10","0","0"\n')
  ncu_source.main([str(f)])
  out = capsys.readouterr().out.splitlines()
  assert out[0].startswith("3 instructions, 1350 samples") and out[1].startswith("by kind: HMMA 88.9%, LDG 7.4%, BAR 3.7%")
  assert [l.split()[2] for l in out[2:]] == ["HMMA.1688.F32.TF32", "LDG.E.128", "@P0"] and "stall_long_sb 80" in out[3]
  f.write_text('"Address","Source","Instructions Executed"\n"0x10","NOP","3"\n')
  with pytest.raises(SystemExit, match="no warp stall sampling column"): ncu_source.main([str(f)])
