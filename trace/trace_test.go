package trace

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/adaptsched/adaptsched/internal/input"
	"github.com/adaptsched/adaptsched/kernels"
)

// sampleEvents returns n events like the scheduler records: durations
// measured in whole nanoseconds (time.Duration) and written in µs, shapes
// of transformer ops, a shadow measurement on every third.
func sampleEvents(n int, r *rand.Rand) []Event {
	us := func(max int) float64 { return float64(1+r.IntN(max)) / 1000 }
	ops := []string{"MatMul", "Softmax", "Attention", "Opaque"}
	out := make([]Event, n)
	for i := range out {
		e := Event{
			Seq: int64(i), Op: ops[r.IntN(len(ops))], DType: "f32",
			Shape:  [][]int{{1 << r.IntN(12), 4096}, {4096, 1 << (6 + r.IntN(7))}},
			Bucket: "MatMul/f32/s" + string(rune('0'+r.IntN(10))), Backend: []string{"cpu", "rocm"}[r.IntN(2)],
			Reason: "Exploit", ActualUs: us(5e6),
		}
		if i%3 == 0 {
			e.TransferUs = us(1e5)
			e.Shadow = map[string]float64{"cpu": us(1e7), "sim:\"x\"": 1e-7}
		}
		if i%5 == 0 {
			e.Params = Params{Causal: true, Scale: 0.125, Eps: 1e-5, RopeBase: 10000, Pos: 17, Name: "aten::cat\t✓", FLOPs: 1 << 40, Bytes: 12345}
		}
		out[i] = e
	}
	return out
}

