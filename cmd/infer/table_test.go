package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/fleet"
)

// TestPlacementTableWidth: the final table fits 100 columns with two
// backends, however long a bucket's or a shape's name (it took 148),
// a shape's row follows its bucket, and the columns are explained.
func TestPlacementTableWidth(t *testing.T) {
	arms := func(n0, n1 int64) []adaptive.ArmTelemetry {
		return []adaptive.ArmTelemetry{{Backend: "sim:h100", N: n0, MeanUs: 9.4}, {Backend: "sim:cpu2", N: n1, MeanUs: 1410.6}}
	}
	parent := "QuantizedMatMul/q8_0/s44"
	tel := adaptive.Telemetry{
		Backends: []adaptive.BackendTelemetry{{Name: "sim:h100"}, {Name: "sim:cpu2"}},
		Buckets: []adaptive.BucketTelemetry{
			{Name: parent + " QuantizedMatMul q8_0 [1x2048 768x2048]", Parent: parent, Incumbent: "sim:h100", Arms: arms(257, 0)},
			{Name: "Attention/f32/s26 Attention f32 [1x12x1x64 1x4x10x64 1x4x10x64 1x4x10x64 1x4x10x64]", Parent: "Attention/f32/s26", Incumbent: "sim:cpu2", Arms: arms(0, 17)},
			{Name: parent, Incumbent: "sim:h100", Switches: 12345, Alarms: 678, Arms: arms(791, 1)},
			{Name: "Attention/f32/s26", Incumbent: "sim:cpu2", Arms: arms(0, 48)},
			{Name: "Idle/f32/s1", Arms: arms(0, 0)},
		},
	}
	var b bytes.Buffer
	if err := placementTable(&b, tel); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	for _, l := range lines {
		if n := utf8.RuneCountInString(l); n > tableWidth {
			t.Errorf("a line of %d columns: %q", n, l)
		}
	}
	at := func(s string) int { return strings.Index(out, s) }
	if !(at(parent) < at("└ [1x2048 768x2048]") && at("Attention/f32/s26") < at("└ [1x12x1x64")) || at("Idle") >= 0 {
		t.Errorf("shape rows do not follow their buckets, or an idle bucket is shown:\n%s", out)
	}
	for _, want := range []string{"on: the incumbent", "alarms:", "sw:", "└\" row is a shape"} {
		if !strings.Contains(out, want) {
			t.Errorf("the legend does not explain %q:\n%s", want, out)
		}
	}
}

// TestHeadlineLast: the summary line is the last of the output, where a
// terminal leaves it in view, below the table.
func TestHeadlineLast(t *testing.T) {
	var out, errb bytes.Buffer
	args := append([]string{}, tinyArgs[:len(tinyArgs)-1]...) // without -json
	if err := run(context.Background(), args, &out, &errb); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, "tokens/s") || !strings.HasPrefix(lines[0], "bucket") {
		t.Errorf("output does not start with the table and end with the headline:\n%s", out.String())
	}
}

