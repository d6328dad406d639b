# CPU (this machine): a 32-token prefill chunk at position 128 and the decode step of the tiny presets on the series without
# patch 0036 (A) and with it (B), interleaved A B A B (cpu_ab.txt); the series is restored after.
cd "$(dirname "$0")/../.."
UPTO=35 N=5 ROUNDS=2 ONLY=prompt,decode bash runs/2026-11-28-cpu-mv/run_ab.sh
