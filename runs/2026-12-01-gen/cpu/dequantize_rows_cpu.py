"""k_b's and v_b's rows dequantized whole (apps/quantized.py dequantize_rows, the flash branch's and the expanded form's
weights) on the CPU at the models' shapes, against the reference dequantization:
  PYTHONPATH=.:test:upstream DEV=CPU python3 runs/2026-12-01-gen/cpu/dequantize_rows_cpu.py"""
import sys, tempfile
from pathlib import Path
import numpy as np
sys.path.insert(0, "test")
from test_kernels_cpu import expert_file
from apps.gguf import GGMLType
from apps.quantized import QuantizedExpertWeights, dequantize_rows
for name, (K, N, H) in {"GLM-4.7-Flash k_b": (192, 512, 20), "GLM-4.7-Flash v_b": (512, 256, 20), "Youtu-LLM-2B k_b": (128, 512, 16),
                        "GLM-4.7-Flash-tiny k_b": (96, 256, 4)}.items():
  gf, W = expert_file(Path(tempfile.mkdtemp()), [("w.weight", GGMLType.Q4_0, (K, N, H))], seed=H)
  got = dequantize_rows(QuantizedExpertWeights.from_gguf(gf, "w.weight", device="CPU").groups[0]).numpy()
  print(f"{name} {got.shape}: max |got - want| {np.abs(got - W['w.weight']).max():.1e}", flush=True)
