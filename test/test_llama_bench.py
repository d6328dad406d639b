"""tools/llama_bench.py (the trimmed llama.cpp source archive, its build and llama-bench's output) and gpu_bench's table, without
network: a small fake sdist stands in for the real one; the real archive and a CPU llama-bench are checked where they are present."""
import hashlib, io, json, lzma, os, signal, sys, tarfile, time
from pathlib import Path
import pytest
from tools import llama_bench as lc

NAME = "llama_cpp_python-0.3.36"
KEPT = ["CMakeLists.txt", "LICENSE", "cmake/common.cmake", "include/llama.h", "src/llama.cpp", "src/models/deepseek2.cpp", "common/common.cpp",
        "common/jinja/lexer.cpp", "vendor/CMakeLists.txt", "vendor/nlohmann/json.hpp", "vendor/miniaudio/CMakeLists.txt",
        "tools/llama-bench/llama-bench.cpp", "tools/llama-bench/CMakeLists.txt", "tools/batched-bench/batched-bench.cpp",
        "tools/batched-bench/main.cpp", "tools/batched-bench/CMakeLists.txt", "ggml/CMakeLists.txt", "ggml/cmake/common.cmake",
        "ggml/include/ggml.h", "ggml/include/ggml-vulkan.h", "ggml/src/ggml.c", "ggml/src/CMakeLists.txt", "ggml/src/ggml-cpu/ggml-cpu.c",
        "ggml/src/ggml-cpu/arch/x86/quants.c", "ggml/src/ggml-cuda/ggml-cuda.cu", "ggml/src/ggml-cuda/template-instances/mmq-instance-q4_0.cu"]
DROPPED = ["models/ggml-vocab-gpt-2.gguf", "tests/test-tokenizer-0.cpp", "docs/build.md", "examples/simple/simple.cpp", "tools/server/server.cpp",
           "tools/ui/index.html", "tools/mtmd/mtmd.cpp", "tools/CMakeLists.txt", "ggml/src/ggml-vulkan/ggml-vulkan.cpp",
           "ggml/src/ggml-metal/ggml-metal.m", "ggml/src/ggml-vulkan/vulkan-shaders/add.comp", "gguf-py/gguf/gguf.py",
           "vendor/miniaudio/miniaudio.h", "vendor/stb/stb_image.h", ".github/workflows/build.yml", "convert_hf_to_gguf.py", "README.md"]
CHANGELOG = "# Changelog\n\n## [Unreleased]\n\n## [0.3.36]\n\n- feat: update llama.cpp to ggml-org/llama.cpp@0abc1234f\n\n" \
            "## [0.3.35]\n\n- feat: update llama.cpp to ggml-org/llama.cpp@9999999aa\n"

def content(rel: str) -> bytes: return f"// {rel}\n".encode() * 3

def fake_sdist(path: Path, extra: dict[str, bytes] | None = None) -> str:
  """A .tar.gz laid out as the llama-cpp-python sdist, with the kept and dropped files above; returns its sha256."""
  files = {f"{NAME}/vendor/llama.cpp/{rel}": content(rel) for rel in KEPT + DROPPED}
  files.update({f"{NAME}/CHANGELOG.md": CHANGELOG.encode(), f"{NAME}/llama_cpp/llama.py": b"# binding\n"}, **(extra or {}))
  with tarfile.open(path, "w:gz") as tar:
    for name, data in files.items():
      ti = tarfile.TarInfo(name)
      ti.size, ti.mtime = len(data), 1_700_000_000
      tar.addfile(ti, io.BytesIO(data))
  return hashlib.sha256(path.read_bytes()).hexdigest()

def members(archive: Path) -> dict[str, bytes]:
  with tarfile.open(archive, "r:xz") as tar: return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}

@pytest.fixture
def sdist(tmp_path):
  path = tmp_path / "cache" / f"{NAME}.tar.gz"
  path.parent.mkdir()
  return path, fake_sdist(path)

# ---------------------------------------------------------------- keep rules

@pytest.mark.parametrize("rel", KEPT)
def test_keeps(rel): assert lc.keep(rel)

