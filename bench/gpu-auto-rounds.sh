#!/bin/sh
# gpu-auto-rounds.sh: auto against only:rocm on a real GPU in more rounds
# than gpu-device.sh gives them, for ratios near 1 that 4 rounds cannot
# tell apart (docs/targets.csv, the real-GPU rows). From a binary built
# elsewhere (go build -o BIN/infer ./cmd/infer):
#
#   sh bench/gpu-auto-rounds.sh BIN OUTDIR [BUDGET_S]
#
# Decode at batch 1 and 16 (-tokens 128 -warmup 16): only:rocm, auto and
# auto -db (restored from a store one cold run made first), the first of
# the three rotating by round; the first 6 rounds also run a mixture of
# experts (-moe 8,2, batch 4), auto and only:rocm alternated. Rounds stop
# starting once BUDGET_S seconds (default 200) have passed; each run's
# JSON goes to OUTDIR/infer.jsonl with its label (as gpu-device.sh), and
# bench/gpu-summary.py prints the medians and paired ratios last.
set -u
bin=$1; out=$2; budget=${3:-200}; start=$(date +%s)
mkdir -p "$out"
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do [ -d "$d" ] && LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"; done
for d in $(python3 -c 'import nvidia, os; p = nvidia.__path__[0]; print(" ".join(os.path.join(p, x, "lib") for x in os.listdir(p)))' 2>/dev/null); do [ -d "$d" ] && LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d"; done
export LD_LIBRARY_PATH
nvidia-smi -L 2>/dev/null || rocm-smi --showproductname 2>/dev/null || true
el() { echo $(($(date +%s) - start)); }
run() { label=$1; shift
  line=$(timeout 90 "$bin/infer" -backends cpu,rocm -json "$@" 2>>"$out/infer.log"); rc=$?
  echo "{\"label\":\"$label\",\"rc\":$rc,\"run\":${line:-null}}" >>"$out/infer.jsonl"
  echo "$label rc=$rc $(echo "$line" | sed -n 's/.*"tokens_per_s":\([0-9.]*\).*/\1/p') ($(el) s)"; }
dec="-tokens 128 -warmup 16"
for b in 1 16; do run "decode b$b auto -db cold" $dec -batch $b -strategy auto -db "$out/db-b$b"; done
r=0
while [ "$(el)" -lt "$budget" ] && [ $r -lt 12 ]; do
  for b in 1 16; do
    set -- only auto autodb
    [ $((r % 3)) -eq 1 ] && set -- auto autodb only
    [ $((r % 3)) -eq 2 ] && set -- autodb only auto
    for st in "$@"; do case $st in
      only) run "decode b$b only:rocm" $dec -batch $b -strategy only:rocm ;;
      auto) run "decode b$b auto" $dec -batch $b -strategy auto ;;
      autodb) run "decode b$b auto -db" $dec -batch $b -strategy auto -db "$out/db-b$b" ;;
    esac; done
  done
  if [ $((r % 2)) -eq 0 ]; then set -- auto only:rocm; else set -- only:rocm auto; fi
  [ $r -lt 6 ] && for st in "$@"; do run "moe b4 $st" $dec -moe 8,2 -batch 4 -strategy $st; done
  r=$((r + 1))
done
rm -rf "$out"/db-*
python3 "$(dirname "$0")/gpu-summary.py" "$out/infer.jsonl"
