# The CPU's Q4_0 product streaming from memory, with and without its prefetch (apps/kernels/cpu.py words()): from the
# repository root, `bash runs/2026-12-01-gen/cpu/prefetch.sh` (clang; nothing else running)
set -e
D=$(mktemp -d); H=runs/2026-12-01-gen/cpu
PYTHONPATH=.:upstream ./.venv/bin/python -c "from apps.kernels import cpu; print(cpu.source('k', 12288, 2048, False, 2))" > $D/with.c
sed 's|__builtin_prefetch(p + 2048, 0, 3); ||' $D/with.c > $D/without.c
for v in without with; do
  clang -O2 -march=native -c -x c $D/$v.c -o $D/$v.o && clang -O2 $H/prefetch.c $D/$v.o -o $D/$v -lpthread
  echo "-- $v"; $D/$v 1 | tail -1; $D/$v 2 | tail -1
done
