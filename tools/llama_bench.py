"""llama.cpp's llama-bench next to our numbers: built on the GPU machine from the llama.cpp that the pinned llama-cpp-python
sdist vendors (the version tools/references.py and the tests compare against), run on the same GGUF files.

  python3 -m tools.llama_bench pack             here (PyPI): fetch the sdist hash-checked, keep what the llama-bench build needs
                                              -> .cache/llama/llama-cpp-src.tar.xz (carry that one file to the GPU machine)
  python3 -m tools.llama_bench build [--cpu]    on the GPU machine: extract, configure (CUDA, sm_90a), build llama-bench; a call
                                              stopped by --time-limit keeps its objects and the next call goes on from there
  python3 -m tools.llama_bench bench FILE...    llama-bench -ngl 99 -p 512 -n 128 -fa 0,1 -r 3 -o json: pp512 and tg128 tok/s
  python3 -m tools.llama_bench batched FILE...  llama-batched-bench -npl 1,4,8,16,32: aggregate decode tok/s of that many
                                              sequences at once (llama.cpp's batched decode, its server's parallel slots)

The GPU machine has no network and receives a small archive only, so `pack` drops everything the build of llama-bench does
not read (other backends, models/, tests, docs, examples, the web UI, other tools) and writes tools/CMakeLists.txt anew with
llama-bench and llama-batched-bench alone. Nothing is fetched at configure time (no OpenSSL, no llguidance, no NCCL). The build log goes to
$OUT/llama-build.log when OUT is set (the device tool brings $OUT back), else next to the build; llama-bench's own output
to $OUT/llama-bench.log.
"""
from __future__ import annotations
import argparse, hashlib, io, json, lzma, math, os, re, shutil, signal, subprocess, sys, tarfile, time, urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
from apps.vocab import SDIST, SDIST_URL, SDIST_SHA256, cache_dir  # the same pinned sdist the tokenizer data comes from

LLAMA_DIR = cache_dir() / "llama"
ARCHIVE = LLAMA_DIR / "llama-cpp-src.tar.xz"
BUILD_DIR = LLAMA_DIR / "build"  # the CUDA build; the archive is extracted beside it, into src/llama.cpp
CPU_BUILD_DIR = LLAMA_DIR / "build-cpu"  # without CUDA: for machines without a GPU (tests, DEV=CPU runs of gpu_bench)
TOP = "llama.cpp"                # top folder inside the archive
PACKED = "PACKED.json"           # first member of the archive: where it came from and the trim rules (`pack` redoes it when they change)

# what the llama-bench build reads, relative to vendor/llama.cpp/ (checked by configuring and building it)
KEEP_FILES = ("CMakeLists.txt", "LICENSE", "ggml/CMakeLists.txt")
KEEP_DIRS = ("cmake/", "include/", "src/", "common/", "vendor/", "tools/llama-bench/", "tools/batched-bench/",
             "ggml/cmake/", "ggml/include/", "ggml/src/ggml-cpu/", "ggml/src/ggml-cuda/")
FLAT_DIRS = ("ggml/src/",)       # their files, not their subfolders (which hold the other backends)
DROP_FILES = ("vendor/miniaudio/miniaudio.h", "vendor/stb/stb_image.h")  # only the multimodal tools include these (4 MB)
# replaces tools/CMakeLists.txt, which adds every tool (mtmd, server, ...): the two benchmarks alone, with the same setup lines
TOOLS_CMAKE = "find_package(Threads REQUIRED)\nllama_add_compile_flags()\nadd_subdirectory(llama-bench)\nadd_subdirectory(batched-bench)\n"
TARGETS = ("llama-bench", "llama-batched-bench")

def keep(rel: str) -> bool:
  """Whether the sdist file vendor/llama.cpp/<rel> goes into the archive."""
  if rel in DROP_FILES: return False
  if rel in KEEP_FILES or rel.startswith(KEEP_DIRS): return True
  return any(rel.startswith(d) and "/" not in rel[len(d):] for d in FLAT_DIRS)

def rules() -> dict:
  """The trim rules as PACKED.json records them."""
  return json.loads(json.dumps({"keep_files": KEEP_FILES, "keep_dirs": KEEP_DIRS, "flat_dirs": FLAT_DIRS, "drop_files": DROP_FILES,
                                "replaced": {"tools/CMakeLists.txt": TOOLS_CMAKE}}))

class LlamaError(RuntimeError): pass