// DESIGN.md § Traces: what the recorder writes the reader reads back, and
// encoding/json reads it the same way (the hand encoder writes real JSON).
func TestTraceRoundTrip(t *testing.T) {
	events := sampleEvents(5000, rand.New(rand.NewPCG(3, 4)))
	for _, zip := range []bool{false, true} {
		var buf bytes.Buffer
		var w io.Writer = &buf
		var gz *gzip.Writer
		if zip {
			gz = gzip.NewWriter(&buf)
			w = gz
		}
		created := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
		rec, err := NewRecorder(w, Header{Created: created, Fingerprint: "0123456789abcdef"}, RecorderOptions{Queue: len(events)})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events {
			rec.Record(e)
		}
		if err := rec.Close(); err != nil {
			t.Fatal(err)
		}
		if rec.Dropped() != 0 || rec.Written() != int64(len(events)) {
			t.Fatalf("dropped %d written %d", rec.Dropped(), rec.Written())
		}
		if gz != nil {
			gz.Close()
		}
		raw := buf.Bytes()
		if !zip {
			lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
			if len(lines) != len(events)+1 || !strings.HasPrefix(lines[0], `{"format":"adaptsched-trace","version":1,`) {
				t.Fatalf("%d lines, header %s", len(lines), lines[0])
			}
			for i, l := range lines[1:] {
				var e Event
				if err := json.Unmarshal([]byte(l), &e); err != nil || !reflect.DeepEqual(e, events[i]) {
					t.Fatalf("encoding/json on line %d: %v\n got %+v\nwant %+v", i+2, err, e, events[i])
				}
			}
		}
		rd, err := NewReader(bytes.NewReader(raw), "t.jsonl", ReaderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if h := rd.Header(); h.Format != TraceFormat || h.Version != 1 || !h.Created.Equal(created) || h.Fingerprint != "0123456789abcdef" {
			t.Errorf("header %+v", h)
		}
		for i := 0; ; i++ {
			e, err := rd.Next()
			if err == io.EOF {
				if i != len(events) {
					t.Fatalf("%d events read, want %d", i, len(events))
				}
				break
			}
			if err != nil || !reflect.DeepEqual(e, events[i]) {
				t.Fatalf("event %d: %v\n got %+v\nwant %+v", i, err, e, events[i])
			}
		}
	}
}

func TestEventSpec(t *testing.T) {
	s := kernels.Spec{Op: kernels.Attention, In: []kernels.Shape{{1, 8, 4, 64}, {1, 2, 16, 64}, {1, 2, 16, 64}}, Params: kernels.Params{Causal: true}}
	got, err := EventOf(s).Spec()
	if err != nil || !reflect.DeepEqual(got, s) {
		t.Fatalf("round trip: %v %+v", err, got)
	}
	for _, e := range []Event{{Op: "Nope", DType: "f32"}, {Op: "MatMul", DType: "f64"}, {Op: "MatMul", DType: "f32", Shape: [][]int{{2, 3}, {4, 5}}}} {
		if _, err := e.Spec(); err == nil {
			t.Errorf("%+v: no error", e)
		}
	}
}

// NaN and ±Inf are not JSON: written as null, read as NaN.
func TestTraceNonFinite(t *testing.T) {
	b := appendEvent(nil, &Event{Op: "Add", ActualUs: math.Inf(1), Shadow: map[string]float64{"cpu": math.NaN()}})
	if !json.Valid(b) {
		t.Fatalf("invalid JSON %s", b)
	}
	var p parser
	var e Event
	if err := p.event(b, &e); err != nil || !math.IsNaN(e.ActualUs) || !math.IsNaN(e.Shadow["cpu"]) {
		t.Errorf("%v %+v", err, e)
	}
}

// Bad lines are reported as file:line: message, or skipped and
// counted; lines are bounded.
func TestTraceReaderErrors(t *testing.T) {
	head := `{"format":"adaptsched-trace","version":1,"created":"2025-01-01T00:00:00Z"}` + "\n"
	good := `{"seq":1,"op":"Add","dtype":"f32","shape":[[4],[4]],"actual_duration_us":2.5}` + "\n"
	long := `{"seq":9,"op":"Add","dtype":"f32","shape":[[` + strings.Repeat("1,", 200) + `1]],"actual_duration_us":1}` + "\n"
	headB := `{"format":"adaptsched-trace","version":1,"backends":[{"name":"cpu"},{"name":"gpu"}]}` + "\n"
	for _, c := range []struct {
		name, in, want string
		sentinel       error
	}{
		{"empty", "", "t:0: empty trace", ErrTrace},
		{"format", `{"format":"x","version":1}` + "\n", `t:1: format "x"`, ErrTrace},
		{"version", `{"format":"adaptsched-trace","version":2}` + "\n", "t:1: version 2", ErrTrace},
		{"bad json", head + good + "{\"seq\":1,\n", "t:3: column", ErrTrace},
		{"no op", head + `{"seq":1}` + "\n", "t:2: column 10: event without an op", ErrTrace},
		{"float seq", head + `{"seq":1.5,"op":"Add"}` + "\n", "t:2: column 11: number 1.5 is not an integer", ErrTrace},
		{"trailing", head + good + good[:len(good)-1] + "x\n", `t:3: column 78: unexpected 'x' after the event`, ErrTrace},
		{"too long", head + good + long, "t:3: line", ErrLineTooLong},
		{"undeclared backend", headB + good + `{"seq":2,"op":"Add","backend":"tpu","actual_duration_us":1}` + "\n",
			`t:3: backend "tpu" is not among the header's backends (cpu, gpu)`, ErrTrace},
		{"undeclared shadow", headB + `{"seq":2,"op":"Add","backend":"cpu","shadow_us":{"gpu":1,"tpu":2},"actual_duration_us":1}` + "\n",
			`t:2: shadow_us backend "tpu" is not among`, ErrTrace},
		{"long format", `{"format":"` + strings.Repeat("f", 200) + `","version":1}` + "\n", `t:1: format "` + strings.Repeat("f", 80) + `"… (200 bytes)`, ErrTrace},
		{"header trailing", `{"format":"adaptsched-trace","version":1} garbage here` + "\n" + good, "t:1: column 43: unexpected data after the header", ErrTrace},
		{"header twice", `{"format":"adaptsched-trace","version":1}{"format":"adaptsched-trace","version":1}` + "\n" + good, "t:1: column 42: unexpected data", ErrTrace},
		{"backend no name", `{"format":"adaptsched-trace","version":1,"backends":[{"name":"cpu"},{"Kind":1}]}` + "\n" + good, "t:1: backends[1]: empty name", ErrTrace},
		{"backend twice", `{"format":"adaptsched-trace","version":1,"backends":[{"name":"cpu"},{"name":"gpu","kind":1},{"name":"cpu"}]}` + "\n" + good,
			`t:1: backends[2]: name "cpu" repeats backends[0]'s`, ErrTrace},
		{"backend kind", `{"format":"adaptsched-trace","version":1,"backends":[{"Name":"rocm","Kind":7}]}` + "\n" + good, `t:1: backends[0] ("rocm"): Kind 7: want 0 (cpu) or 1 (gpu)`, ErrTrace},
		{"backend negative", `{"format":"adaptsched-trace","version":1,"backends":[{"Name":"cpu","Nominal":{"GFLOPS":100,"MemGBps":-5}}]}` + "\n" + good,
			`t:1: backends[0] ("cpu"): Nominal.MemGBps -5: want a figure in [0, 1e+12] (0: unknown)`, ErrTrace},
		{"backend huge", `{"format":"adaptsched-trace","version":1,"backends":[{"Name":"gpu","Kind":1,"Nominal":{"GFLOPS":1e308}}]}` + "\n" + good,
			`t:1: backends[0] ("gpu"): Nominal.GFLOPS 1e+308`, ErrTrace},
		{"backend dispatch", `{"format":"adaptsched-trace","version":1,"backends":[{"Name":"gpu","Kind":1,"Nominal":{"DispatchUs":-7}}]}` + "\n" + good,
			`t:1: backends[0] ("gpu"): Nominal.DispatchUs -7`, ErrTrace},
		{"backend memory", `{"format":"adaptsched-trace","version":1,"backends":[{"Name":"gpu","Kind":1,"Memory":-1}]}` + "\n" + good,
			`t:1: backends[0] ("gpu"): Threads 0, Memory -1: want ≥ 0`, ErrTrace},
	} {
		rd, err := NewReader(strings.NewReader(c.in), "t", ReaderOptions{MaxLine: 300})
		for err == nil {
			_, err = rd.Next()
		}
		if !errors.Is(err, c.sentinel) || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q (%v)", c.name, err, c.want, c.sentinel)
		}
	}
	// Zero figures mean unknown, and white space may follow the header.
	zero := `{"format":"adaptsched-trace","version":1,"backends":[{"Name":"cpu","Nominal":{"GFLOPS":0,"MemGBps":0}},{"Name":"gpu","Kind":1,"Nominal":{"GFLOPS":5e4,"MemGBps":3e3,"DispatchUs":5,"LinkGBps":0,"LinkLatencyUs":0}}]}` + " \t\r\n"
	if _, err := NewReader(strings.NewReader(zero+good), "t", ReaderOptions{}); err != nil {
		t.Errorf("zero figures: %v", err)
	}
	rd, err := NewReader(strings.NewReader(head+good+"garbage\n"+long+"\n"+good+`{"op":"x","seq":[]}`), "t", ReaderOptions{MaxLine: 300, SkipBad: true})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		_, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 2 || rd.Skipped() != 3 || rd.Line() != 7 {
		t.Errorf("read %d, skipped %d, line %d; want 2, 3, 7", n, rd.Skipped(), rd.Line())
	}
}

