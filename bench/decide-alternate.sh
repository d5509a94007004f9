#!/bin/sh
# decide-alternate.sh: adaptive's Select+Observe benchmarks of several
# builds, in alternating 1 s runs, as BENCHMARKS.md quotes them: these
# machines are shared, so only runs taken in the same minutes compare.
# Each build is REV or REV=BENCH: a commit (or `work`, the working tree)
# whose adaptive test binary runs BENCH (default: the first argument), so
# that a build older than the handle API runs its by-spec case (ebb3480,
# the issue's baseline). Every round runs each build once, the first to
# go rotating.
#
# usage: bench/decide-alternate.sh ROUNDS BENCH BUILD...
#   e.g. bench/decide-alternate.sh 8 SelectObserve/handle/2backends/serial \
#          ebb3480=SelectObserve/2backends/serial 03f602a work
# prints one line per round (each build's ns/op, then each over the
# first build), then each build's median over the rounds and its median
# per-round ratio to the first build. A run above 1.4 times its build's
# median is marked slow and left out of both medians: this 2-core VM at
# times runs a whole process about 1.6 times slower (the same binary back
# at its usual figure a minute later), which would otherwise decide a
# ratio by which build drew it.
set -eu
[ $# -ge 3 ] || { echo "usage: $0 ROUNDS BENCH BUILD..." >&2; exit 2; }
rounds=$1
bench=$2
shift 2
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'git worktree prune; rm -rf "$tmp"' EXIT INT TERM
i=0
names=""
for b in "$@"; do
	rev=${b%%=*}
	names="$names $rev"
	if [ "$rev" = work ]; then
		go test -c -o "$tmp/bin$i" ./adaptive
	else
		git worktree add -q --detach "$tmp/wt$i" "$rev"
		(cd "$tmp/wt$i" && go test -c -o "$tmp/bin$i" ./adaptive)
		git worktree remove --force "$tmp/wt$i"
	fi
	case $b in
	*=*) echo "${b#*=}" >"$tmp/bench$i" ;;
	*) echo "$bench" >"$tmp/bench$i" ;;
	esac
	i=$((i + 1))
done
n=$i
uptime
for r in $(seq 0 $((rounds - 1))); do
	for k in $(seq 0 $((n - 1))); do
		j=$(((r + k) % n))
		ns=$(cd adaptive && "$tmp/bin$j" -test.run '^$' -test.bench "$(cat "$tmp/bench$j")" -test.benchtime 1s |
			awk '/^Benchmark/ { for (f = 3; f <= NF; f++) if ($(f + 1) == "ns/op") { print $f; exit } }')
		echo "$r $j ${ns:-NaN}" >>"$tmp/runs"
	done
done
uptime
awk -v n="$n" -v names="$names" '
function median(a, m,   i, j, t) {
	for (i = 2; i <= m; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
	return m % 2 ? a[(m+1)/2] : (a[m/2] + a[m/2+1]) / 2
}
{ v[$1, $2] = $3; if ($1 + 1 > R) R = $1 + 1 }
END {
	split(names, nm, " ")
	for (j = 0; j < n; j++) { m = 0; for (r = 0; r < R; r++) all[++m] = v[r, j]; med[j] = median(all, m) }
	for (r = 0; r < R; r++) {
		line = "round " r ":"
		for (j = 0; j < n; j++) {
			slow[r, j] = v[r, j] > 1.4 * med[j]
			line = line sprintf(" %s %.1f%s", nm[j+1], v[r, j], slow[r, j] ? " (slow)" : "")
		}
		for (j = 1; j < n; j++) line = line sprintf(" | %.3f", v[r, j] / v[r, 0])
		print line
	}
	for (j = 0; j < n; j++) {
		m = 0; q = 0
		for (r = 0; r < R; r++) {
			if (slow[r, j]) continue
			x[++m] = v[r, j]
			if (j > 0 && !slow[r, 0]) y[++q] = v[r, j] / v[r, 0]
		}
		line = sprintf("%s: median %.1f ns/op over %d runs", nm[j+1], median(x, m), m)
		if (j > 0 && q > 0) line = line sprintf(", %.3f of %s per round (median of %d)", median(y, q), nm[1], q)
		print line
	}
}' "$tmp/runs"
