#!/usr/bin/env python3
"""Independent reference for TestImportChromeReal: counts the ops and
kernels of a Kineto trace by brute force (no sorting, no stacks), with the
rules documented on history.ImportChrome. Usage: chrome_counts.py FILE.json.gz"""
import gzip, json, sys

ev = json.load(gzip.open(sys.argv[1]))["traceEvents"]
X = [e for e in ev if e.get("ph") == "X"]
ops = [e for e in X if e.get("cat") in ("cpu_op", "Operator")]
rts = {e["args"]["correlation"]: e for e in X
       if e.get("cat") in ("cuda_runtime", "cuda_driver", "hip_runtime", "Runtime") and "correlation" in e.get("args", {})}
kers = [e for e in X if e.get("cat") in ("kernel", "Kernel")]

def thread(e): return (e["pid"], e["tid"])
def encloses(o, t): return o["ts"] <= t <= o["ts"] + o["dur"]


def tensors(o):
    out, first_type = [], None
    types = o["args"].get("Input type", [])
    for i, d in enumerate(o["args"].get("Input Dims", [])):
        if d and all(isinstance(x, int) for x in d):
            if all(x > 0 for x in d):
                if not out and i < len(types): first_type = types[i]
                out.append(d)
        elif d and all(isinstance(x, list) for x in d):
            out += [s for s in d if s and all(x > 0 for x in s)]
    return out, first_type

# Parent: of the other ops of the thread whose span holds the op's start
# (ts <= start < ts+dur; the profiler rounds, so a child may end a little
# after its parent), the latest-starting one. At equal starts the longer
# op is the parent; at equal spans the earlier in the file.
idx = {id(o): i for i, o in enumerate(ops)}
def before(p, o): return (p["ts"], -p["dur"], idx[id(p)]) < (o["ts"], -o["dur"], idx[id(o)])
parent = {}
for o in ops:
    c = [p for p in ops if p is not o and thread(p) == thread(o) and p["ts"] <= o["ts"] < p["ts"] + p["dur"] and before(p, o)]
    parent[id(o)] = max(c, key=lambda p: (p["ts"], -p["dur"], idx[id(p)])) if c else None

# The innermost op enclosing t: the latest-starting one (at equal spans,
# which integer-µs traces have, the later in the file: the nested one).
def innermost(th, t):
    c = [o for o in ops if thread(o) == th and encloses(o, t)]
    return max(c, key=lambda p: (p["ts"], -p["dur"], idx[id(p)])) if c else None

own = {id(o): [0, 0.0] for o in ops}
joined = joined_us = 0
for k in kers:
    rt = rts.get(k["args"].get("correlation"))
    leaf = innermost(thread(rt), rt["ts"]) if rt else None
    if leaf is None: continue
    joined += 1; joined_us += k["dur"]
    own[id(leaf)][0] += 1; own[id(leaf)][1] += k["dur"]

MAT = {"aten::mm", "aten::bmm", "aten::matmul", "aten::addmm", "aten::baddbmm", "aten::linear"}
OTHER = {"aten::softmax", "aten::_softmax", "aten::layer_norm", "aten::native_layer_norm", "aten::rms_norm",
         "aten::gelu", "aten::gelu_", "aten::silu", "aten::silu_", "aten::scaled_dot_product_attention"}
def maps(o):
    t, ty = tensors(o)
    if not t or (ty not in (None, "", "float")): return False
    n = o["name"]
    if n in ("aten::mm", "aten::bmm"): return len(t) >= 2 and t[0][-1] == t[1][-2]
    if n in ("aten::addmm", "aten::baddbmm"): return len(t) >= 3 and t[1][-1] == t[2][-2]
    if n == "aten::linear": return len(t) >= 2 and len(t[1]) == 2 and t[0][-1] == t[1][1]
    if n == "aten::matmul": return len(t) >= 2 and t[0][-1] == t[1][0 if len(t[1]) == 1 else -2]
    if n in ("aten::add", "aten::add_", "aten::mul", "aten::mul_"):
        return len(t) == 2 and len(t[1]) <= len(t[0]) and t[0][len(t[0]) - len(t[1]):] == t[1]
    return n in OTHER

children = {id(o): [c for c in ops if parent[id(c)] is o] for o in ops}
def sub_maps(o): return any(maps(c) or sub_maps(c) for c in children[id(o)])
def subtree(o): return [o] + [d for c in children[id(o)] for d in subtree(c)]

imported, outside = [], 0
def visit(o):
    global outside
    if tensors(o)[0] and (maps(o) or not sub_maps(o)):
        imported.append(o); return
    outside += own[id(o)][0]
    for c in children[id(o)]: visit(c)
for o in ops:
    if parent[id(o)] is None: visit(o)

mapped = sum(1 for o in imported if maps(o))
imp_us = sum(own[id(d)][1] for o in imported for d in subtree(o))
print(json.dumps(dict(CPUOps=len(ops), WithShapes=sum(1 for o in ops if tensors(o)[0]),
      Imported=len(imported), Mapped=mapped, Opaque=len(imported) - mapped,
      Kernels=len(kers), Joined=joined, Unjoined=len(kers) - joined, Outside=outside,
      KernelUs=round(sum(k["dur"] for k in kers), 3), JoinedUs=round(joined_us, 3), ImportedUs=round(imp_us, 3))))
