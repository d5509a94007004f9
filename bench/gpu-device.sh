#!/bin/sh
# gpu-device.sh: the real-GPU checks and figures, run on a machine with
# an NVIDIA or AMD GPU from binaries built elsewhere (a GPU machine may
# have no Go):
#
#   go test -c -o BIN/rocm.test ./backends/rocm
#   go test -c -o BIN/infer.test ./cmd/infer   (optional)
#   go build -o BIN/infer ./cmd/infer
#   go build -o BIN/infer.base ./cmd/infer   (optional, at an earlier commit)
#   sh bench/gpu-device.sh BIN OUTDIR [BUDGET_S]
#
# It runs the backend's GPU tests (every op against the reference, events,
# transfers, the queued path across the CPU and the GPU), the benchmarks
# of a queued op's host cost (BenchmarkGPUCalls), of a queued chain
# against a synchronous one, and of a gathered op's host cost in rocm
# alone and through the Executor (BenchmarkGPUGathered{Direct,Executor}),
# then infer on `-backends cpu,rocm` in
# alternating rounds:
#   decode: only:rocm (each step gathered and replayed as a graph),
#   only:rocm -graphs=false (queued op by op), only:rocm -sync, auto and
#   perop (batch 1 and 16), and auto -db (its step modes and posteriors
#   restored from a store one cold run made first: a restarted server);
#   offload: auto, auto -db, perop and the llamacpp rule with -gpu-mem
#   50%, prompts of 34 and 2,048 tokens, 4 batches of requests a run;
#   moe: auto and only:rocm on a mixture of experts (-moe 8,2) at batch 4,
#   whose experts the CPU and the GPU can run at once.
# With BIN/infer.base, each round also runs it on decode at batch 1 and
# 16, only:rocm, right after the same run of BIN/infer (labels ending in
# " base"): an A/B of two builds in the same minutes.
# Each infer run's JSON goes to OUTDIR/infer.jsonl with its label; rounds
# stop starting once BUDGET_S seconds (default 420) have passed (set
# OFFLOAD_PROMPTS= to skip the offload runs, MOE_BATCHES= the MoE runs),
# and the
# medians are printed last (bench/gpu-summary.py).
set -u
bin=$1
out=$2
budget=${3:-420}
start=$(date +%s)
mkdir -p "$out"
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
	[ -d "$d" ] && LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
# pip's CUDA wheels (cuBLAS, NVRTC, the runtime) where no toolkit has them.
for d in $(python3 -c 'import nvidia, os; p = nvidia.__path__[0]; print(" ".join(os.path.join(p, x, "lib") for x in os.listdir(p)))' 2>/dev/null); do
	[ -d "$d" ] && LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d"
done
export LD_LIBRARY_PATH
nvidia-smi -L 2>/dev/null || rocm-smi --showproductname 2>/dev/null || true
nproc

elapsed() { echo $(($(date +%s) - start)); }

echo "== GPU tests"
timeout 150 "$bin/rocm.test" -test.run 'TestGPU' -test.v >"$out/gpu-tests.log" 2>&1
echo "rc $?"
grep -E '^(--- |ok|FAIL|PASS)|GB/s|Info|SKIP|no GPU|Builds' "$out/gpu-tests.log" | head -40
if [ -x "$bin/infer.test" ]; then
	echo "== decode on the GPU against the CPU, queued, sync and gathered"
	timeout 120 "$bin/infer.test" -test.run 'TestRealGPUDecodeMatchesCPU' -test.v >"$out/infer-gpu-test.log" 2>&1
	echo "rc $?"
	grep -E '^(--- |ok|FAIL|PASS)|graphs:|step|SKIP' "$out/infer-gpu-test.log" | head -20
fi
echo "== host cost of a queued op, queued chain ($(elapsed) s)"
timeout 90 "$bin/rocm.test" -test.run '^$' -test.bench 'GPUCalls|GPUQueuedChain|GPUGathered' -test.benchtime 3000x >"$out/gpu-bench.log" 2>&1
grep -E 'Benchmark|ok|FAIL' "$out/gpu-bench.log"

