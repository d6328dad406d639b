export PYTHONPATH=. DEV=CUDA IGNORE_BEAM_CACHE=1
V=${VARIANTS:-"U0:4,U1:3,R3:0,L0:8,L1:16 U0:4,U1:4,R3:0,L0:8,L1:16 U0:8,U1:4,R3:0,L0:8,L1:16 U0:8,U1:4,R3:0,L0:4,L1:16 U0:16,U1:2,R3:0,L0:8,L1:16 U0:16,U1:4,R3:0,L0:4,L1:16 U0:8,U1:8,R3:0,L0:8,L1:8 U0:4,U1:8,R3:0,L0:8,L1:16 U0:16,U1:4,R3:0,L0:8,L1:16 U0:8,U1:4,R3:0,L0:16,L1:8 U0:8,U1:4,R3:0,L0:2,L1:32"}
for s in ${SHAPES:-"Q4_0_512_12288_2048" "Q4_0_512_2048_6144" "Q5_K_512_5632_2048"}; do
  a=(${s//_/ }); a[0]=${a[0]}_${a[1]}; unset 'a[1]'
  echo "== $s heuristic: $(DEBUG=3 timeout 100 python3 ab/t_gemm.py ${a[@]} 2>&1 | grep -E 'TFLOPS|linear_512.* opts' | sed 's/.*opts: //' | tr '\n' ' ' | cut -c1-400)"
  for v in $V; do echo "$v: $(OPTS=$v timeout 100 python3 ab/t_gemm.py ${a[@]} 2>&1 | tail -1)"; done
  [ -n "$BEAM_TOO" ] && echo "BEAM=$BEAM_TOO: $(BEAM=$BEAM_TOO DEBUG=3 timeout 240 python3 ab/t_gemm.py ${a[@]} 2>&1 | grep -E 'TFLOPS|linear_512.* opts' | sed 's/.*opts: //' | tr '\n' ' ' | cut -c1-600)"
done
