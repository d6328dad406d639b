# The CPU's hand-written MLA decode attention (apps/kernels/cpu.py) on full-size Youtu-LLM-2B on this machine's CPU (2 cores;
# keep it otherwise idle): A = the tree with mla_attention.decodes' CPU branch off (the attention generated, as before),
# B = the tree, interleaved twice, the hand-written path; decode after a 64-token prompt, then at depth 512. From the
# repository root:
#   bash runs/2026-11-30-cpu-cores/attn_ab.sh > runs/2026-11-30-cpu-cores/attn_ab.txt
cd "$(dirname "$0")/../.."
OUT=${OUT:-runs/2026-11-30-cpu-cores}
toggle() { ./.venv/bin/python - "$1" <<'PY' || exit 1
import sys
p, on = "apps/kernels/mla_attention.py", '  return device.split(":")[0] == "CPU" and not rows and cpu.attention_supports(n_head, kv_lora, qk_rope, cache)\n'
off, s = "  return False  # A: the CPU's decode attention off\n", open("apps/kernels/mla_attention.py").read()
a, b = (on, off) if sys.argv[1] == "off" else (off, on)
assert s.count(a) == 1, "the line to toggle is not in the tree"
open(p, "w").write(s.replace(a, b))
PY
}
for r in 1 2; do
  for v in A B; do
    [ $v = A ] && toggle off
    echo "-- round $r $v"
    DEV=CPU PYTHONPATH=. timeout 1200 ./.venv/bin/python -m tools.gpu_bench --kernels hand --presets youtu-llm-2b --decode 16 --prefill 64 \
      --json "$OUT/attn_$r$v.json" 2>&1 | grep -v '^{' | grep youtu-llm-2b
    DEV=CPU PYTHONPATH=. timeout 1200 ./.venv/bin/python -m tools.gpu_bench --kernels hand --presets youtu-llm-2b --decode 16 --depths 512 \
      --json "$OUT/attn_d512_$r$v.json" 2>&1 | grep -v '^{' | grep youtu-llm-2b
    [ $v = A ] && toggle on
  done
done