def sha256_file(path: Path) -> str:
  h = hashlib.sha256()
  with open(path, "rb") as f:
    while chunk := f.read(1 << 20): h.update(chunk)
  return h.hexdigest()

# ---------------------------------------------------------------- pack (on a machine with PyPI)

def fetch_sdist(dest: Path, url: str = SDIST_URL, sha256: str = SDIST_SHA256) -> Path:
  """The sdist at dest, downloaded from url once; its sha256 is checked every time."""
  if dest.exists():
    if (got := sha256_file(dest)) != sha256: raise LlamaError(f"sha256 mismatch for {dest}: {got}, expected {sha256} (delete it to fetch again)")
    return dest
  dest.parent.mkdir(parents=True, exist_ok=True)
  print(f"downloading {url.rsplit('/', 1)[-1]} (76 MB, once)", file=sys.stderr)
  part, h = dest.with_name(dest.name + ".part"), hashlib.sha256()
  try:
    with urllib.request.urlopen(url, timeout=120) as r, open(part, "wb") as f:
      while chunk := r.read(1 << 20): h.update(chunk); f.write(chunk)
  except OSError as e:
    part.unlink(missing_ok=True)
    raise LlamaError(f"cannot download {url} ({type(e).__name__}: {e}): no network? put a copy at {dest}") from None
  if h.hexdigest() != sha256:
    part.unlink()
    raise LlamaError(f"sha256 mismatch for the downloaded {url}: {h.hexdigest()}, expected {sha256}")
  os.replace(part, dest)
  return dest

def sdist_commit(tar: tarfile.TarFile, top: str, version: str) -> str:
  """The llama.cpp commit this llama-cpp-python release vendors, from its CHANGELOG (the sdist has no llama.cpp git metadata)."""
  try: text = tar.extractfile(f"{top}/CHANGELOG.md").read().decode()
  except (KeyError, AttributeError): return "unknown"
  section = text.split(f"## [{version}]", 1)[-1].split("\n## [", 1)[0] if f"## [{version}]" in text else ""
  m = re.search(r"llama\.cpp@([0-9a-f]{7,40})", section)
  return m.group(1) if m else "unknown"

def packed_info(archive: Path) -> dict | None:
  """PACKED.json of an archive (its first member; read without decompressing the rest), None when missing or unreadable."""
  try:
    with tarfile.open(archive, "r:xz") as tar:
      first = tar.next()
      if first is None or first.name != f"{TOP}/{PACKED}": return None
      return json.loads(tar.extractfile(first).read())
  except (OSError, tarfile.TarError, lzma.LZMAError, EOFError, json.JSONDecodeError): return None

def _add(out: tarfile.TarFile, name: str, data: bytes, mtime: float, mode: int = 0o644) -> None:
  ti = tarfile.TarInfo(f"{TOP}/{name}")
  ti.size, ti.mtime, ti.mode = len(data), int(mtime), mode
  out.addfile(ti, io.BytesIO(data))

def trim(sdist: Path, dest: Path, sha256: str) -> dict:
  """Write dest (tar.xz): PACKED.json, then the kept files of the sdist's vendor/llama.cpp in name order, under llama.cpp/.
  Same sdist, same bytes (owners, order and times are fixed), so a re-pack does not change what is carried."""
  name = sdist.name.removesuffix(".tar.gz")
  version = name.rsplit("-", 1)[-1]
  prefix = f"{name}/vendor/llama.cpp/"
  with tarfile.open(sdist, "r:gz") as tar:
    members = sorted((m for m in tar.getmembers() if m.isfile() and m.name.startswith(prefix) and keep(m.name[len(prefix):])),
                     key=lambda m: m.name)
    if not any(m.name == prefix + "CMakeLists.txt" for m in members): raise LlamaError(f"{sdist} has no vendor/llama.cpp/CMakeLists.txt")
    info = {"sdist": sdist.name, "sdist_sha256": sha256, "llama_cpp_commit": sdist_commit(tar, name, version), "files": len(members) + 2,
            "rules": rules()}
    mtime = max(m.mtime for m in members)
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    with lzma.open(part, "wb", preset=9 | lzma.PRESET_EXTREME) as xz, tarfile.open(fileobj=xz, mode="w", format=tarfile.PAX_FORMAT) as out:
      _add(out, PACKED, json.dumps(info, indent=1).encode(), mtime)
      _add(out, "tools/CMakeLists.txt", TOOLS_CMAKE.encode(), mtime)
      for m in members: _add(out, m.name[len(prefix):], tar.extractfile(m).read(), m.mtime, 0o755 if m.mode & 0o111 else 0o644)
  os.replace(part, dest)
  return info

