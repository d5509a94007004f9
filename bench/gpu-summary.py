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
Every ratio is of medians over runs alternated in the same minutes.
"""
import json
import statistics
import sys


def main(path):
    runs = {}
    failed = {}
    graphs = {}
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            r = rec.get("run")
            if rec.get("rc") != 0 or not r:
                failed[rec["label"]] = failed.get(rec["label"], 0) + 1
                continue
            served = (r.get("prompt_tokens", 0) + r["tokens"]) / r["seconds"]
            runs.setdefault(rec["label"], []).append((r["tokens_per_s"], served, r.get("share", {})))
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
        if a in med and b in med:
            print("%s: %.3f" % (name, med[a][i] / med[b][i]))

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
    main(sys.argv[1])
