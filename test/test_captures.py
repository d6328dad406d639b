"""Captured steps kept on disk (apps/captures.py): a later model, in this process or a fresh one, replays them against its
own buffers with the goldens' outputs; a file that does not fit is captured again; the first process's kernels are never
lowered again."""
import json, os, subprocess, sys
import numpy as np
import pytest
from apps import synth, captures, GPU_NODES
from tinygrad.engine.jit import CapturedJit
from apps.model import Transformer
from tools.make_model_goldens import N_GREEDY, load_golden

PRESET, MIX = "glm-4.7-flash-tiny", "release"

@pytest.fixture(scope="module")
def gold():
  return load_golden(PRESET, MIX)[1]

def model(d, **kw) -> Transformer:
  return Transformer.from_gguf(synth.generate(PRESET, MIX, progress=False), max_context=96, prefill_chunks=(16,), capture_dir=d, **kw)

def test_a_second_model_replays_the_first_ones_captures(tmp_path, gold):
  prompt, want = gold["greedy/prompt"].tolist(), gold["greedy/hf"].tolist()
  a = model(tmp_path)
  assert list(a.generate(prompt, N_GREEDY)) == want and a.captures.loaded == 0
  files = sorted(p.name for p in tmp_path.rglob("*.pkl"))
  assert len(files) == 2, files  # the prompt's last chunk with sampling, and the decode step
  cache_a = a.caches[0].numpy().copy()
  b = model(tmp_path)
  assert list(b.generate(prompt, N_GREEDY)) == want and b.captures.loaded == 2
  assert all(j.captured is not None for j in b.captures.jits.values())
  # a step read from its file brings the buffers it writes (the loading model's own and its scratch): the set its kernels give
  for p in tmp_path.rglob("*.pkl"):
    cj = b.captures._read(p)
    assert "_written_uops" in cj.__dict__ and cj._written_uops and cj._written_uops == CapturedJit._written_uops.func(cj)
  # b's replays wrote b's caches, not a's: the loaded steps hold b's buffers
  assert np.array_equal(a.caches[0].numpy(), cache_a) and not np.array_equal(b.caches[0].numpy(), np.zeros_like(cache_a))
  assert np.array_equal(b.caches[0].numpy()[:len(prompt)], cache_a[:len(prompt)])
  # feed()'s steps are kept too: a third model's logits of a 33-token prompt (chunks 16, 16, 1) from its files
  ids = gold["prompt33/ids"].tolist()
  la = b.logits(ids)
  c = model(tmp_path)
  assert np.array_equal(c.logits(ids), la) and c.captures.loaded == 2

def test_other_settings_or_a_misfit_capture_again(tmp_path, gold, monkeypatch):
  prompt, want = gold["greedy/prompt"].tolist(), gold["greedy/hf"].tolist()
  list(model(tmp_path).generate(prompt, 2))
  other = model(tmp_path, kernels="generated")  # another model key: nothing of the first fits
  assert list(other.generate(prompt, N_GREEDY)) == want and other.captures.loaded == 0
  # a file naming a buffer the loading model lacks (another layout of the same code) is not used
  real = captures.state_buffers
  monkeypatch.setattr(captures, "state_buffers", lambda root: {b: n for b, n in real(root).items() if ".caches" not in n})
  m = model(tmp_path)
  assert list(m.generate(prompt, N_GREEDY)) == want and m.captures.loaded == 0
  monkeypatch.undo()
  # a damaged file is captured again, and rewritten whole
  for p in tmp_path.rglob("*.pkl"): p.write_bytes(p.read_bytes()[:100])
  m = model(tmp_path)
  assert list(m.generate(prompt, N_GREEDY)) == want and m.captures.loaded == 0
  assert list(model(tmp_path).generate(prompt, N_GREEDY)) == want

def test_other_code_is_removed(tmp_path, gold):
  (tmp_path / "0123456789abcdef").mkdir()
  (tmp_path / "0123456789abcdef" / "old.pkl").write_bytes(b"x")
  list(model(tmp_path).generate(gold["greedy/prompt"].tolist(), 2))
  assert [p.name for p in tmp_path.iterdir()] == [captures.code_key()]