@pytest.mark.parametrize("rel", DROPPED)
def test_drops(rel): assert not lc.keep(rel)

# ---------------------------------------------------------------- pack

def test_pack_trims(sdist, tmp_path):
  path, sha = sdist
  dest = tmp_path / "out" / "src.tar.xz"
  lc.pack(dest, sdist=path, sha256=sha)
  got = members(dest)
  assert set(got) == {f"llama.cpp/{r}" for r in KEPT} | {"llama.cpp/PACKED.json", "llama.cpp/tools/CMakeLists.txt"}
  assert all(got[f"llama.cpp/{r}"] == content(r) for r in KEPT)
  assert got["llama.cpp/tools/CMakeLists.txt"].decode() == lc.TOOLS_CMAKE and "add_subdirectory(llama-bench)" in lc.TOOLS_CMAKE
  assert "add_subdirectory(batched-bench)" in lc.TOOLS_CMAKE
  info = json.loads(got["llama.cpp/PACKED.json"])
  assert (info["sdist_sha256"], info["llama_cpp_commit"], info["rules"], info["files"]) == (sha, "0abc1234f", lc.rules(), len(got))
  assert lc.packed_info(dest) == info
  with tarfile.open(dest, "r:xz") as tar: assert tar.next().name == "llama.cpp/PACKED.json"  # readable without the rest

def test_pack_idempotent_and_deterministic(sdist, tmp_path):
  path, sha = sdist
  dest = tmp_path / "src.tar.xz"
  lc.pack(dest, sdist=path, sha256=sha)
  first, stat = dest.read_bytes(), dest.stat()
  time.sleep(0.01)
  lc.pack(dest, sdist=path, sha256=sha)
  assert dest.stat().st_mtime_ns == stat.st_mtime_ns  # up to date: not rewritten
  dest.unlink()
  lc.pack(dest, sdist=path, sha256=sha)
  assert dest.read_bytes() == first  # the same sdist packs to the same bytes

def test_pack_repacks_other_sdist(sdist, tmp_path):
  path, sha = sdist
  dest = tmp_path / "src.tar.xz"
  lc.pack(dest, sdist=path, sha256=sha)
  other = tmp_path / "other" / f"{NAME}.tar.gz"
  other.parent.mkdir()
  sha2 = fake_sdist(other, {f"{NAME}/vendor/llama.cpp/src/llama-new.cpp": b"new\n"})
  lc.pack(dest, sdist=other, sha256=sha2)
  assert "llama.cpp/src/llama-new.cpp" in members(dest) and lc.packed_info(dest)["sdist_sha256"] == sha2

def test_pack_redoes_on_new_rules(sdist, tmp_path, monkeypatch):
  path, sha = sdist
  dest = tmp_path / "src.tar.xz"
  lc.pack(dest, sdist=path, sha256=sha)
  assert "llama.cpp/src/llama.cpp" in members(dest)
  monkeypatch.setattr(lc, "DROP_FILES", lc.DROP_FILES + ("src/llama.cpp",))
  lc.pack(dest, sdist=path, sha256=sha)
  assert "llama.cpp/src/llama.cpp" not in members(dest) and lc.packed_info(dest)["rules"]["drop_files"][-1] == "src/llama.cpp"

def test_pack_checks_hash(sdist, tmp_path):
  path, _ = sdist
  with pytest.raises(lc.LlamaError, match="sha256 mismatch"): lc.pack(tmp_path / "src.tar.xz", sdist=path, sha256="0" * 64)
  assert not (tmp_path / "src.tar.xz").exists()

def test_fetch_downloads_and_checks(sdist, tmp_path):
  path, sha = sdist
  url = path.resolve().as_uri()  # urllib reads file:// URLs: the download path without network
  dest = tmp_path / "dl" / f"{NAME}.tar.gz"
  with pytest.raises(lc.LlamaError, match="sha256 mismatch for the downloaded"): lc.fetch_sdist(dest, url, "f" * 64)
  assert not dest.exists() and not list(dest.parent.iterdir())
  assert lc.fetch_sdist(dest, url, sha) == dest and dest.read_bytes() == path.read_bytes()
  with pytest.raises(lc.LlamaError, match="cannot download"): lc.fetch_sdist(tmp_path / "none.tar.gz", url + ".missing", sha)

