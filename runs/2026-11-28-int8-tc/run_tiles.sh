# H100: the i8 form's product under several tensor-core tilings (TC_UP = upcast N, upcast M, local N after the TC opt), then
# BEAM=2's pick for two products (the kernel names give its shape)
cd "$(dirname "$0")/../.."
for up in 4,4,4 2,2,4 4,2,4 2,4,4 2,2,2 4,4,2; do
  echo "== TC_UP=$up"
  TC_UP=$up PARALLEL=0 DEV=CUDA TC_OPT=1 PYTHONPATH=. python3 runs/2026-11-28-int8-tc/probe.py 512 i8 2>&1 | grep -v '^compil' | tail -7
done
echo "== BEAM=2"
DEBUG=2 DEV=CUDA TC_OPT=1 BEAM=2 PYTHONPATH=. timeout 200 python3 runs/2026-11-28-int8-tc/probe.py 512 i8 down,q_b 2>&1 | sed 's/\x1b\[[0-9;]*m//g' | grep -a ' r_[0-9_]*3_[0-9]*_2_2 \|TF' | awk '{print $4, $0}' | cut -c1-60 | sort -u | tail -8
