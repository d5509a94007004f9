package trace

import (
	"bytes"
	"compress/gzip"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const tracesDir = "testdata/traces"

// The importer on both real traces (provenance in
// testdata/traces/PROVENANCE.md, licence in testdata/traces/LICENSE). The
// expected counts come from testdata/chrome_counts.py, an independent brute-force reading of the
// same files with Python's json module (python3 testdata/chrome_counts.py
// FILE): CPUOps = events with ph X and cat cpu_op; WithShapes = of those,
// with at least one non-empty, all-positive Input Dims entry; Kernels =
// cat kernel; Joined = kernels whose args.correlation names a runtime
// event enclosed by some cpu_op of its thread; the sums are of their dur.
// Imported, Mapped and Outside follow ImportChrome's documented rule,
// re-derived there from scratch (parents by interval containment; at
// equal spans, which integer-µs timestamps produce, the later event in
// the file is the nested one).
func TestImportChromeReal(t *testing.T) {
	for _, c := range []struct {
		file string
		want ChromeCounts
	}{
		{"mi250_minitoy_train_ROCm6_2_kineto.json.gz", ChromeCounts{
			CPUOps: 70, WithShapes: 50, Imported: 19, Mapped: 4, Opaque: 15, Kernels: 14, Joined: 14, Unjoined: 0, Outside: 1,
			KernelUs: 110.881, JoinedUs: 110.881, ImportedUs: 107.521}},
		{"sampled_rank-0.json.gz", ChromeCounts{
			CPUOps: 2329, WithShapes: 1871, Imported: 946, Mapped: 481, Opaque: 465, Kernels: 1154, Joined: 1138, Unjoined: 16, Outside: 55,
			KernelUs: 606519, JoinedUs: 605900, ImportedUs: 492839}},
	} {
		f, err := os.Open(filepath.Join(tracesDir, c.file))
		if err != nil {
			t.Fatal(err)
		}
		ct, err := ImportChrome(f, c.file)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		got := ct.Counts
		for _, p := range []*float64{&got.KernelUs, &got.JoinedUs, &got.ImportedUs} {
			*p = math.Round(*p*1000) / 1000
		}
		if got != c.want {
			t.Errorf("%s:\n got %+v\nwant %+v", c.file, got, c.want)
		}
		// Every imported op is a valid spec, durations add up, Seq numbers
		// them in start order.
		sum, kernels := 0.0, 0
		for i, op := range ct.Ops {
			if _, err := op.Spec(); err != nil {
				t.Errorf("%s: op %d (%s): %v", c.file, i, op.Source, err)
			}
			if op.Seq != int64(i) || (i > 0 && op.TsUs < ct.Ops[i-1].TsUs) || op.Backend != "gpu" {
				t.Errorf("%s: op %d out of order or without backend", c.file, i)
			}
			if op.Kernels == 0 && op.ActualUs != 0 {
				t.Errorf("%s: op %d has a duration without kernels", c.file, i)
			}
			sum += op.ActualUs
			kernels += op.Kernels
		}
		if kernels != got.Joined-got.Outside || math.Abs(sum-ct.Counts.ImportedUs) > 1e-6 {
			t.Errorf("%s: ops hold %d kernels (%v µs), counts say %d (%v)", c.file, kernels, sum, got.Joined-got.Outside, got.ImportedUs)
		}
	}
}

// The mi250 trace's forward pass: aten::linear (input [5,128], weight
// [128,128]) maps to MatMul [5x128 128x128] with the kernels of the addmm
// nested in it folded in.
func TestImportChromeLinear(t *testing.T) {
	f, err := os.Open(filepath.Join(tracesDir, "mi250_minitoy_train_ROCm6_2_kineto.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ct, err := ImportChrome(f, "mi250")
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range ct.Ops {
		if op.Source == "aten::linear" {
			if op.Op != "MatMul" || !op.Mapped || op.Kernels == 0 || op.Nested < 2 || op.ActualUs <= 0 ||
				len(op.Shape) != 2 || op.Shape[0][0] != 5 || op.Shape[0][1] != 128 || op.Shape[1][0] != 128 || op.Shape[1][1] != 128 {
				t.Errorf("linear imported as %+v", op)
			}
			return
		}
	}
	t.Error("no aten::linear imported")
}

// The 2021 format joins kernels through External id.
func TestImportChromeLegacy(t *testing.T) {
	in := `{"traceEvents":[
 {"ph":"X","cat":"Operator","name":"aten::mm","pid":1,"tid":1,"ts":0,"dur":100,"args":{"External id":7,"Input Dims":[[8,16],[16,4]],"Input type":["float","float"]}},
 {"ph":"X","cat":"Operator","name":"aten::cat","pid":1,"tid":1,"ts":200,"dur":50,"args":{"External id":8,"Input Dims":[[[2,3],[2,3]],[]]}},
 {"ph":"X","cat":"Runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":10,"dur":5,"args":{"correlation":99,"External id":7}},
 {"ph":"X","cat":"Kernel","name":"gemm","pid":0,"tid":7,"ts":300,"dur":12.5,"args":{"correlation":1,"External id":7}},
 {"ph":"X","cat":"Kernel","name":"gemm2","pid":0,"tid":7,"ts":320,"dur":2.5,"args":{"External id":7}},
 {"ph":"X","cat":"Kernel","name":"cat","pid":0,"tid":7,"ts":330,"dur":1,"args":{"External id":8}},
 {"ph":"X","cat":"Kernel","name":"lost","pid":0,"tid":7,"ts":340,"dur":1,"args":{"External id":9}}
]}`
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write([]byte(in))
	w.Close()
	ct, err := ImportChrome(&gz, "legacy")
	if err != nil {
		t.Fatal(err)
	}
	if !ct.Legacy || len(ct.Ops) != 2 || ct.Counts.Joined != 3 || ct.Counts.Unjoined != 1 {
		t.Fatalf("%+v", ct)
	}
	mm, cat := ct.Ops[0], ct.Ops[1]
	if mm.Op != "MatMul" || mm.ActualUs != 15 || mm.Kernels != 2 || mm.LaunchUs != 100 {
		t.Errorf("mm: %+v", mm)
	}
	if cat.Op != "Opaque" || cat.Params.Name != "aten::cat" || len(cat.Shape) != 2 || cat.ActualUs != 1 {
		t.Errorf("cat: %+v", cat)
	}
}

func TestImportChromeErrors(t *testing.T) {
	for _, in := range []string{"", "[]", `{"traceEvents":{}}`, `{"x":1}`, `{"traceEvents":[{"ph":1}]}`, "\x1f\x8bxx",
		`{"traceEvents":[]}garbage`, `{"traceEvents":[]}{"traceEvents":[]}`, `{"traceEvents":[]`} {
		if _, err := ImportChrome(strings.NewReader(in), "bad"); !errors.Is(err, ErrChrome) || !strings.Contains(err.Error(), "bad") {
			t.Errorf("%q: %v", in, err)
		}
	}
}

// A complete event without a numeric ts or dur, and a second traceEvents
// key, are rejected with the event's index and the offset: read as 0 or
// appended, they would silently replace or double measured times.
func TestImportChromeMissingTimes(t *testing.T) {
	const op = `{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":0,"dur":9}`
	const i = `{"ph":"i","cat":"cpu_op","name":"mark","pid":1,"tid":1,"ts":4}`
	for _, c := range []struct{ in, msg string }{
		{`{"traceEvents":[` + op + `,{"ph":"X","cat":"kernel","name":"k","ts":3,"args":{"correlation":5}}]}`, `traceEvents[1] ("kernel" "k"): no dur`},
		{`{"traceEvents":[` + op + `,{"ph":"X","cat":"kernel","name":"k","ts":3,"dur":null}]}`, `traceEvents[1] ("kernel" "k"): no dur`},
		{`{"traceEvents":[` + i + `,{"ph":"X","cat":"cpu_op","name":"aten::mm","dur":9}]}`, `traceEvents[1] ("cpu_op" "aten::mm"): no ts`},
		{`{"traceEvents":[{"ph":"X","cat":"cpu_op","name":"aten::mm","ts":null,"dur":null}]}`, `traceEvents[0] ("cpu_op" "aten::mm"): no ts`},
		{`{"traceEvents":[` + op + `],"traceEvents":[` + op + `]}`, "a second traceEvents key"},
		{`{"traceEvents":[],"other":1,"traceEvents":[]}`, "a second traceEvents key"},
	} {
		_, err := ImportChrome(strings.NewReader(c.in), "bad.json")
		if !errors.Is(err, ErrChrome) || !strings.Contains(err.Error(), "bad.json:1:") || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v; want %q", c.in, err, c.msg)
		}
	}
	// Events other than complete ones need no dur.
	if _, err := ImportChrome(strings.NewReader(`{"traceEvents":[`+i+`,`+op+`]}`), "ok"); err != nil {
		t.Errorf("instant event without dur: %v", err)
	}
}

// TestImportChromeErrorPlace: an error names the file's line and column,
// of the decompressed JSON for a gzipped trace, so that it reads the same
// for trace.json and trace.json.gz: the event's start for a bad event,
// where the decoder stopped otherwise. It named a decoder offset, after
// the event for a bad field and before it for bad syntax, that a .gz's
// name made read as a place in the compressed file.
func TestImportChromeErrorPlace(t *testing.T) {
	const op = `{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":0,"dur":9}`
	head := "{\"traceEvents\": [\n  " + op + ",\n  " + op + ",\n  "
	for _, c := range []struct{ in, want string }{
		{head + `{"ph":"X","cat":"kernel","name":"k","ts":3}` + "\n]}", `:4:3: traceEvents[2] ("kernel" "k"): no dur`},
		{head + `{"ph":"X","cat":"kernel","name":"k","ts":3,"dur":-1}` + "\n]}", `:4:3: traceEvents[2] ("kernel" "k"): dur -1`},
		{head + `{"ph":"X","cat":"kernel","name":"k","ts":"3"}` + "\n]}", `:4:3: traceEvents[2]: json: cannot unmarshal string`},
		{head + `{"ph":"X",, "cat":"kernel"}` + "\n]}", `:4:3: traceEvents[2]: invalid character ','`},
		{head + op + "\n]}\n{}", `:6:1: data after the end of the trace's object`},
		{"\n\n  [1]", `:3:3: not a JSON object`},
		{"{\"traceEvents\":\n {}}", `:2:2: traceEvents is not an array`},
	} {
		_, plain := ImportChrome(strings.NewReader(c.in), "t.json")
		var b bytes.Buffer
		z := gzip.NewWriter(&b)
		z.Write([]byte(c.in))
		z.Close()
		_, gz := ImportChrome(&b, "t.json.gz")
		if !errors.Is(plain, ErrChrome) || !strings.HasPrefix(plain.Error(), "trace: bad chrome trace: t.json"+c.want) {
			t.Errorf("%q: %v, want t.json%s", c.in, plain, c.want)
		}
		if !errors.Is(gz, ErrChrome) || plain == nil || gz.Error() != strings.Replace(plain.Error(), "t.json", "t.json.gz", 1) {
			t.Errorf("%q: gzipped %v, want the plain one's %v", c.in, gz, plain)
		}
	}
}

// FuzzImportChrome: any input gives a result or an ErrChrome, never a
// panic, and the counts stay consistent.
func FuzzImportChrome(f *testing.F) {
	f.Add(`{"traceEvents":[{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":0,"dur":9,"args":{"Input Dims":[[2,3],[3,4]]}},{"ph":"X","cat":"cuda_runtime","pid":1,"tid":1,"ts":1,"dur":1,"args":{"correlation":5}},{"ph":"X","cat":"kernel","ts":3,"dur":2,"args":{"correlation":5}}]}`)
	f.Add(`{"traceEvents":[{"ph":"X","cat":"cpu_op","name":"aten::linear","pid":1,"tid":1,"ts":0,"dur":9,"args":{"Input Dims":[[2,3,0,5,6,7],[[1]],[-1]]}}]}`)
	f.Fuzz(func(t *testing.T, in string) {
		ct, err := ImportChrome(strings.NewReader(in), "fuzz")
		if err != nil {
			if !errors.Is(err, ErrChrome) {
				t.Fatalf("error %v does not wrap ErrChrome", err)
			}
			return
		}
		c := ct.Counts
		if c.Joined+c.Unjoined != c.Kernels || c.Mapped+c.Opaque != c.Imported || len(ct.Ops) != c.Imported {
			t.Fatalf("inconsistent counts %+v", c)
		}
		for _, op := range ct.Ops {
			if op.Mapped {
				if _, err := op.Spec(); err != nil {
					t.Fatalf("mapped op %+v: %v", op, err)
				}
			}
		}
	})
}