def pack(dest: Path = ARCHIVE, sdist: Path | None = None, url: str = SDIST_URL, sha256: str = SDIST_SHA256) -> Path:
  """The trimmed source archive at dest; nothing is done when it is already there from the same sdist and rules."""
  info = packed_info(dest) if dest.exists() else None
  if info and info.get("sdist_sha256") == sha256 and info.get("rules") == rules():
    print(f"{dest} is up to date ({dest.stat().st_size / 1e6:.1f} MB, llama.cpp {info['llama_cpp_commit']})")
    return dest
  src = fetch_sdist(sdist or dest.parent / SDIST, url, sha256)
  t0 = time.perf_counter()
  info = trim(src, dest, sha256)
  print(f"wrote {dest}: {info['files']} files, {dest.stat().st_size / 1e6:.1f} MB, llama.cpp {info['llama_cpp_commit']} "
        f"({time.perf_counter() - t0:.0f} s)")
  return dest

# ---------------------------------------------------------------- build (on the GPU machine)

def extract(archive: Path, src_dir: Path) -> Path:
  """The archive's source tree, extracted again only when the archive changed. Returns the llama.cpp folder."""
  if not archive.exists():
    raise LlamaError(f"{archive} is missing: run `python3 -m tools.llama_bench pack` where PyPI can be reached, and carry that file")
  key = sha256_file(archive)
  stamp = src_dir / ".archive-sha256"
  if stamp.exists() and stamp.read_text() == key and (src_dir / TOP / "CMakeLists.txt").exists(): return src_dir / TOP
  shutil.rmtree(src_dir, ignore_errors=True)
  part = src_dir.with_name(src_dir.name + ".part")
  shutil.rmtree(part, ignore_errors=True)
  part.mkdir(parents=True)
  with tarfile.open(archive, "r:xz") as tar:
    for m in tar.getmembers():  # only regular files below llama.cpp/, as pack writes them
      if not m.isfile() or not m.name.startswith(TOP + "/") or ".." in m.name.split("/"): raise LlamaError(f"{archive}: unexpected member {m.name}")
    tar.extractall(part, filter="data")
  (part / ".archive-sha256").write_text(key)
  os.replace(part, src_dir)
  return src_dir / TOP

def cmake_args(src: Path, build_dir: Path, cuda: bool, arch: str, commit: str) -> list[str]:
  args = ["cmake", "-S", str(src), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF",
          "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_BUILD_APP=OFF",
          "-DLLAMA_BUILD_TOOLS=ON", "-DLLAMA_BUILD_COMMON=ON", "-DLLAMA_OPENSSL=OFF", "-DLLAMA_LLGUIDANCE=OFF",
          f"-DLLAMA_BUILD_COMMIT={commit}", "-DGGML_NATIVE=ON", "-DGGML_CCACHE=OFF", f"-DGGML_CUDA={'ON' if cuda else 'OFF'}"]
  if cuda:
    args += [f"-DCMAKE_CUDA_ARCHITECTURES={arch}", "-DGGML_CUDA_NCCL=OFF"]
    if shutil.which("nvcc") is None and Path("/usr/local/cuda/bin/nvcc").exists(): args.append("-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc")
  if shutil.which("ninja"): args += ["-G", "Ninja"]
  return args

def default_build_dir(cuda: bool) -> Path: return BUILD_DIR if cuda else CPU_BUILD_DIR

def binary(build_dir: Path = BUILD_DIR) -> Path: return build_dir / "bin" / "llama-bench"

def default_log(build_dir: Path) -> Path:
  out = os.environ.get("OUT")
  return Path(out) / "llama-build.log" if out else build_dir.with_name(build_dir.name + ".log")