def test_pack_fetches_into_archive_folder(sdist, tmp_path):
  path, sha = sdist
  dest = tmp_path / "llama" / "src.tar.xz"
  lc.pack(dest, url=path.resolve().as_uri(), sha256=sha)
  assert (dest.parent / lc.SDIST).read_bytes() == path.read_bytes() and lc.packed_info(dest)["sdist_sha256"] == sha

def test_sdist_without_llama_cpp(tmp_path):
  bad = tmp_path / f"{NAME}.tar.gz"
  with tarfile.open(bad, "w:gz") as tar:
    ti = tarfile.TarInfo(f"{NAME}/README.md")
    tar.addfile(ti, io.BytesIO(b""))
  with pytest.raises(lc.LlamaError, match="no vendor/llama.cpp/CMakeLists.txt"):
    lc.pack(tmp_path / "src.tar.xz", sdist=bad, sha256=hashlib.sha256(bad.read_bytes()).hexdigest())

# ---------------------------------------------------------------- extract and build plumbing

def test_extract_once(sdist, tmp_path):
  path, sha = sdist
  dest = tmp_path / "src.tar.xz"
  lc.pack(dest, sdist=path, sha256=sha)
  src = lc.extract(dest, tmp_path / "src")
  cu = "ggml/src/ggml-cuda/ggml-cuda.cu"
  assert src == tmp_path / "src" / "llama.cpp" and (src / cu).read_bytes() == content(cu)
  marker = src / "marker"
  marker.write_text("x")
  lc.extract(dest, tmp_path / "src")
  assert marker.exists()  # same archive: not extracted again
  with pytest.raises(lc.LlamaError, match="is missing"): lc.extract(tmp_path / "none.tar.xz", tmp_path / "src2")

def test_extract_rejects_foreign_members(tmp_path):
  bad = tmp_path / "bad.tar.xz"
  with lzma.open(bad, "wb") as xz, tarfile.open(fileobj=xz, mode="w") as tar:
    ti = tarfile.TarInfo("llama.cpp/../escape.txt")
    tar.addfile(ti, io.BytesIO(b""))
  with pytest.raises(lc.LlamaError, match="unexpected member"): lc.extract(bad, tmp_path / "src")
  assert not (tmp_path / "escape.txt").exists()

def test_cmake_args_offline():
  cuda = lc.cmake_args(Path("s"), Path("b"), True, "90a", "0abc1234f")
  for opt in ("-DGGML_CUDA=ON", "-DCMAKE_CUDA_ARCHITECTURES=90a", "-DLLAMA_OPENSSL=OFF", "-DLLAMA_LLGUIDANCE=OFF", "-DGGML_CUDA_NCCL=OFF",
              "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_BUILD_COMMIT=0abc1234f"):
    assert opt in cuda
  cpu = lc.cmake_args(Path("s"), Path("b"), False, "90a", "x")
  assert "-DGGML_CUDA=OFF" in cpu and not any("CUDA_ARCH" in a for a in cpu)

@pytest.mark.parametrize("sigint", ["default", "ignored"])
def test_time_limit_stops_the_group(tmp_path, sigint):
  """Also when this process ignores SIGINT (a background job of a non-interactive shell, as CI may run us)."""
  if sigint == "ignored":
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try: return test_time_limit_stops_the_group(tmp_path, "default")
    finally: signal.signal(signal.SIGINT, old)
  child = tmp_path / "child.pid"
  code = f"import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); " \
         f"open({str(child)!r}, 'w').write(str(p.pid)); time.sleep(60)"
  t0 = time.monotonic()
  with open(tmp_path / "log", "w") as log: rc = lc._run_logged([sys.executable, "-c", code], log, dict(os.environ), time.monotonic() + 1.0)
  assert rc is None and time.monotonic() - t0 < 30
  time.sleep(0.2)
  pid = int(child.read_text())
  try: os.kill(pid, 0); alive = Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
  except ProcessLookupError: alive = False
  assert not alive  # the compiler-like grandchild went with the build tool
  with open(tmp_path / "log", "a") as log: assert lc._run_logged([sys.executable, "-c", "raise SystemExit(4)"], log, dict(os.environ), None) == 4