// TestJSONKeysSnakeCase: every key of -json's object is snake_case, the
// fleet's counters included (they came out as Go's field names).
func TestJSONKeysSnakeCase(t *testing.T) {
	b, err := json.Marshal(Summary{Fleet: fleetSummary(fleet.Stats{Synced: true}), StepModelledUs: []float64{1}})
	if err != nil {
		t.Fatal(err)
	}
	var walk func(v any)
	walk = func(v any) {
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		for k, sub := range m {
			if !regexp.MustCompile(`^[a-z][a-z0-9_]*$`).MatchString(k) {
				t.Errorf("key %q is not snake_case", k)
			}
			walk(sub)
		}
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	walk(v)
	if !strings.Contains(string(b), `"synced":true`) {
		t.Errorf("fleet counters missing: %s", b)
	}
}

// TestFlagErrorsOnce: a bad flag, a bad value or flags that do not go
// together print one line and the hint, once, and exit 2, as replay's do
// (infer printed the whole usage, then the error again, and exited 1).
func TestFlagErrorsOnce(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-nope"}, "flag provided but not defined: -nope"},
		{[]string{"-tokens", "x"}, `invalid value "x" for flag -tokens`},
		{[]string{"-tokens", "0"}, "-tokens, -batch and -ubatch must be positive"},
		{[]string{"stray"}, `unexpected argument "stray"`},
		{[]string{"-gpu-mem", "lots"}, `-gpu-mem "lots": not a size`},
		{[]string{"-gpu-mem", "150%"}, `-gpu-mem "150%": not a share from 0% to 100%`},
		{[]string{"-gpu-mem", "-4G"}, `-gpu-mem "-4G": not a size`},
		{[]string{"-backends", "cpu,sim:pcie3x8", "-gpu-mem", "30G"}, `-gpu-mem "30G": 30.00 GiB of weights exceed sim:pcie3x8's memory of 24.00 GiB`},
		{[]string{"-prompt", "34,0"}, `-prompt "34,0": "0" is not a positive number of tokens`},
		{[]string{"-ubatch", "0"}, "-tokens, -batch and -ubatch must be positive"},
		{[]string{"-moe", "8"}, `-moe "8": want E,K with 1 <= K <= E`},
		{[]string{"-moe", "4,5"}, `-moe "4,5": want E,K with 1 <= K <= E`},
		{[]string{"-routing", "x.json"}, "-routing and -routing-drift need -moe E,K"},
		{[]string{"-moe", "8,2", "-zipf", "NaN"}, "-zipf: sim: bad routing: zipf over 12 layers of 8 experts, exponent NaN"},
		{[]string{"-moe", "8,2", "-requests", "4", "-routing-drift", "x.json"}, `-routing-drift "x.json": want FILE@F`},
		{[]string{"-backends", "cpu,nope"}, `infer: -backends: backends: unknown backend "nope" (registered: `},
		{[]string{"-backends", ""}, `infer: -backends: backends: unknown backend "" (registered: `},
		{[]string{"-backends", "cpu,sim"}, "-backends: backends: sim unavailable: no profile named"},
		{[]string{"-backends", "cpu,sim:tpu9"}, `-backends: backends: sim:tpu9 unavailable: sim: unknown profile "tpu9"`},
		{[]string{"-backends", "sim:tpu9,sim:h100"}, `-backends: backends: sim:tpu9 unavailable: sim: unknown profile "tpu9"`},
		{[]string{"-dim", "2147483648", "-heads", "1073741824"}, "-dim 2147483648 is too large (at most 1048576)"},
		{[]string{"-layers", "5000"}, "-layers 5000 is too large (at most 4096)"},
		{[]string{"-moe", "1000,2"}, `-moe "1000,2": want E,K with 1 <= K <= E <= 256`},
		{[]string{"-ctx", "16", "-prompt", "4", "-tokens", "9223372036854775807"}, "-prompt 4 and -tokens 9223372036854775807 need 9223372036854775810 positions of the KV cache, more than -ctx 16"},
		{[]string{"-ctx", "16", "-prompt", "4", "-tokens", "100"}, "-prompt 4 and -tokens 100 need 103 positions of the KV cache, more than -ctx 16"},
		{[]string{"-ctx", "16", "-prompt", "9223372036854775807", "-tokens", "1"}, "-prompt 9223372036854775807 and -tokens 1 need 9223372036854775807 positions of the KV cache, more than -ctx 16"},
		{[]string{"-metrics", ":99999"}, `infer: -metrics ":99999": address 99999: invalid port`},
		{[]string{"-metrics", "localhost:-1"}, `infer: -metrics "localhost:-1": address -1: invalid port`},
		{[]string{"-backends", "sim:h100,sim:h100"}, `infer: -backends: backend "sim:h100" given twice`},
		{[]string{"-backends", "sim:h100,sim:cpu2", "-strategy", "only:nope"}, `infer: -strategy only:nope: no backend "nope" in -backends (sim:h100, sim:cpu2)`},
		{[]string{"-strategy", "bogus"}, `infer: unknown -strategy "bogus"`},
		{[]string{"-backends", "cpu", "-strategy", "oracle"}, `infer: -strategy oracle needs simulated backends`},
		{[]string{"-backends", "cpu,cpu1", "-strategy", "llamacpp"}, "infer: -strategy llamacpp needs a CPU and a GPU backend"},
		// Flags that nothing would read: accepted, each was dropped.
		{[]string{"-zipf", "2"}, "-zipf skews the popularity of -moe's experts: use it with -moe E,K"},
		{[]string{"-moe", "8,2", "-routing", "x.json", "-zipf", "2"}, "-zipf and -routing both route -moe's tokens"},
		{[]string{"-step-times"}, "-step-times adds each step's times to the -json summary: use it with -json"},
		{[]string{"-backends", "cpu,cpu1", "-gpu-mem", "50%"}, `-gpu-mem "50%" budgets the weights of each GPU, and -backends (cpu, cpu1) names none`},
	} {
		var out, errb bytes.Buffer
		err := run(context.Background(), c.args, &out, &errb)
		code := exitCode(err, &errb)
		lines := strings.Split(strings.TrimSuffix(errb.String(), "\n"), "\n")
		if code != 2 || len(lines) != 2 || !strings.Contains(lines[0], c.want) || lines[1] != usageHint {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q with the hint", c.args, code, errb.String(), c.want)
		}
	}
	var errb bytes.Buffer
	if code := exitCode(context.Canceled, &errb); code != 1 || strings.Count(errb.String(), "\n") != 1 {
		t.Errorf("a run error: exit %d, stderr %q", code, errb.String())
	}
}