def _run_logged(cmd: list[str], log, env: dict, deadline: float | None) -> int | None:
  """Run cmd with its output appended to log; None when the deadline came first (the build is interrupted, its objects kept)."""
  log.write(f"$ {' '.join(cmd)}\n")
  log.flush()
  # SIGINT at its default in the child: a shell's background job inherits it ignored, and then the interrupt below would
  # do nothing until the 60 s grace ran out
  p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                       preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
  while True:
    try: return p.wait(timeout=None if deadline is None else max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired: pass
    os.killpg(p.pid, signal.SIGINT)  # its own session: make/ninja and the compilers under them, nothing else
    try: p.wait(timeout=60)
    except subprocess.TimeoutExpired:
      os.killpg(p.pid, signal.SIGKILL)
      p.wait()
    return None

def _tail(path: Path, n: int) -> str:
  try: return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
  except OSError: return ""

def build(cuda: bool = True, arch: str = "90a", jobs: int = 16, time_limit: float | None = None, archive: Path = ARCHIVE,
          build_dir: Path | None = None, log_path: Path | None = None) -> Path | None:
  """Build llama-bench; returns its path, or None when time_limit (seconds) ran out first (call again to go on)."""
  t0 = time.monotonic()
  build_dir = build_dir or default_build_dir(cuda)
  src_dir = build_dir.parent / "src"
  deadline = None if time_limit is None else t0 + time_limit
  src = extract(archive, src_dir)
  info = json.loads((src / PACKED).read_text())
  args = cmake_args(src, build_dir, cuda, arch, info.get("llama_cpp_commit", "unknown"))
  key = json.dumps({"archive": (src_dir / ".archive-sha256").read_text(), "args": args})
  stamp = build_dir / ".configure-key"
  log_path = log_path or default_log(build_dir)
  log_path.parent.mkdir(parents=True, exist_ok=True)
  # git would describe the repository around .cache/ as llama.cpp's commit: stop its search at the source folder
  env = dict(os.environ, GIT_CEILING_DIRECTORIES=str(src_dir.resolve()))
  with open(log_path, "a") as log:
    if not (stamp.exists() and stamp.read_text() == key and (build_dir / "CMakeCache.txt").exists()):
      shutil.rmtree(build_dir, ignore_errors=True)  # new sources or options: objects from the old ones would look newer
      print(f"configuring llama.cpp {info.get('llama_cpp_commit')} ({'CUDA ' + arch if cuda else 'CPU'}) in {build_dir}", flush=True)
      rc = _run_logged(args, log, env, deadline)
      if rc is None: return None
      if rc: raise LlamaError(f"cmake configure failed ({rc}), see {log_path}:\n{_tail(log_path, 25)}")
      stamp.write_text(key)
    elif binary(build_dir).exists(): print(f"llama-bench: {binary(build_dir)} (configured; checking it is current)", flush=True)
    rc = _run_logged(["cmake", "--build", str(build_dir), "--target", *TARGETS, "-j", str(jobs)], log, env, deadline)
  if rc is None: return None
  if rc: raise LlamaError(f"building llama-bench failed ({rc}), see {log_path}:\n{_tail(log_path, 40)}")
  print(f"built {binary(build_dir)} in {time.monotonic() - t0:.0f} s (log {log_path})", flush=True)
  return binary(build_dir)

# ---------------------------------------------------------------- bench

def parse_bench(text: str) -> dict:
  """llama-bench -o json output -> {"pp512": {"fa0": tok/s, "fa1": ...}, "tg128": {...}, "stddev": {...}, "build_commit", "gpu_info",
  "model_type"}: one entry per test (pp<n_prompt> or tg<n_gen>) and flash-attention setting."""
  try: records = json.loads(text)
  except json.JSONDecodeError as e: raise LlamaError(f"llama-bench printed no JSON ({e}): {text[:200]!r}") from None
  if not isinstance(records, list) or not records: raise LlamaError("llama-bench printed no results")
  out: dict = {"build_commit": records[0].get("build_commit"), "gpu_info": records[0].get("gpu_info"), "model_type": records[0].get("model_type"),
               "stddev": {}}
  for r in records:
    npp, ntg, depth = int(r["n_prompt"]), int(r["n_gen"]), int(r.get("n_depth", 0))
    test = f"pp{npp}" if ntg == 0 else f"tg{ntg}" if npp == 0 else f"pp{npp}+tg{ntg}"
    if depth: test += f"@d{depth}"
    fa = f"fa{int(r['flash_attn'])}"
    out.setdefault(test, {})[fa] = float(r["avg_ts"])
    out["stddev"].setdefault(test, {})[fa] = float(r["stddev_ts"])
  return out

def best(res: dict, test: str) -> float | None:
  """The best tok/s of a test over the flash-attention settings (llama.cpp's own best, as gpu_bench's anchors are)."""
  vals = [v for v in res.get(test, {}).values() if not math.isnan(v)]
  return max(vals) if vals else None

def bench(files: list[Path], exe: Path | None = None, n_prompt: int | str = 512, n_gen: int | str = 128, reps: int = 3, fa: str = "0,1",
          timeout: float = 600, log_path: Path | None = None, depth: str | None = None) -> list[dict]:
  """llama-bench on each file (all layers on the GPU); one result per file, {"file", "error"} where llama-bench failed.
  n_prompt, n_gen and depth take llama-bench's comma lists (depth: -d, the context filled before each test)."""
  exe = exe or binary()
  if not exe.exists(): raise LlamaError(f"{exe} is missing: run `python3 -m tools.llama_bench build` first")
  out = []
  for f in files:
    cmd = [str(exe), "-m", str(f), "-ngl", "99", "-p", str(n_prompt), "-n", str(n_gen), "-fa", fa, "-r", str(reps), "-o", "json"]
    if depth: cmd += ["-d", depth]
    t0 = time.perf_counter()
    for extra in ([], ["--repack", "0"]):
      try: p = subprocess.run(cmd + extra, capture_output=True, text=True, timeout=timeout)
      except subprocess.TimeoutExpired: p = None
      if log_path:
        with open(log_path, "a") as log: log.write(f"$ {' '.join(cmd + extra)}\n{p.stderr if p else 'timed out'}\n{p.stdout if p else ''}\n")
      # the CPU backend's repacked weights abort the graph's scheduling on some CPUs (a 2-core Xeon VM with AMX: GGML_ASSERT
      # cur_backend_id != -1 in ggml-backend.cpp); llama-bench's --repack 0 runs there, once more
      if p is None or "cur_backend_id != -1" not in p.stderr: break
    res = {"file": Path(f).name, "seconds": time.perf_counter() - t0, **({"repack": 0} if extra else {})}
    try:
      if p is None: raise LlamaError(f"timed out after {timeout:.0f} s")
      if p.returncode: raise LlamaError(f"exit {p.returncode}: {p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ''}")
      res.update(parse_bench(p.stdout))
    except LlamaError as e: res["error"] = str(e)
    out.append(res)
  return out

def parse_batched(text: str) -> dict[int, dict]:
  """llama-batched-bench's table -> {B: {"pp", "tg", "s_pp", "s_tg", "t_tg"}}: per number of parallel sequences B, the prompt
  and generated tokens of each and the aggregate prefill and decode tok/s (S_PP, S_TG: all B sequences' tokens / time)."""
  out = {}
  for line in text.splitlines():
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) != 10 or not cells[0].isdigit(): continue
    pp, tg, B = int(cells[0]), int(cells[1]), int(cells[2])
    out[B] = {"pp": pp, "tg": tg, "s_pp": float(cells[5]), "t_tg": float(cells[6]), "s_tg": float(cells[7])}
  if not out: raise LlamaError(f"llama-batched-bench printed no table: {text[-300:]!r}")
  return out

