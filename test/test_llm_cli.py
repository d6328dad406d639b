"""apps/llm.py, the command line: completion, chat REPL, benchmark, model resolution and download, one-line errors.

Most runs call llm.main() in this process (after the module's engine has compiled the kernels, a new load is quick); one
chat session runs `python apps/llm.py` as a script with a pipe on stdin, as a user would. Expected replies come from the
model and tokenizer APIs directly (apps.model.Transformer.generate, Tokenizer.piece), never from the CLI's own output.
"""
import http.server, io, json, os, signal, socket, subprocess, sys, threading, time
from pathlib import Path
import numpy as np
import pytest
from hypothesis import given, strategies as st
from apps import llm, models, synth
from apps.gguf import GGUFWriter, ValueType
from apps.engine import Engine, StopStrings, resolve_model
from apps.sampling import Params

ROOT = Path(__file__).resolve().parent.parent
PRESET, CTX = "glm-4.7-flash-tiny", 256  # one max_context everywhere: every load reuses the kernels compiled in this process
GREEDY = ["--temperature", "0"]

@pytest.fixture(scope="module")
def eng():
  e = Engine.load(resolve_model(PRESET, None, None), CTX, quiet=True)
  e.warmup(Params())
  return e

def reference(eng: Engine, ids: list[int], n: int, params: Params | None = None) -> str:
  """The text a fresh greedy (or seeded) generation prints: the pieces of the tokens before EOG, as llama.cpp streams them."""
  eng.model.reset()
  toks = list(eng.model.generate(ids, n, params or Params(), stop=eng.tok.is_eog))
  eng.model.reset()
  return b"".join(eng.tok.piece(t, False) for t in toks if not eng.tok.is_eog(t)).decode("utf-8", "replace")

def run_main(argv, capsys) -> tuple[int, str, str]:
  try: rc = llm.main(argv)
  except SystemExit as e: rc = e.code
  out, err = capsys.readouterr()
  return rc, out, err

def one_error_line(err: str, rc: int, want_rc: int, fragment: str) -> None:
  """The run ended with exactly one error line (after any progress lines), naming the problem; no traceback."""
  lines = err.strip().splitlines()
  assert rc == want_rc, err
  assert "Traceback" not in err
  assert [ln for ln in lines if "error" in ln] == lines[-1:] and lines[-1].startswith("llm: error: ") and fragment in lines[-1], err

# ---------------------------------------------------------------- completion

PROMPT = "Once upon a time"

def test_prompt_completion_is_the_greedy_continuation(eng, capsys):
  want = reference(eng, eng.text_ids(PROMPT), 12)
  rc, out, err = run_main(["--model", PRESET, "--max-context", str(CTX), "--prompt", PROMPT, "--count", "12", *GREEDY, "-v"], capsys)
  assert rc == 0, err
  assert out == want + "\n"
  assert "block 5/5 loaded" in err  # loading shows progress
  assert "(weights at " in err and " GB/s)" in err  # and how fast the weights went to the device
  assert "reply 12 tokens" in err or "finish: stop" in err

def test_load_phases(eng):
  """Engine.load times its phases (what tools.start_time reports): the metadata and tokenizer, the wait for the device
  past them, the weights' upload; each took time and together they fit in the load."""
  t0 = time.perf_counter()
  e = Engine.load(eng.source, CTX, quiet=True)
  wall = time.perf_counter() - t0
  assert set(e.load_seconds) == {"metadata", "device", "weights"}
  assert all(v >= 0 for v in e.load_seconds.values()) and e.load_seconds["metadata"] > 0 and e.load_seconds["weights"] > 0
  assert sum(e.load_seconds.values()) <= wall

def test_f16_cache_flag(capsys):
  """--cache-type f16 loads the model with an fp16 latent cache (the load line says so, with its size a token) and completes."""
  rc, out, err = run_main(["--model", PRESET, "--max-context", str(CTX), "--cache-type", "f16", "--prompt", PROMPT, "-n", "4", *GREEDY], capsys)
  assert rc == 0 and out.strip(), err
  assert "KiB of f16 latent cache a token" in err, err

