#!/usr/bin/env python3
"""gpu-summary.py: medians and ratios of bench/gpu-device.sh's infer runs.

Reads infer.jsonl (one {"label", "rc", "run"} a line) and prints, per
label, the runs, the median decode tokens/s (infer's tokens_per_s, wall
clock) and the median served tokens/s ((prompt + generated tokens) over
the run's seconds), then the ratios the issues ask for: only:rocm
(gathered and replayed as graphs) and only:rocm -graphs=false (queued op
by op) over -sync, auto (and auto -db, restored from a store, and perop,
the per-op learner alone) over only:rocm, and over the llamacpp rule, and on the mixture of experts auto
over only:rocm.
Every ratio is of medians over runs alternated in the same minutes;
beside it, "paired" is the geometric mean of each round's ratio with its
standard error: the k-th run of one label against the k-th of the other
in the same file, which both scripts run in the same round. Several
files (several machines or sessions) pool their rounds.
"""
import json
import math
import statistics
import sys


def main(paths):
    runs = {}
    failed = {}
    graphs = {}
    rounds = []  # per file: label -> [(decode, served)] in run order
    for path in paths:
        byfile = {}
        rounds.append(byfile)
        with open(path) as f:
            for line in f:
                rec = json.loads(line)
                r = rec.get("run")
                if rec.get("rc") != 0 or not r:
                    failed[rec["label"]] = failed.get(rec["label"], 0) + 1
                    continue
                served = (r.get("prompt_tokens", 0) + r["tokens"]) / r["seconds"]
                runs.setdefault(rec["label"], []).append((r["tokens_per_s"], served, r.get("share", {})))
                byfile.setdefault(rec["label"], []).append((r["tokens_per_s"], served))
                if r.get("graphs") and rec["label"] not in graphs:
                    graphs[rec["label"]] = (r.get("gathered_steps"), r["graphs"])
    med = {}
    print("label | runs | failed | decode tok/s (median; all) | served tok/s (median) | GPU share")
    for label in sorted(runs):
        v = runs[label]
        dec = statistics.median(x[0] for x in v)
        srv = statistics.median(x[1] for x in v)
        gpu = statistics.median(x[2].get("rocm", 0) for x in v)
        med[label] = (dec, srv)
        allv = ", ".join("%.0f" % x[0] for x in v)
        print("%s | %d | %d | %.1f; %s | %.1f | %.2f" % (label, len(v), failed.get(label, 0), dec, allv, srv, gpu))
    for label in sorted(set(failed) - set(runs)):
        print("%s | 0 | %d | - | - | -" % (label, failed[label]))
    for label in sorted(graphs):
        print("%s: gathered steps %s, graphs %s" % (label, graphs[label][0], json.dumps(graphs[label][1])))

    def ratio(name, a, b, i):
        if a not in med or b not in med:
            return
        logs = []
        for byfile in rounds:
            logs += [math.log(x[i] / y[i]) for x, y in zip(byfile.get(a, []), byfile.get(b, []))]
        paired = ""
        if len(logs) > 1:
            se = statistics.stdev(logs) / math.sqrt(len(logs))
            paired = "; paired %.3f ± %.3f over %d rounds" % (math.exp(statistics.mean(logs)), se, len(logs))
        print("%s: %.3f%s" % (name, med[a][i] / med[b][i], paired))

    for b in (1, 16):
        ratio("b%d gathered / -sync (only:rocm)" % b, "decode b%d only:rocm" % b, "decode b%d only:rocm -sync" % b, 0)
        ratio("b%d queued op by op / -sync (only:rocm)" % b, "decode b%d only:rocm -graphs=false" % b, "decode b%d only:rocm -sync" % b, 0)
        ratio("b%d gathered / queued op by op" % b, "decode b%d only:rocm" % b, "decode b%d only:rocm -graphs=false" % b, 0)
        for st in ("auto", "auto -db", "perop"):
            ratio("b%d %s / only:rocm" % (b, st), "decode b%d %s" % (b, st), "decode b%d only:rocm" % b, 0)
    for p in (34, 2048):
        for st in ("auto", "auto -db", "perop"):
            ratio("offload p%d %s / llamacpp (served)" % (p, st), "offload p%d %s" % (p, st), "offload p%d llamacpp" % p, 1)
    for b in (1, 4, 16):
        ratio("moe b%d auto / only:rocm" % b, "moe b%d auto" % b, "moe b%d only:rocm" % b, 0)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: gpu-summary.py INFER.JSONL...")
    main(sys.argv[1:])
