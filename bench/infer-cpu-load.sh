#!/bin/sh
# infer-cpu-load.sh: the issue's cpu,cpu1 decode target, run as a user
# would: `infer -backends cpu,cpu1`, 256 tokens a request, at batch 1 and
# 16, strategies auto, only:cpu and only:cpu1 alternating within each
# round (the first to go rotates), first on the machine as it is, then
# with this script's own load: one process spinning on one core, started
# before those runs and killed after them (and on exit).
#
# usage: bench/infer-cpu-load.sh [ROUNDS [EXTRA INFER FLAGS...]]
# prints one line per run: load batch strategy tokens_per_s, then the
# medians; `uptime` before and after says how busy the machine was.
set -eu
rounds=${1:-3}
[ $# -gt 0 ] && shift
extra="$*"
cd "$(dirname "$0")/.."
bin=$(mktemp -d)/infer
go build -o "$bin" ./cmd/infer
spin=""
stop_load() {
	if [ -n "$spin" ]; then
		kill "$spin" 2>/dev/null || true
		wait "$spin" 2>/dev/null || true
	fi
	spin=""
}
trap stop_load EXIT INT TERM
out=$(mktemp)
uptime
for load in none one-core; do
	if [ "$load" = one-core ]; then
		sh -c 'while :; do :; done' &
		spin=$!
	fi
	for batch in 1 16; do
		for r in $(seq 0 $((rounds - 1))); do
			for k in 0 1 2; do
				st=$(echo auto only:cpu only:cpu1 | cut -d' ' -f$(( (r + k) % 3 + 1 )))
				# shellcheck disable=SC2086 # the extra flags are words
				tps=$("$bin" -backends cpu,cpu1 -strategy "$st" -tokens 256 -batch "$batch" -json $extra 2>/dev/null |
					sed -n 's/.*"tokens_per_s":\([0-9.]*\).*/\1/p')
				echo "$load $batch $st $tps" | tee -a "$out"
			done
		done
	done
	stop_load
done
uptime
echo "medians (load batch strategy tokens/s):"
sort -k1,1 -k2,2n -k3,3 -k4,4n "$out" | awk '
	{ k = $1" "$2" "$3; v[k, ++n[k]] = $4 }
	END { for (k in n) { m = n[k]; print k, (m % 2 ? v[k, (m + 1) / 2] : (v[k, m / 2] + v[k, m / 2 + 1]) / 2) } }' | sort