// TestRoutingFileErrors: a -routing or -routing-drift file that is
// missing, not a regular file, malformed or of the wrong shape is bad
// input, as replay's trace or -table is: one line naming the file, no
// usage hint, exit 1 (it exited 2, the status of a bad flag).
func TestRoutingFileErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte("{\"expert_popularity\": [[1, 2],,]}"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-moe", "8,2", "-routing", "../../sim/testdata/moe/expert_popularity_college_medicine.json"}, "expert_popularity_college_medicine.json: 32 layers, want 12"},
		{[]string{"-moe", "8,2", "-routing", "testdata/nope.json"}, "infer: -routing: sim: bad routing: open testdata/nope.json"},
		{[]string{"-moe", "8,2", "-routing", "/dev/zero"}, "infer: -routing: sim: bad routing: /dev/zero is a character device, not a regular file"},
		{[]string{"-moe", "8,2", "-requests", "4", "-routing-drift", "/dev/zero@0.5"}, "infer: -routing-drift: sim: bad routing: /dev/zero is a character device"},
		{[]string{"-moe", "8,2", "-routing", bad}, "infer: -routing: sim: bad routing: " + bad + ": line 1, column 32"},
	} {
		var out, errb bytes.Buffer
		code := exitCode(run(context.Background(), c.args, &out, &errb), &errb)
		if code != 1 || !strings.Contains(errb.String(), c.want) || strings.Count(errb.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want 1 and the one line %q", c.args, code, errb.String(), c.want)
		}
	}
}

// TestBadFlagKeepsTrace: a flag refused, a -metrics address that
// cannot be bound, or a -routing file that cannot be read, leaves the files of -trace and -cpuprofile as they
// were: infer truncated -trace's before the Scheduler refused a repeated
// backend or an only:NAME naming none, and before -metrics listened.
func TestBadFlagKeepsTrace(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := t.TempDir()
	tracePath, profPath := filepath.Join(dir, "keep.jsonl"), filepath.Join(dir, "keep.pprof")
	const keep = "{\"kept\":true}\n"
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"-metrics", ":99999"}, 2},
		{[]string{"-strategy", "only:nope"}, 2},
		{[]string{"-backends", "sim:h100,sim:h100"}, 2},
		{[]string{"-strategy", "bogus"}, 2},
		{[]string{"-metrics", busy.Addr().String()}, 1},
		{[]string{"-moe", "2,1", "-routing", "testdata/nope.json"}, 1},
	} {
		for _, p := range []string{tracePath, profPath} {
			if err := os.WriteFile(p, []byte(keep), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		args := append([]string{"-backends", "sim:h100,sim:cpu2", "-dim", "64", "-heads", "2", "-kv-heads", "1", "-ffn", "64",
			"-layers", "1", "-vocab", "64", "-ctx", "64", "-tokens", "2", "-trace", tracePath, "-cpuprofile", profPath}, c.args...)
		var out, errb bytes.Buffer
		code := exitCode(run(context.Background(), args, &out, &errb), &errb)
		if code != c.code || strings.Count(errb.String(), "\n") != c.code {
			t.Errorf("%v: exit %d, stderr %q; want %d and one line (and the hint for 2)", c.args, code, errb.String(), c.code)
		}
		for _, p := range []string{tracePath, profPath} {
			if b, err := os.ReadFile(p); err != nil || string(b) != keep {
				t.Errorf("%v: %s holds %q (%v); want it untouched", c.args, filepath.Base(p), b, err)
			}
		}
	}
}

// TestSaysWhereAndWhat: -metrics :0 says the address it bound, and -db
// what it loaded (nothing, then the first run's posteriors).
func TestSaysWhereAndWhat(t *testing.T) {
	dir := t.TempDir()
	for i, want := range []string{"no posterior of this hardware yet", "posteriors of this hardware loaded"} {
		var out, errb bytes.Buffer
		args := append(append([]string{}, tinyArgs...), "-db", dir, "-metrics", ":0")
		if err := run(context.Background(), args, &out, &errb); err != nil {
			t.Fatal(err)
		}
		s := errb.String()
		if !strings.Contains(s, "infer: -db "+dir+": ") || !strings.Contains(s, want) {
			t.Errorf("run %d: stderr %q; want -db's %q", i+1, s, want)
		}
		if !regexp.MustCompile(`infer: metrics at http://127\.0\.0\.1:[1-9][0-9]*/metrics`).MatchString(s) {
			t.Errorf("run %d: stderr %q; want the address -metrics bound", i+1, s)
		}
	}
}