# run LABEL ARGS...: one infer run (of $infer, BIN/infer unless set),
# its JSON line labelled.
infer=$bin/infer
run() {
	label=$1
	shift
	line=$(timeout 90 "$infer" -backends cpu,rocm -json "$@" 2>>"$out/infer.log")
	rc=$?
	echo "{\"label\":\"$label\",\"rc\":$rc,\"run\":${line:-null}}" >>"$out/infer.jsonl"
	echo "$label rc=$rc $(echo "$line" | sed -n 's/.*"tokens_per_s":\([0-9.]*\).*/\1/p') tok/s ($(elapsed) s)"
}

decode="-tokens 128 -warmup 16"
offload="-gpu-mem 50% -tokens 32 -ctx 2560 -requests 4"
echo "== infer"
# One cold run of auto makes each store that the "auto -db" runs restore.
for b in 1 16; do
	run "decode b$b auto -db cold" $decode -batch "$b" -strategy auto -db "$out/db-b$b"
done
for p in ${OFFLOAD_PROMPTS-34 2048}; do
	run "offload p$p auto -db cold" $offload -prompt "$p" -strategy auto -db "$out/db-p$p"
done
r=0
while [ "$(elapsed)" -lt "$budget" ] && [ $r -lt 5 ]; do
	for b in 1 16; do
		# the first strategy rotates between rounds
		set -- only:rocm nograph sync auto perop autodb
		i=0
		while [ $i -lt $((r % 6)) ]; do
			first=$1
			shift
			set -- "$@" "$first"
			i=$((i + 1))
		done
		for st in "$@"; do
			case $st in
			sync) run "decode b$b only:rocm -sync" $decode -batch "$b" -strategy only:rocm -sync ;;
			nograph) run "decode b$b only:rocm -graphs=false" $decode -batch "$b" -strategy only:rocm -graphs=false ;;
			autodb) run "decode b$b auto -db" $decode -batch "$b" -strategy auto -db "$out/db-b$b" ;;
			*) run "decode b$b $st" $decode -batch "$b" -strategy "$st" ;;
			esac
			if [ "$st" = only:rocm ] && [ -x "$bin/infer.base" ]; then
				infer=$bin/infer.base
				run "decode b$b only:rocm base" $decode -batch "$b" -strategy only:rocm
				infer=$bin/infer
			fi
		done
	done
	for p in ${OFFLOAD_PROMPTS-34 2048}; do
		set -- auto perop llamacpp autodb
		[ $((r % 4)) -eq 1 ] && set -- perop llamacpp autodb auto
		[ $((r % 4)) -eq 2 ] && set -- llamacpp autodb auto perop
		[ $((r % 4)) -eq 3 ] && set -- autodb auto perop llamacpp
		for st in "$@"; do
			case $st in
			autodb) run "offload p$p auto -db" $offload -prompt "$p" -strategy auto -db "$out/db-p$p" ;;
			*) run "offload p$p $st" $offload -prompt "$p" -strategy "$st" ;;
			esac
		done
	done
	for b in ${MOE_BATCHES-4}; do
		set -- auto only:rocm
		[ $((r % 2)) -eq 1 ] && set -- only:rocm auto
		for st in "$@"; do
			run "moe b$b $st" $decode -moe 8,2 -batch "$b" -strategy "$st"
		done
	done
	r=$((r + 1))
done
echo "== host profile of gathered decode at batch 1 ($(elapsed) s)"
timeout 60 "$bin/infer" -backends cpu,rocm -json -tokens 1000 -ctx 1100 -warmup 16 -batch 1 -strategy only:rocm -cpuprofile "$out/gathered-b1.pprof" >"$out/profile-run.json" 2>>"$out/infer.log"
echo "rc $?"
echo "== summary ($(elapsed) s)"
python3 "$(dirname "$0")/gpu-summary.py" "$out/infer.jsonl" | tee "$out/summary.txt"