# ---------------------------------------------------------------- llama-bench output

def record(n_prompt, n_gen, fa, ts, sd=1.0):
  """One result as llama-bench -o json prints it (field names from tools/llama-bench/llama-bench.cpp, a subset)."""
  return {"build_commit": "0c1e57098", "build_number": 0, "gpu_info": "NVIDIA H100 80GB HBM3", "backends": "CUDA", "model_filename": "m.gguf",
          "model_type": "deepseek2 16B Q4_K - Medium", "n_gpu_layers": 99, "flash_attn": fa, "n_prompt": n_prompt, "n_gen": n_gen, "n_depth": 0,
          "avg_ns": int(1e9 * max(n_prompt, n_gen) / ts), "stddev_ns": 0, "avg_ts": ts, "stddev_ts": sd, "samples_ts": [ts]}

def test_parse_bench():
  text = json.dumps([record(512, 0, 0, 9000.5), record(0, 128, 0, 340.25, 2.5), record(512, 0, 1, 9500.0), record(0, 128, 1, 351.0)])
  r = lc.parse_bench(text)
  assert r["pp512"] == {"fa0": 9000.5, "fa1": 9500.0} and r["tg128"] == {"fa0": 340.25, "fa1": 351.0}
  assert r["stddev"]["tg128"]["fa0"] == 2.5 and r["build_commit"] == "0c1e57098"
  assert lc.best(r, "tg128") == 351.0 and lc.best(r, "pp512") == 9500.0 and lc.best(r, "tg64") is None
  for bad in ("", "[]", "llama_model_load: error"):
    with pytest.raises(lc.LlamaError): lc.parse_bench(bad)

def test_parse_bench_depths():
  recs = [record(0, 128, fa, ts) | {"n_depth": d} for fa, d, ts in ((0, 4096, 300.0), (1, 4096, 313.0), (1, 16384, 222.0))]
  r = lc.parse_bench(json.dumps(recs + [record(4096, 0, 1, 17623.0)]))
  assert lc.best(r, "tg128@d4096") == 313.0 and lc.best(r, "tg128@d16384") == 222.0 and lc.best(r, "pp4096") == 17623.0
  assert lc.best(r, "tg128") is None

def test_bench_lines_and_failure():
  ok = {"file": "a.gguf", **lc.parse_bench(json.dumps([record(512, 0, 0, 100.0), record(0, 128, 1, 50.0)]))}
  lines = lc.bench_lines([ok, {"file": "b.gguf", "error": "exit 1: unknown model architecture"}])
  assert "pp512 fa0" in lines[0] and "tg128 fa1" in lines[0] and "100.0" in lines[1] and "unknown model architecture" in lines[2]

def test_bench_retries_without_repack(tmp_path):
  """A llama-bench whose repacked CPU weights abort the graph's scheduling (as on a 2-core Xeon VM) is run once more with
  --repack 0, and the line says so; another failure is reported as it is."""
  out = json.dumps([record(512, 0, 0, 41.5), record(0, 128, 0, 6.8)])
  exe = tmp_path / "llama-bench"
  exe.write_text("#!/bin/sh\ncase \"$*\" in *'--repack 0'*) echo '" + out + "' ;; *) echo 'ggml-backend.cpp:1294: GGML_ASSERT(*cur_backend_id != -1) "
                 "failed' >&2; exit 134 ;; esac\n")
  exe.chmod(0o755)
  (r,) = lc.bench([tmp_path / "m.gguf"], exe)
  assert r["repack"] == 0 and lc.best(r, "tg128") == 6.8 and "--repack 0" in lc.bench_lines([r])[1]
  exe.write_text("#!/bin/sh\necho 'error: unknown model architecture' >&2\nexit 1\n")
  (r,) = lc.bench([tmp_path / "m.gguf"], exe)
  assert "unknown model architecture" in r["error"] and "repack" not in r