def batched(files: list[Path], npl: str = "1,4,8,16,32", npp: int = 32, ntg: int = 128, fa: tuple[str, ...] = ("off", "on"),
            exe: Path | None = None, timeout: float = 600, log_path: Path | None = None) -> list[dict]:
  """llama-batched-bench on each file with flash attention off and on: B = each of npl sequences with npp prompt tokens
  each (their own, not shared) and ntg generated; {"file", "fa<x>": {B: ...}, "best_s_tg": {B: tok/s}} per file."""
  exe = exe or binary().with_name("llama-batched-bench")
  if not exe.exists(): raise LlamaError(f"{exe} is missing: run `python3 -m tools.llama_bench build` first")
  n_ctx = max(int(b) for b in npl.split(",")) * (npp + ntg) + 64
  out = []
  for f in files:
    res: dict = {"file": Path(f).name}
    for mode in fa:
      cmd = [str(exe), "-m", str(f), "-ngl", "99", "-c", str(n_ctx), "-b", "2048", "-ub", "512", "-npp", str(npp), "-ntg", str(ntg),
             "-npl", npl, "-fa", mode]
      try: p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
      except subprocess.TimeoutExpired: p = None
      if log_path:
        with open(log_path, "a") as log: log.write(f"$ {' '.join(cmd)}\n{p.stderr if p else 'timed out'}\n{p.stdout if p else ''}\n")
      try:
        if p is None: raise LlamaError(f"timed out after {timeout:.0f} s")
        if p.returncode: raise LlamaError(f"exit {p.returncode}: {p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ''}")
        res[f"fa{mode}"] = parse_batched(p.stdout + p.stderr)
      except LlamaError as e: res[f"error_fa{mode}"] = str(e)
    res["best_s_tg"] = {B: max(res[k][B]["s_tg"] for k in res if k.startswith("fa") and B in res[k])
                        for B in sorted({B for k in res if k.startswith("fa") for B in res[k]})}
    out.append(res)
  return out

