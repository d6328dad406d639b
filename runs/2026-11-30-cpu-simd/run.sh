# The CPU's Q4_0 matvec (Youtu-LLM-2B's down product, 2048 x 6144) three ways, one thread, 24 weight copies (170 MB):
#   gen.c   tinygrad's generated kernel as the generated path compiles it (DEBUG=4's source of
#           `DEV=CPU python3 -m tools.bench_quantized --kernels generated --types Q4_0 --dtype float --shapes 2048:6144`,
#           both THREAD parts called in turn)
#   vec.c   explicit 16-lane vectors over 16 rows whose words are interleaved in memory (qs[n / 16][blk][j][n % 16])
#   vec2.c  explicit 16-lane vectors over the apps' layout (4 rows x 4 words a vector, x gathered per nibble)
#   vec3.c  explicit 16-lane vectors over the apps' layout, a lane a row (16 rows' words gathered: 16 streams)
#   vec4.c  explicit 16-lane vectors over the apps' layout, a row at a time: a lane a word of 4 blocks (64 contiguous bytes),
#           x permuted to match once a product (permute_x, inside the timed loop)
# clang as tinygrad runs it (-O2 -march=native). Prints the largest difference from gen's output and ms / GB/s per product.
cd "$(dirname "$0")" && F="-O2 -march=native -fno-math-errno" && B=$(mktemp -d) &&
for f in gen vec vec2 vec3 vec4; do clang $F -c $f.c -o $B/$f.o || exit 1; done && clang $F main.c $B/gen.o $B/vec.o $B/vec2.o $B/vec3.o $B/vec4.o -o $B/bench && $B/bench
