# H200/H100: a chunk's Q4_0 products as block products on the int8 tensor cores, under several tensor-core tilings, with the
# parts' reduce unrolled or not; then BEAM=2's pick for the narrow products. Logs to $OUT/probe.txt.
cd "$(dirname "$0")/../.."
export DEV=CUDA PYTHONPATH=. PARALLEL=0 CACHELEVEL=0
L=${OUT:-/tmp}/probe.txt
P=runs/2026-11-28-blk2/probe.py
v() { echo "== $*" >> $L; env "$@" timeout 240 python3 $P 512 ${FORMS:-blkc} ${ONLY:-} 2>&1 | grep -v '^compil' | grep -v '^\s*$' | tail -8 >> $L; }
nvidia-smi --query-gpu=name --format=csv,noheader >> $L
FORMS=packed,blk,blkc v X=0
v TC_UNR=p
v TC_UNR=p2
v TC_UP=2,2,4
v TC_UP=4,2,4
v TC_UP=2,4,4
v TC_UP=4,4,2
v TC_UP=2,2,2
v TC_UNR=p TC_UP=2,4,4
echo "== BEAM=2 blkc down,o" >> $L
DEBUG=2 BEAM=2 timeout 200 python3 $P 512 blkc down,o 2>&1 | sed 's/\x1b\[[0-9;]*m//g' | grep -a 'TF\|opts' | grep -a 'TF\|r_' | cut -c1-400 | tail -8 >> $L