// TestTraceBOM: a byte-order mark before the header is skipped, as the
// perf tables' reader skips one before their CSV header, plain or
// gzipped; it is no part of the header line, so a header of exactly
// MaxLine bytes reads after a BOM as it does without one.
func TestTraceBOM(t *testing.T) {
	header := `{"format":"adaptsched-trace","version":1}`
	event := `{"seq":1,"op":"Add","dtype":"f32","shape":[[4],[4]],"actual_duration_us":2.5}` + "\n"
	padded := header + strings.Repeat(" ", 100-len(header))
	for _, c := range []struct {
		name, header string
		maxLine      int
	}{{"default", header, 0}, {"exactly MaxLine", padded, len(padded)}} {
		for _, bom := range []string{"", input.BOM} {
			text := bom + c.header + "\n" + event
			var gz bytes.Buffer
			z := gzip.NewWriter(&gz)
			z.Write([]byte(text))
			z.Close()
			for kind, data := range map[string][]byte{"plain": []byte(text), "gzip": gz.Bytes()} {
				rd, err := NewReader(bytes.NewReader(data), "t", ReaderOptions{MaxLine: c.maxLine})
				if err != nil {
					t.Errorf("%s, %s, BOM %q: %v", c.name, kind, bom, err)
					continue
				}
				if e, err := rd.Next(); err != nil || e.Op != "Add" || rd.Line() != 2 {
					t.Errorf("%s, %s, BOM %q: %+v, %v, line %d", c.name, kind, bom, e, err, rd.Line())
				}
			}
		}
	}
}

// Record never blocks: with the writer stuck, a full queue drops and
// counts.
func TestRecorderDrops(t *testing.T) {
	pr, pw := io.Pipe()
	rec, err := NewRecorder(blockAfter{pw, 0}, Header{}, RecorderOptions{Queue: 8})
	if err != nil {
		t.Fatal(err)
	}
	_ = pr
	start := time.Now()
	for i := range 100000 {
		rec.Record(Event{Seq: int64(i), Op: "Add"})
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("100,000 Records took %v", d)
	}
	if rec.Dropped() < 100000-8-300000/64 {
		t.Errorf("dropped %d", rec.Dropped())
	}
	pr.Close() // unblocks the writer with an error
	if err := rec.Close(); err == nil {
		t.Error("Close: want the write error")
	}
}