BATCHED_OUT = """
main: n_kv_max = 5184, n_batch = 2048, n_ubatch = 512, flash_attn = 1, is_pp_shared = 0, is_tg_separate = 0, n_gpu_layers = 99

|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |
|-------|--------|------|--------|----------|----------|----------|----------|----------|----------|
|    32 |    128 |    1 |    160 |    0.012 |  2666.67 |    0.400 |   320.00 |    0.412 |   388.35 |
|    32 |    128 |    8 |   1280 |    0.030 |  8533.33 |    0.800 |  1280.00 |    0.830 |  1542.17 |

llama_perf_context_print: total time = 1500.00 ms
"""

def test_parse_batched():
  r = lc.parse_batched(BATCHED_OUT)
  assert set(r) == {1, 8} and r[8] == {"pp": 32, "tg": 128, "s_pp": 8533.33, "t_tg": 0.8, "s_tg": 1280.0} and r[1]["s_tg"] == 320.0
  with pytest.raises(lc.LlamaError): lc.parse_batched("error: failed to load model")

def test_batched_missing_binary(tmp_path):
  with pytest.raises(lc.LlamaError, match="build"): lc.batched([tmp_path / "m.gguf"], exe=tmp_path / "llama-batched-bench")

def test_bench_missing_binary(tmp_path):
  with pytest.raises(lc.LlamaError, match="build"): lc.bench([tmp_path / "m.gguf"], tmp_path / "llama-bench")

# ---------------------------------------------------------------- the real sdist and llama-bench, where present

@pytest.mark.skipif(not lc.ARCHIVE.exists(), reason="run python3 -m tools.llama_bench pack")
def test_real_archive():
  assert lc.ARCHIVE.stat().st_size < 15e6
  info = lc.packed_info(lc.ARCHIVE)
  assert info["sdist_sha256"] == lc.SDIST_SHA256 and info["llama_cpp_commit"] != "unknown"
  with tarfile.open(lc.ARCHIVE, "r:xz") as tar: names = set(tar.getnames())
  for need in ("tools/llama-bench/llama-bench.cpp", "tools/batched-bench/batched-bench.cpp",
               "ggml/src/ggml-cuda/ggml-cuda.cu", "ggml/src/ggml-cuda/CMakeLists.txt",
               "src/models/deepseek2.cpp", "ggml/src/ggml-cpu/CMakeLists.txt", "common/CMakeLists.txt", "vendor/cpp-httplib/httplib.cpp"):
    assert f"llama.cpp/{need}" in names
  assert not any(n.startswith(("llama.cpp/models/", "llama.cpp/ggml/src/ggml-vulkan/", "llama.cpp/tools/server/")) for n in names)

CPU_BENCH = lc.binary(lc.CPU_BUILD_DIR)

@pytest.mark.skipif(not CPU_BENCH.exists(), reason="run python3 -m tools.llama_bench build --cpu")
def test_real_llama_bench_cpu():
  from apps import synth
  path = synth.generate("youtu-llm-2b-tiny", "release", progress=False)
  (r,) = lc.bench([path], CPU_BENCH, n_prompt=32, n_gen=8, reps=1)
  assert "error" not in r, r.get("error")
  assert set(r["pp32"]) == set(r["tg8"]) == {"fa0", "fa1"} and all(v > 0 for t in ("pp32", "tg8") for v in r[t].values())
  assert r["model_type"].startswith("deepseek2")

# ---------------------------------------------------------------- gpu_bench's table

def row(preset, decode, prefill=1000.0, floor=400.0, **extra):
  return {"preset": preset, "file_gb": 1.1, "load_s": 2.0, "device_mem_gb": 1.2, "prefill_tok_s": prefill, "decode_tok_s": decode,
          "decode_ms": 1e3 / decode, "floor_tok_s": floor, "n_prefill": 512, **extra}

def cells(lines, cols):
  """The table's cells by column, cut at the widths the header was laid out with."""
  widths = [int(spec.rstrip("sfd").split(".")[0]) for _, spec, _ in cols]
  assert all(len(line) == len(lines[0]) for line in lines[1:])  # fixed-width layout
  out, pos = [], 0
  for w in widths:
    out.append([line[pos:pos + w].strip() for line in lines])
    pos += w + 1
  return {c[0]: c[1:] for c in out}