def bench_lines(results: list[dict]) -> list[str]:
  tests = sorted({k for r in results for k in r if re.fullmatch(r"(pp|tg)\d+\S*", k)})
  fas = sorted({fa for r in results for t in tests for fa in r.get(t, {})})
  head = f"{'file':52s} " + " ".join(f"{t + ' ' + fa:>12s}" for t in tests for fa in fas)
  lines = [head]
  for r in results:
    if "error" in r: lines.append(f"{r['file']:52s} llama-bench failed: {r['error']}")
    else: lines.append(f"{r['file']:52s} " + " ".join(f"{r.get(t, {}).get(fa, float('nan')):12.1f}" for t in tests for fa in fas) +
                       ("  (--repack 0: repacked weights abort on this CPU)" if r.get("repack") == 0 else ""))
  return lines

# ---------------------------------------------------------------- CLI

def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(prog="python3 -m tools.llama_bench", description=__doc__.split("\n\n")[0],
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  sub = ap.add_subparsers(dest="cmd", required=True)
  sub.add_parser("pack", help="fetch the sdist (hash-checked) and write the trimmed source archive")
  b = sub.add_parser("build", help="extract, configure and build llama-bench (resumable)")
  b.add_argument("--cpu", action="store_true", help="without CUDA (checks the trimmed tree on a machine without a GPU)")
  b.add_argument("--arch", default="90a", help="CMAKE_CUDA_ARCHITECTURES (default 90a: H100/H200)")
  b.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 4)
  b.add_argument("--time-limit", type=float, default=None, help="seconds; stop the build then (exit 3) and go on at the next call")
  b.add_argument("--build-dir", type=Path, help=f"default {BUILD_DIR}, with --cpu {CPU_BUILD_DIR}")
  r = sub.add_parser("bench", help="run llama-bench on GGUF files")
  r.add_argument("files", nargs="+", type=Path)
  r.add_argument("--cpu", action="store_true", help="the llama-bench of `build --cpu`")
  r.add_argument("--build-dir", type=Path, help=f"default {BUILD_DIR}, with --cpu {CPU_BUILD_DIR}")
  r.add_argument("-p", "--n-prompt", type=int, default=512)
  r.add_argument("-n", "--n-gen", type=int, default=128)
  r.add_argument("-r", "--reps", type=int, default=3)
  r.add_argument("--json", type=Path, help="write the parsed results here too")
  bb = sub.add_parser("batched", help="run llama-batched-bench on GGUF files")
  bb.add_argument("files", nargs="+", type=Path)
  bb.add_argument("--npl", default="1,4,8,16,32", help="numbers of parallel sequences")
  bb.add_argument("--npp", type=int, default=32, help="prompt tokens of each sequence")
  bb.add_argument("--ntg", type=int, default=128, help="generated tokens of each sequence")
  a = ap.parse_args(argv)
  try:
    if a.cmd == "pack": pack()
    elif a.cmd == "build":
      exe = build(cuda=not a.cpu, arch=a.arch, jobs=a.jobs, time_limit=a.time_limit, build_dir=a.build_dir)
      if exe is None:
        print(f"build stopped after {a.time_limit:.0f} s; run the same command again to go on", flush=True)
        return 3
      print(exe)
    else:
      for f in a.files:
        if not f.is_file(): raise LlamaError(f"{f} is not a file")
      log = Path(os.environ["OUT"]) / "llama-bench.log" if os.environ.get("OUT") else None
      if a.cmd == "batched":
        res = batched(a.files, a.npl, a.npp, a.ntg, log_path=log)
        for x in res: print(x["file"], " ".join(f"B={B}: {v:.1f}" for B, v in x["best_s_tg"].items()), "tok/s")
        return 1 if any(k.startswith("error") for x in res for k in x) else 0
      res = bench(a.files, binary(a.build_dir or default_build_dir(not a.cpu)), a.n_prompt, a.n_gen, a.reps, log_path=log)
      print("\n".join(bench_lines(res)))
      if a.json: a.json.write_text(json.dumps(res, indent=1))
      if any("error" in x for x in res): return 1
  except LlamaError as e:
    print(f"llama_bench: {e}", file=sys.stderr)
    return 1
  return 0

if __name__ == "__main__": sys.exit(main())