// blockAfter passes n bytes, then writes to a pipe nobody reads.
type blockAfter struct {
	w *io.PipeWriter
	n int
}

func (b blockAfter) Write(p []byte) (int, error) { return b.w.Write(p) }

func writeTrace(b testing.TB, path string, n int) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	rec, _ := NewRecorder(f, Header{}, RecorderOptions{Queue: n})
	for _, e := range sampleEvents(n, rand.New(rand.NewPCG(1, 1))) {
		rec.Record(e)
	}
	if err := rec.Close(); err != nil {
		b.Fatal(err)
	}
	f.Close()
}

// BenchmarkRecorder measures the events/s that the recorder sustains to
// a file (target ≥ 1,000,000): each iteration records a batch into a
// queue that holds it (nothing dropped) and closes, so the time covers
// every event encoded and written.
func BenchmarkRecorder(b *testing.B) {
	path := filepath.Join(b.TempDir(), "trace.jsonl")
	const batch = 100000
	events := sampleEvents(1024, rand.New(rand.NewPCG(1, 1)))
	b.ReportAllocs()
	var total int64
	var bytes int64
	start := time.Now()
	for b.Loop() {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		rec, _ := NewRecorder(f, Header{}, RecorderOptions{Queue: batch})
		for i := range batch {
			rec.Record(events[i&1023])
		}
		if err := rec.Close(); err != nil {
			b.Fatal(err)
		}
		if rec.Dropped() != 0 {
			b.Fatalf("dropped %d", rec.Dropped())
		}
		total += rec.Written()
		fi, _ := f.Stat()
		bytes += fi.Size()
		f.Close()
	}
	b.ReportMetric(float64(total)/time.Since(start).Seconds(), "events/s")
	b.ReportMetric(float64(bytes)/float64(total), "bytes/event")
}

// BenchmarkReader measures events/s read from a file (target ≥ 500,000).
func BenchmarkReader(b *testing.B) {
	path := filepath.Join(b.TempDir(), "trace.jsonl")
	const n = 100000
	writeTrace(b, path, n)
	b.ReportAllocs()
	events := 0
	start := time.Now()
	for b.Loop() {
		f, _ := os.Open(path)
		rd, err := NewReader(f, path, ReaderOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := rd.Next(); err != nil {
				if err != io.EOF {
					b.Fatal(err)
				}
				break
			}
			events++
		}
		f.Close()
	}
	b.ReportMetric(float64(events)/time.Since(start).Seconds(), "events/s")
}

// FuzzReader: the reader never panics; what it accepts is valid JSON; and
// events that the recorder writes decode to the same Event as with
// encoding/json.
func FuzzReader(f *testing.F) {
	for _, e := range sampleEvents(6, rand.New(rand.NewPCG(1, 1))) {
		f.Add(string(appendEvent(nil, &e)), e.Op, e.ActualUs, 3)
	}
	f.Add(`{"seq":1,"op":"A\ud83d\ude00\u00e9","shape":[[1]],"x":[{"y":null}]}`, "\xff\"\\", math.Inf(1), -1)
	f.Fuzz(func(t *testing.T, line, s string, x float64, d int) {
		var p parser
		var e Event
		if err := p.event([]byte(line), &e); err == nil && !json.Valid([]byte(line)) {
			t.Fatalf("accepted invalid JSON %q", line)
		}
		rd, err := NewReader(strings.NewReader(`{"format":"adaptsched-trace","version":1}`+"\n"+line), "f", ReaderOptions{MaxLine: 1 << 12})
		if err != nil {
			t.Fatal(err)
		}
		for err == nil {
			_, err = rd.Next()
		}
		if math.IsNaN(x) || math.IsInf(x, 0) {
			x = 0
		}
		in := Event{Seq: int64(d), Op: s + "x", DType: s, Shape: [][]int{{d, 1}, {}}, Bucket: s, ActualUs: x, Shadow: map[string]float64{s: x},
			Params: Params{Name: s, Scale: float32(x), Pos: d}}
		b := appendEvent(nil, &in)
		var mine, ref Event
		if err := p.event(b, &mine); err != nil {
			t.Fatalf("own output %s: %v", b, err)
		}
		if err := json.Unmarshal(b, &ref); err != nil {
			t.Fatalf("encoding/json on %s: %v", b, err)
		}
		if !reflect.DeepEqual(mine, ref) {
			t.Fatalf("%s:\nmine %+v\n ref %+v", b, mine, ref)
		}
	})
}