def test_table_measured():
  from tools import gpu_bench as gb
  lr = lambda tg0, tg1, pp: {"build_commit": "0c1e57098", "pp512": {"fa0": pp, "fa1": pp * 0.9}, "tg128": {"fa0": tg0, "fa1": tg1}}
  rows = [row("youtu-llm-2b", 300.0, llama=lr(350.0, 380.0, 20000.0), upstream_tok_s=30.0),
          row("deepseek-v2-lite", 200.0, prefill=5000.0, llama=lr(351.0, 340.0, 8000.0), upstream_tok_s=12.5),
          row("glm-4.7-flash", 100.0, llama={"file": "g.gguf", "error": "exit 1: out of memory"}, upstream_tok_s=6.8)]
  lines = gb.table(rows)
  cols = gb.columns(rows)
  t = cells(lines[:len(rows) + 1], cols)
  assert t["x lc tg"] == [f"{300 / 380:.3f}", f"{200 / 351:.3f}", "-"]  # against the best of fa0/fa1
  assert t["x lc pp"] == [f"{1000 / 20000:.3f}", f"{5000 / 8000:.3f}", "-"]
  assert t["lc % floor"] == [f"{100 * 380 / 400:.1f}", f"{100 * 351 / 400:.1f}", "-"]
  assert t["x tg 0.14"] == [f"{300 / 30:.2f}", f"{200 / 12.5:.2f}", f"{100 / 6.8:.2f}"]
  assert t["% floor"] == [f"{100 * 300 / 400:.1f}", f"{100 * 200 / 400:.1f}", f"{100 * 100 / 400:.1f}"]
  assert "x llama.cpp" not in t and any("out of memory" in line for line in lines) and any("measured in this run" in line for line in lines)

def test_table_anchors():
  from tools import gpu_bench as gb
  rows = [row("deepseek-v2-lite", 200.0), row("youtu-llm-2b-tiny", 900.0)]
  t = cells(gb.table(rows)[:3], gb.columns(rows))
  lc_anchor, tg_anchor = gb.ANCHORS["deepseek-v2-lite"]
  assert t["x llama.cpp"] == [f"{200 / lc_anchor:.3f}", "-"] and t["x tg 0.14"] == [f"{200 / tg_anchor:.2f}", "-"]
  assert "x lc tg" not in t and "tg 0.14 t/s" not in t

def test_depth_table():
  from tools import gpu_bench as gb
  rows = [{"preset": "youtu-llm-2b", "depth": d, "prefill_tok_s": pp, "decode_tok_s": tg, "n_decode": 64}
          for d, pp, tg in ((4096, 8800.0, 593.5), (16384, 3030.0, 398.0))]
  llama = {"youtu-llm-2b": {"pp4096": {"fa0": 15000.0, "fa1": 17623.0}, "tg128@d4096": {"fa1": 313.0}}}
  lines = gb.depth_table(rows, llama)
  assert lines[1].split()[2:] == ["8800.0", "17623.0", f"{8800 / 17623:.3f}", "593.5", "313.0", f"{593.5 / 313:.3f}"]
  assert lines[2].split()[2:] == ["3030.0", "-", "-", "398.0", "-", "-"]  # no llama-bench result at that depth

def test_graph_nodes_reads_llama_cpp_log():
  """tools/graph_nodes.py takes llama.cpp's node count from its context log (the last report), and says plainly when the log
  has none; without llama-cpp-python (CI) the tool stops with a one-line reason, not a traceback."""
  from tools.graph_nodes import parse_graph_nodes, main
  log = "llama_context:        CPU compute buffer size =    12.50 MiB\nllama_context: graph nodes  = 1646\nllama_context: graph splits = 1\n"
  assert parse_graph_nodes(log) == 1646 and parse_graph_nodes(log + "sched_reserve: graph: nodes = 194, splits = 1, input objects = 4\n") == 194
  with pytest.raises(ValueError, match="graph nodes"): parse_graph_nodes("llama_context: n_ctx = 256\n")
  try: import llama_cpp  # noqa: F401
  except ImportError:
    with pytest.raises(SystemExit): main(["--presets", "youtu-llm-2b-tiny"])
