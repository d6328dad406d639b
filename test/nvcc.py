"""Running a script where tinygrad renders and compiles CUDA with nvcc but runs nothing (DEV=NULL:NVCC:sm_90): CI has nvcc
but no GPU; or on another device (DEV=PYTHON runs GPU-style kernels with locals). The device is chosen at import, so each
script runs in its own process."""
import os, shutil, subprocess, sys
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")

def run_nvcc_script(script: str) -> str:
  """stdout of `script` run with DEV=NULL:NVCC:sm_90 from the repo root (test/ importable); fails the test on an error."""
  return run_script(script, "NULL:NVCC:sm_90")

def run_script(script: str, dev: str) -> str:
  """stdout of `script` run with DEV=dev from the repo root (test/ importable); fails the test on an error."""
  path = [ROOT, os.path.join(ROOT, "test")] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])
  env = {**os.environ, "DEV": dev, "PYTHONPATH": os.pathsep.join(path)}
  r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)
  assert r.returncode == 0, r.stderr[-3000:]
  return r.stdout

def sm90_registers(source: str, tmp_path) -> tuple[int, int]:
  """(registers a thread, bytes of stack) of the CUDA `source`'s kernel compiled for sm_90 (nvcc --resource-usage)."""
  (tmp_path / "k.cu").write_text(source)
  r = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "-o", str(tmp_path / "k.cubin"), "--resource-usage", str(tmp_path / "k.cu")],
                     capture_output=True, text=True, timeout=300)
  line = next(ln for ln in (r.stdout + r.stderr).splitlines() if "registers" in ln)
  return int(line.split("Used ")[1].split()[0]), int(line.split(" bytes cumulative stack")[0].split()[-1]) if "stack" in line else 0
