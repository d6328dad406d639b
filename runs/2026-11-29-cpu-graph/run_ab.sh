# CPU (this machine, otherwise idle): the tiny presets on the generated path, A = the series of 39, B = 39 + the CPU graph as
# patch 40, A B interleaved three times (tools/cpu_abpatch.sh: bench_block's decode step and 32-token prompt chunk, and the
# CLI's decode). Output: cpu_ab.txt.
PATCH=40 exec bash "$(dirname "$0")/../../tools/cpu_abpatch.sh"