def test_default_context_is_what_fits(capsys):
  """Without --max-context the context is the longest the device holds, up to the model's trained length (the tiny
  presets': 8192, which a CPU holds)."""
  rc, out, err = run_main(["--model", PRESET, "--prompt", PROMPT, "-n", "2", *GREEDY], capsys)
  assert rc == 0 and "context 8192 tokens" in err, err

def test_stop_string_cuts_the_text(eng, capsys):
  text = reference(eng, eng.text_ids(PROMPT), 12)
  # a 3-character stop string from the middle of the reply (its first occurrence), wherever the token boundaries fall
  k = next(k for k in range(len(text) // 3, len(text) - 3) if text[k:k + 3].strip() and text.find(text[k:k + 3]) == k)
  stop = text[k:k + 3]
  rc, out, err = run_main(["--model", PRESET, "--max-context", str(CTX), "--prompt", PROMPT, "--count", "12", *GREEDY, "--stop", stop, "-v"], capsys)
  assert rc == 0, err
  assert out == text[:k] + "\n"
  assert "finish: stop" in err

def test_chat_prompt_uses_the_template(eng, capsys):
  want = reference(eng, eng.chat_ids([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]), 8)
  rc, out, err = run_main(["--model", PRESET, "--max-context", str(CTX), "--prompt", "Hi", "--chat", "--system", "Be brief.", "-n", "8", *GREEDY],
                          capsys)
  assert rc == 0, err
  assert out == want + "\n"

def test_sampling_is_seeded(eng, capsys):
  ids = eng.text_ids(PROMPT)
  want = reference(eng, ids, 10, Params(temperature=0.9, seed=5))
  assert want != reference(eng, ids, 10)  # the draw matters at this temperature
  flags = ["--model", PRESET, "--max-context", str(CTX), "--prompt", PROMPT, "-n", "10", "--temperature", "0.9", "--top-k", "0",
           "--top-p", "1", "--min-p", "0"]
  outs = [run_main(flags + ["--seed", s], capsys)[1] for s in ("5", "6")]
  assert outs[0] == want + "\n"  # the same seed, the same text (the reference ran on another load)
  assert outs[1] != outs[0]

# ---------------------------------------------------------------- chat REPL

def chat_replies(eng: Engine, turns: list[str], n: int) -> str:
  """What the REPL prints for these lines: replies of a conversation that keeps its KV cache across turns ('/reset' clears)."""
  out, messages = [], []
  eng.model.reset()
  for line in turns:
    if line == "/reset":
      messages = []
      eng.model.reset()
      continue
    messages.append({"role": "user", "content": line})
    reply = "".join(eng.complete(eng.chat_ids(messages), n, Params()))
    messages.append({"role": "assistant", "content": reply})
    out.append(reply + "\n")
  eng.model.reset()
  return "".join(out)

def test_chat_repl_in_process(eng, capsys, monkeypatch):
  want = chat_replies(eng, ["Hi"], 6)
  too_long = "word " * 400  # over the 256-token context: an error line, then the chat goes on
  monkeypatch.setattr(sys, "stdin", io.StringIO(f"/help\n\n{too_long}\nHi\n/exit\nnever read\n"))
  rc, out, err = run_main(["--model", PRESET, "--max-context", str(CTX), "-n", "6", *GREEDY], capsys)
  assert rc == 0, err
  assert out == want
  assert "no longer fits in the context of 256 tokens" in err and "/reset" in err
  assert "Traceback" not in err

@pytest.mark.slow
def test_chat_repl_script_multi_turn_reset_and_ctrl_c(eng):
  turns = ["Hello there", "Tell me more", "/reset", "Hello there"]
  want = chat_replies(eng, turns, 8)
  proc = subprocess.Popen([sys.executable, "apps/llm.py", "--model", PRESET, "--max-context", str(CTX), "-n", "8", *GREEDY, "-v"], cwd=ROOT,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  got, err = [], []
  threading.Thread(target=lambda: got.extend(iter(lambda: proc.stdout.read(1), "")), daemon=True).start()
  threading.Thread(target=lambda: err.extend(proc.stderr), daemon=True).start()
  try:
    proc.stdin.write("".join(t + "\n" for t in turns))
    proc.stdin.flush()
    deadline = time.monotonic() + 240
    while "".join(got) != want and time.monotonic() < deadline and proc.poll() is None: time.sleep(0.1)
    assert "".join(got) == want, "".join(err)
    proc.send_signal(signal.SIGINT)  # waiting for the next line: Ctrl-C leaves cleanly
    assert proc.wait(timeout=30) == 0
  finally:
    if proc.poll() is None: proc.kill()
  err_text = "".join(err)
  assert "Traceback" not in err_text
  stats = [ln for ln in err_text.splitlines() if ln.startswith("llm: prompt ")]
  assert len(stats) == 3
  assert "(0 cached" in stats[0] and "(0 cached" not in stats[1] and "(0 cached" in stats[2]  # turn 2 reused the KV cache

# ---------------------------------------------------------------- benchmark

def test_jit_counts_match_executed_kernels():
  from tinygrad import Tensor, TinyJit
  from tinygrad.helpers import GlobalCounters, Context
  w = Tensor.arange(64).float().reshape(8, 8).contiguous().realize()
  @TinyJit
  def f(x: Tensor) -> Tensor:
    a = (x @ w).relu().contiguous()
    return (a.sum(0) + x.max(0)).realize()
  for _ in range(3): f(Tensor.rand(4, 8).realize())
  x = Tensor.rand(4, 8).realize()
  k0 = GlobalCounters.kernel_count
  f(x)
  kernels, launches = llm.jit_counts(f)
  assert launches == GlobalCounters.kernel_count - k0   # tinygrad counts a graph's launch as one
  k0 = GlobalCounters.kernel_count
  with Context(JIT=0): f(x)   # the same kernels one by one
  assert kernels == GlobalCounters.kernel_count - k0 >= 2 and launches < kernels   # CPU: the kernels in a graph (patches/0040)

def test_benchmark_measures_the_decode_step(eng):
  from tinygrad.helpers import GlobalCounters
  r = llm.benchmark(eng, 6, None)
  assert r.steps == 6 and r.prompt_tokens == len(eng.text_ids(llm.BENCH_PROMPT))
  m = r.ms_per_token
  assert 0 < m["p10"] <= m["median"] <= m["p90"]
  assert r.tok_per_s > 0 and r.prefill_tok_per_s > 0
  assert r.device.startswith("CPU")
  # kernels per token: what one decode step executes (the JIT also copies the token it wrote last step back in: one more call)
  gen = eng.model.generate(eng.text_ids(llm.BENCH_PROMPT), 5, Params())
  next(gen), next(gen), next(gen)
  k0 = GlobalCounters.kernel_count
  next(gen)
  gen.close()
  eng.model.reset()
  assert GlobalCounters.kernel_count - k0 - r.launches_per_token in (0, 1)   # tinygrad counts a graph's launch as one
  assert r.launches_per_token < r.kernels_per_token   # CPU: the step's kernels in graphs (patches/0040)
  assert r.weight_bytes_per_token == eng.model.active_weight_bytes()
  # independently, from gguf-py's reader: all dense weights + n_expert_used/n_expert of the routed experts + one embedding row
  # (device bytes exceed file bytes only by the K-quant scales decoded at load, < 3%)
  from gguf import GGUFReader
  rd = GGUFReader(eng.source.path)
  cfg = eng.model.cfg
  want = sum(int(t.n_bytes) * (cfg.n_expert_used / cfg.n_expert if "_exps" in t.name else 1) for t in rd.tensors if t.name != "token_embd.weight")
  want += next(int(t.n_bytes) for t in rd.tensors if t.name == "token_embd.weight") / cfg.vocab_size
  assert want <= r.weight_bytes_per_token <= 1.03 * want + 2
  assert r.weight_gb_per_s == pytest.approx(r.weight_bytes_per_token * r.tok_per_s / 1e9)
  rows = dict(ln.split(None, 1) for ln in llm.bench_table(r).splitlines())
  assert set(rows) == {"device", "model", "prompt", "decode", "prefill", "kernels", "weights"}
  assert rows["device"].startswith("CPU") and rows["model"].startswith(PRESET)
  assert "ms/token median" in rows["decode"] and "tok/s" in rows["decode"] and "GB/s" in rows["weights"]

def test_benchmark_times_a_warm_prefill(eng, monkeypatch):
  """The timed prompt makes no step (neither captures nor loads one): the warm-up ran every step the prompt uses, its
  chunks of 32 and its last one."""
  events = []
  eng.model.captures.clear()   # every step is made again on its first use: loaded from its file or captured
  monkeypatch.setattr(eng.model.captures, "on_new", lambda step, loaded: events.append(step))
  monkeypatch.setattr(llm, "note", lambda msg: events.append("timing") if msg.startswith("warm-up took") else None)
  r = llm.benchmark(eng, 3, None)
  assert r.prompt_tokens > max(eng.model.prefill_chunks[-1], 1) and any(e[0] == "fill" for e in events if e != "timing")
  assert events[-1] == "timing", events

def test_benchmark_default_model_json(eng, capsys):
  rc, out, err = run_main(["--benchmark", "2", "--json", "--max-context", str(CTX)], capsys)
  assert rc == 0, err
  assert f"no --model: using the synthetic preset {PRESET}" in err  # a CPU gets the tiny preset, and says why
  r = json.loads(out)
  assert r["model"] == PRESET and r["kind"] == "preset" and r["mix"] == "release" and r["steps"] == 2 and r["kernels_per_token"] > 0
  assert r["file_bytes"] == Path(r["file"]).stat().st_size

def test_benchmark_count_is_optional():
  """`llm.py --benchmark` alone (the design's literal command) times the default number of steps; a count overrides it;
  --kernels picks the kernel path."""
  assert llm.parse_args(["--benchmark"]).benchmark == llm.BENCHMARK_STEPS
  assert llm.parse_args(["--benchmark", "3", "--json"]).benchmark == 3
  assert llm.parse_args([]).kernels == "hand" and llm.parse_args(["--kernels", "generated"]).kernels == "generated"

def test_prompt_that_is_not_utf8_is_refused(capsys):
  """argv bytes that are not UTF-8 reach Python as lone surrogates (os.fsdecode): a one-line error, never other bytes."""
  bad = os.fsdecode(b"caf\xe9")
  for argv in (["-p", bad], ["--system", bad], ["-p", "x", "--stop", bad]):
    with pytest.raises(SystemExit) as e: llm.parse_args(argv)
    assert e.value.code == 2 and "is not valid UTF-8 text" in capsys.readouterr().err
  assert llm.parse_args(["-p", "café"]).prompt == "café"

# ---------------------------------------------------------------- errors: one line, the right exit status

@pytest.mark.parametrize("argv,fragment", [
  (["--count", "0"], "--count"), (["--top-p", "1.5"], "top_p must be in (0, 1]"), (["--temperature", "nan"], "not a finite number"),
  (["--top-k", "x"], "not an integer"), (["--serve", "70000"], "out of range"), (["--benchmark", "0"], "out of range"),
  (["--json"], "--json needs --benchmark"), (["--chat"], "--chat needs --prompt"), (["--prompt", "x", "--serve", "0"], "cannot be combined"),
  (["--no-such-flag"], "unrecognized arguments"), (["--cache-type", "q8_0"], "invalid choice: 'q8_0'"),
  (["--max-context", "lots"], "'lots' is not an integer"), (["--max-context", "1"], "out of range"),
  (["--parallel", "4"], "--parallel needs --serve"), (["--serve", "0", "--parallel", "65"], "out of range"),
  (["--serve", "0", "-np", "0"], "out of range"),
])
def test_bad_flags_exit_2(argv, fragment, capsys):
  rc, out, err = run_main(argv, capsys)
  one_error_line(err, rc, 2, fragment)

def _gguf(path: Path, kv: list[tuple[str, object, ValueType]]) -> Path:
  w = GGUFWriter(path)
  for k, v, t in kv: w.add(k, v, t)
  w.write(lambda name: b"")
  return path

def test_model_errors_exit_1(tmp_path, capsys):
  (tmp_path / "junk.gguf").write_bytes(b"PK\x03\x04 not a model")
  (tmp_path / "cut.gguf").write_bytes(_gguf(tmp_path / "whole.gguf", [("general.architecture", "deepseek2", ValueType.STRING)]).read_bytes()[:40])
  llama = _gguf(tmp_path / "llama.gguf", [("general.architecture", "llama", ValueType.STRING)])
  cases = [
    (["--model", "nope"], "unknown model 'nope'"), (["--model", str(tmp_path / "missing.gguf")], "no such file"),
    (["--model", str(tmp_path)], "is a directory"), (["--model", str(tmp_path / "junk.gguf")], "not a GGUF file"),
    (["--model", str(tmp_path / "cut.gguf")], "truncated"), (["--model", str(llama)], "architecture 'llama' is not supported"),
    (["--model", PRESET, "--mix", "q3"], "unknown --mix 'q3'"), (["--model", PRESET, "--device", "FOO"], "unknown --device 'FOO'"),
    (["--model", str(llama), "--mix", "q8_0"], "--mix applies to synthetic presets only"),
  ]
  for argv, fragment in cases:
    rc, out, err = run_main(argv + ["--prompt", "x"], capsys)
    one_error_line(err, rc, 1, fragment)

def test_prompt_longer_than_the_context(eng, capsys):
  rc, out, err = run_main(["--model", PRESET, "--max-context", str(CTX), "--prompt", "word " * 400, *GREEDY], capsys)
  one_error_line(err, rc, 1, f"the context holds {CTX}")
  assert "--max-context" in err

def test_errors_from_the_script_and_the_module():
  for cmd, want_rc, fragment in (([sys.executable, "apps/llm.py", "--model", "/no/such/model.gguf"], 1, "no such file"),
                                 ([sys.executable, "apps/llm.py", "--device", "FOO", "--model", PRESET, "-p", "x"], 1, "unknown --device 'FOO'"),
                                 ([sys.executable, "-m", "apps.llm", "--top-k", "-1"], 2, "--top-k")):
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    one_error_line(p.stderr, p.returncode, want_rc, fragment)

def test_list_models(capsys):
  rc, out, err = run_main(["--list-models"], capsys)
  assert rc == 0
  for name in [*synth.PRESETS, *(m.name for m in models.KNOWN.values())]: assert name in out

# ---------------------------------------------------------------- known models: download

def _closed_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]  # nothing listens there once closed

def test_known_model_without_network_is_one_line(monkeypatch, capsys):
  m = models.lookup("glm-4.7-flash-q4_0")
  assert m is not None and m.name == "GLM-4.7-Flash-Q4_0"
  if models.cached_path(m).exists(): pytest.skip("the real model is cached here")
  monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
  rc, out, err = run_main(["--model", "GLM-4.7-Flash-Q4_0", "--prompt", "x"], capsys)
  one_error_line(err, rc, 1, "cannot download GLM-4.7-Flash-Q4_0 (no network")
  assert "pass a GGUF path or a synthetic preset (--model glm-4.7-flash)" in err

class _Files(http.server.BaseHTTPRequestHandler):
  body, short = b"", False
  def log_message(self, *a): pass
  def do_GET(self):
    if not self.path.endswith("/resolve/main/Test-Q4_0.gguf"): return self.send_error(404)
    self.send_response(200)
    self.send_header("Content-Length", str(len(self.body)))
    self.end_headers()
    self.wfile.write(self.body[:len(self.body) // 3] if self.short else self.body)

@pytest.fixture
def file_server():
  srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Files)
  threading.Thread(target=srv.serve_forever, daemon=True).start()
  yield srv
  srv.shutdown()
  srv.server_close()

def test_download_caches_with_progress(file_server, tmp_path, capsys):
  _Files.body, _Files.short = np.random.default_rng(0).bytes(3 << 20), False
  m = models.KnownModel("Test-Q4_0", "org/Test-GGUF", "test")
  url = f"http://127.0.0.1:{file_server.server_address[1]}"
  path = models.download(m, root=tmp_path, endpoint=url)
  assert path == tmp_path / "models" / "Test-Q4_0.gguf" and path.read_bytes() == _Files.body
  assert not list(tmp_path.glob("models/*.part"))
  # cached: no network needed any more
  assert models.download(m, root=tmp_path, endpoint=f"http://127.0.0.1:{_closed_port()}") == path

def test_download_progress_and_errors(file_server, tmp_path, capsys):
  _Files.body, _Files.short = b"x" * (2 << 20), False
  url = f"http://127.0.0.1:{file_server.server_address[1]}"
  models.download(models.KnownModel("Test-Q4_0", "org/Test-GGUF", "test"), root=tmp_path / "a", endpoint=url)
  err = capsys.readouterr().err
  assert "downloading Test-Q4_0.gguf" in err and "100.0%" in err
  with pytest.raises(models.DownloadError, match="HTTP 404"):
    models.download(models.KnownModel("Other-Q4_0", "org/Test-GGUF", "test"), root=tmp_path / "b", endpoint=url)
  _Files.short = True  # the connection ends early: an error, and no file that looks complete
  with pytest.raises(models.DownloadError, match="run again"):
    models.download(models.KnownModel("Test-Q4_0", "org/Test-GGUF", "test"), root=tmp_path / "c", endpoint=url)
  assert not (tmp_path / "c" / "models" / "Test-Q4_0.gguf").exists()

# ---------------------------------------------------------------- stop strings

def test_stop_string_that_begins_earlier_wins():
  """A shorter stop found inside a longer one's possible start is not final until the longer one is decided."""
  m = StopStrings(["<", "><<"])
  assert m.feed("><") == ("", False)  # "<" is complete, but "><<" may begin at 0
  assert m.feed("<") == ("", True)    # it does: the text is cut before it
  m = StopStrings(["<", "><<"])
  assert m.feed("><") == ("", False) and m.feed("a") == (">", True)  # it does not: cut at "<"
  m = StopStrings(["<", "><<"])
  assert m.feed("><") == ("", False) and m.end() == (">", True)      # the stream ends: cut at "<"

@given(st.text(alphabet="abc<>|", max_size=40), st.lists(st.text(alphabet="abc<>|", min_size=1, max_size=4), max_size=3),
       st.lists(st.integers(1, 5), max_size=20))
def test_stop_strings_cut_at_the_first_match(text, stops, cuts):
  pieces, i = [], 0
  for c in cuts:
    pieces.append(text[i:i + c])
    i += c
  pieces.append(text[i:])
  m, shown, hit = StopStrings(stops), [], False
  for p in pieces:
    out, hit = m.feed(p)
    shown.append(out)
    if hit: break
  if not hit:
    out, hit = m.end()
    shown.append(out)
  first = min((j for s in stops if (j := text.find(s)) >= 0), default=None)
  assert "".join(shown) == (text if first is None else text[:first])
  assert hit == (first is not None)