CHILD = """
import json, sys
from pathlib import Path
import apps, tinygrad.codegen as cg, tinygrad.tensor as tt
from tinygrad import Device
from apps import engine
Device[Device.DEFAULT]  # the device's own start-up programs are lowered as they always are
if sys.argv[2] == "second":  # nothing may be scheduled or lowered: every step comes from the first process's files
  def refuse(*a, **k): raise RuntimeError("scheduled or lowered in the second process")
  cg.do_to_program = refuse
eng = engine.Engine.load(engine.resolve_model(sys.argv[1], None, None), max_context=96, quiet=True, capture_dir=Path(sys.argv[3]))
if sys.argv[2] == "second": tt.create_linear_with_vars = refuse
ids = eng.text_ids("The capital of France is")
print(json.dumps({"tokens": list(eng.model.generate(ids, 6)), "loaded": eng.model.captures.loaded}))
"""

def test_a_second_process_schedules_and_lowers_nothing(tmp_path):
  env = {**os.environ, "CACHEDB": str(tmp_path / "cache.db")}
  runs = {}
  for which in ("first", "second"):
    p = subprocess.run([sys.executable, "-c", CHILD, PRESET, which, str(tmp_path / "captures")], env=env, capture_output=True, text=True,
                       timeout=600, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert p.returncode == 0, p.stderr[-3000:]
    runs[which] = json.loads(p.stdout.strip().splitlines()[-1])
  assert runs["first"]["loaded"] == 0 and runs["second"]["loaded"] == 2
  assert runs["first"]["tokens"] == runs["second"]["tokens"]

def test_an_unwritable_cache_costs_nothing_but_the_next_start(tmp_path, gold):
  (tmp_path / "file").write_bytes(b"")  # a file where the directory would go: every write fails
  m = model(tmp_path / "file")
  unsaved = []
  m.captures.on_unsaved = lambda step, e: unsaved.append(step)
  prompt, want = gold["greedy/prompt"].tolist(), gold["greedy/hf"].tolist()
  assert list(m.generate(prompt, N_GREEDY)) == want and len(unsaved) == 2
  assert list(m.generate(prompt, N_GREEDY)) == want and len(unsaved) == 2  # tried once per step

def test_old_series_cachedbs_are_pruned(tmp_path):
  import time
  from apps import prune_cachedbs
  for i in range(6):
    for suffix in ("", "-wal", "-shm"): (tmp_path / f"cache-{i}.db{suffix}").write_bytes(b"")
    t = time.time() - 100 + i
    os.utime(tmp_path / f"cache-{i}.db", (t, t))
  (tmp_path / "other.db").write_bytes(b"")
  prune_cachedbs(tmp_path)
  assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["other.db"] + [f"cache-{i}.db{s}" for i in (2, 3, 4, 5) for s in ("", "-wal", "-shm")])

def test_the_cpu_is_named_directly_only_without_gpu_device_nodes():
  from apps import default_device
  none, only = (lambda p: False), (lambda node: (lambda p: p == node))
  assert default_device({}, "linux", none) == "CPU"
  assert all(default_device({}, "linux", only(n)) is None for n in GPU_NODES)
  assert default_device({}, "darwin", none) is None and default_device({}, "win32", none) is None
  assert default_device({"DEV": "CUDA"}, "linux", none) is None

def test_cuda_driver_starts_early_only_where_cuda_will_open():
  from apps import early_cuinit
  nv, none = (lambda p: p == "/dev/nvidiactl"), (lambda p: False)
  assert early_cuinit({}, "linux", nv) and early_cuinit({"DEV": "CUDA"}, "linux", nv) and early_cuinit({"DEV": "CUDA:1"}, "linux", nv)
  assert not early_cuinit({"DEV": "CPU"}, "linux", nv) and not early_cuinit({"DEV": "NV"}, "linux", nv)
  assert not early_cuinit({}, "linux", none) and not early_cuinit({"DEV": "CUDA"}, "darwin", nv)

@pytest.mark.skipif(any(os.path.exists(p) for p in GPU_NODES),
                    reason="a GPU device node exists: tinygrad's own probe picks the device")
def test_a_process_without_a_gpu_opens_no_gpu_backend():
  # tinygrad's default-device probe imports each GPU backend's driver bindings (~0.4 s); without GPU nodes apps skips it
  code = ("import apps, sys; from tinygrad import Device; print(Device.DEFAULT, "
          "sorted(m for m in sys.modules if m.startswith('tinygrad.runtime.ops_')))")
  env = {k: v for k, v in os.environ.items() if k != "DEV"}
  r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
  assert r.returncode == 0, r.stderr[-2000:]
  assert r.stdout.split()[0] == "CPU" and "ops_nv" not in r.stdout and "ops_amd" not in r.stdout and "ops_cuda" not in r.stdout, r.stdout
