package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/executor"
)

var tiny = ModelConfig{Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 96, Ctx: 16, Seed: 3}

func openT(t testing.TB, name string) backends.Backend {
	t.Helper()
	b, err := backends.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// checkGreedy fails unless next holds, for each sequence, the token a
// host loop keeping the first strictly larger logit picks from bt's
// logits (read back with KeepLogits): the backend's Argmax gives the
// tokens greedy decoding on the host gave.
func checkGreedy(t *testing.T, bt *Batch, next []int) {
	t.Helper()
	v := bt.m.cfg.Vocab
	for i, tok := range next {
		row := bt.Logits[i*v : (i+1)*v]
		best := 0
		for j, x := range row {
			if x > row[best] {
				best = j
			}
		}
		if tok != best {
			t.Fatalf("step at %d: sequence %d's token %d, the host's argmax of its logits %d", bt.Pos(), i, tok, best)
		}
	}
}

// decode runs steps of greedy decoding of a batch of 2 on be and returns
// each step's logits.
func decode(t *testing.T, be backends.Backend, steps int) [][]float32 {
	return decodeSteps(t, be, steps, nil)
}

// decodeSteps is decode with each step gathered by gather (Record before
// it, Flush after) when gather is not nil.
func decodeSteps(t *testing.T, be backends.Backend, steps int, gather *executor.Executor) [][]float32 {
	t.Helper()
	m, err := NewModel(be, tiny)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	bt, err := m.NewBatch(2)
	if err != nil {
		t.Fatal(err)
	}
	defer bt.Free()
	bt.KeepLogits = true
	cur := []int{5, 17}
	var out [][]float32
	for range steps {
		if gather != nil {
			if err := gather.Record(); err != nil {
				t.Fatal(err)
			}
		}
		next, err := bt.Step(cur, nil)
		if err == nil && gather != nil {
			err = gather.Flush()
		}
		if err != nil {
			t.Fatal(err)
		}
		checkGreedy(t, bt, next)
		out = append(out, append([]float32(nil), bt.Logits...))
		cur = next
	}
	return out
}

// TestForwardPassMatchesSingleBackend decodes with the Executor over cpu,
// cpu1 and a simulated GPU and with plain "cpu": the logits agree within
// float tolerance at every step.
func TestForwardPassMatchesSingleBackend(t *testing.T) {
	const steps = 8
	want := decode(t, openT(t, "cpu"), steps)
	e, err := executor.New(executor.Config{
		Backends:      []backends.Backend{openT(t, "cpu"), openT(t, "cpu1"), openT(t, "sim:h100")},
		NoCalibration: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	got := decode(t, e, steps)
	for s := range steps {
		for i, w := range want[s] {
			if d := math.Abs(float64(got[s][i] - w)); d > 2e-3*(1+math.Abs(float64(w))) {
				t.Fatalf("step %d logit %d: %v, want %v", s, i, got[s][i], w)
			}
		}
	}
	var used int
	for _, b := range e.Stats().Backends {
		if b.Ops > 0 {
			used++
		}
	}
	if used < 2 {
		t.Errorf("the Executor used %d backend(s): %+v", used, e.Stats().Backends)
	}
	// The logits are not degenerate: steps differ.
	if math.Abs(float64(want[0][0]-want[1][0])) == 0 {
		t.Error("logits do not change between steps")
	}
}

// TestParams checks the default size against the target's "about 100M".
func TestParams(t *testing.T) {
	// 12 × (2·768² + 2·768·256 + 3·768·2048 + 2·768) + 32000·768 + 768.
	if got, want := DefaultModel.Params(), int64(100_092_672); got != want {
		t.Errorf("params %d, want %d", got, want)
	}
}

// TestModelTooLarge: a model beyond the bounds of validate is a bad flag,
// refused with one line and the hint (a -dim of 2^31 wrapped Params
// negative, passed checkMemory and died of out of memory), and at the
// bounds no count of parameters or bytes overflows.
func TestModelTooLarge(t *testing.T) {
	var out, errb bytes.Buffer
	args := []string{"-backends", "cpu", "-strategy", "cpu", "-dim", "2147483648", "-heads", "1073741824", "-kv-heads", "1",
		"-ffn", "32", "-layers", "1", "-vocab", "1", "-ctx", "8", "-prompt", "1", "-tokens", "1"}
	code := exitCode(run(context.Background(), args, &out, &errb), &errb)
	want := "infer: invalid model config: -dim 2147483648 is too large (at most 1048576)\n" + usageHint + "\n"
	if code != 2 || errb.String() != want {
		t.Errorf("exit %d, stderr %q; want 2 and %q", code, errb.String(), want)
	}
	c := ModelConfig{Dim: maxSize, Layers: maxLayers, Heads: 2, KVHeads: 2, FFN: maxSize, Vocab: maxSize, Ctx: maxSize,
		Experts: maxExperts, TopK: 1}
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	d, l, e := float64(maxSize), float64(maxLayers), float64(maxExperts)
	exact := l*(2*d*d+2*d*d+3*d*d*e+2*d) + d*d + d
	if p, w := c.Params(), c.weightBytes(); p <= 0 || float64(p) != exact || w < p {
		t.Errorf("at the bounds: Params %d (want %.0f), weightBytes %d", p, exact, w)
	}
	for _, big := range []ModelConfig{{Layers: maxLayers + 1}, {Vocab: maxSize + 1}, {Ctx: maxSize + 1}, {Experts: maxExperts + 1}} {
		big.Dim, big.Heads, big.KVHeads, big.FFN, big.TopK = max(big.Dim, 64), 2, 1, 64, 1
		big.Layers, big.Vocab, big.Ctx = max(big.Layers, 1), max(big.Vocab, 1), max(big.Ctx, 1)
		if err := big.validate(); err == nil || !strings.Contains(err.Error(), "is too large") {
			t.Errorf("%+v: %v; want too large", big, err)
		}
	}
}

// TestRunJSON runs the command end to end on a tiny model.
func TestRunJSON(t *testing.T) {
	var out, errb bytes.Buffer
	args := []string{"-backends", "cpu,cpu1,sim:h100", "-tokens", "4", "-batch", "2", "-requests", "2", "-prompt", "2", "-ubatch", "1",
		"-dim", "64", "-layers", "1", "-heads", "4", "-kv-heads", "2", "-ffn", "64", "-vocab", "50", "-ctx", "8", "-json",
		"-db", t.TempDir(), "-trace", t.TempDir() + "/t.jsonl"}
	if err := run(context.Background(), args, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	var s Summary
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		t.Fatalf("%v: %q", err, out.String())
	}
	// Per request: 2 prompt micro-batches of 17 layer ops and 3 of the
	// head, and 3 decode steps with their embeddings' GetRows besides.
	if s.Tokens != 16 || s.TokensPerS <= 0 || s.Ops != 2*(2*(17+3)+3*(1+17+3)) {
		t.Errorf("summary %+v", s)
	}
	var total float64
	for _, v := range s.Share {
		total += v
	}
	if len(s.Share) != 3 || math.Abs(total-1) > 1e-9 {
		t.Errorf("shares %v", s.Share)
	}
}

// TestFlags checks that bad flags are errors.
func TestFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-tokens", "0"}, {"-strategy", "fastest"}, {"-dim", "100"}, {"-prompt", "600"}, {"-heads", "5"}, {"-backends", "nope"},
	} {
		var out, errb bytes.Buffer
		if err := run(context.Background(), args, &out, &errb); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// decodeModel is BenchmarkDecode's model: 21.8M parameters, small enough
// that a run holds many decode steps.
var decodeModel = ModelConfig{Dim: 512, Layers: 6, Heads: 8, KVHeads: 4, FFN: 1408, Vocab: 8000, Ctx: 64, Seed: 1}

// decodeStrategies are the strategies the decode benchmarks compare on
// cpu+cpu1.
var decodeStrategies = []struct {
	name string
	s    adaptive.Strategy
}{{"auto", adaptive.Automatic}, {"only-cpu", adaptive.Only("cpu")}, {"only-cpu1", adaptive.Only("cpu1")}}

// decodeServer is one decode loop on its own Executor over cpu and cpu1,
// as a server runs it: a batch of requests, each step's tokens fed back.
type decodeServer struct {
	e     *executor.Executor
	bt    *Batch
	cur   []int
	ctx   int
	steps int
}

// newDecodeServer builds a server of batch requests under strategy s
// and runs 8 warm-up steps; b's cleanup frees it.
func newDecodeServer(b *testing.B, s adaptive.Strategy, batch int) *decodeServer {
	b.Helper()
	e, err := executor.New(executor.Config{
		Backends: []backends.Backend{openT(b, "cpu"), openT(b, "cpu1")}, Strategy: s, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	m, err := NewModel(e, decodeModel)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(m.Free)
	bt, err := m.NewBatch(batch)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(bt.Free)
	r := rand.New(rand.NewPCG(1, 2))
	d := &decodeServer{e: e, bt: bt, cur: make([]int, batch), ctx: decodeModel.Ctx}
	for i := range d.cur {
		d.cur[i] = r.IntN(decodeModel.Vocab)
	}
	for range 8 {
		d.step(b)
	}
	d.steps = 0
	return d
}

// step decodes one token per request, starting the requests over when
// the context is full.
func (d *decodeServer) step(b *testing.B) {
	if d.bt.Pos() == d.ctx {
		d.bt.Reset()
	}
	var err error
	if d.cur, err = d.bt.Step(d.cur, nil); err != nil {
		b.Fatal(err)
	}
	d.steps++
}

// BenchmarkDecode measures decode on cpu+cpu1 (the real-hardware
// target): tokens/s of the adaptive Executor and of each backend alone,
// each sub-benchmark on a fresh Executor. Its runs follow one another, so
// a slow spell of the shared machine lands on one strategy and not the
// others: BenchmarkDecodePaired interleaves them.
func BenchmarkDecode(b *testing.B) {
	for _, batch := range []int{1, 16} {
		for _, st := range decodeStrategies {
			b.Run("batch"+itoa(batch)+"/"+st.name, func(b *testing.B) {
				d := newDecodeServer(b, st.s, batch)
				b.ReportAllocs()
				for b.Loop() {
					d.step(b)
				}
				b.ReportMetric(float64(d.steps*batch)/b.Elapsed().Seconds(), "tokens/s")
				logPlacement(b, d.e.Scheduler().Telemetry())
			})
		}
	}
}

// logPlacement logs (with -v) where the ops went: each backend's ops and
// share of the measured time, then, for each bucket with over 2% of it,
// the ops and mean µs on each backend, so that a run that went wrong
// says where.
func logPlacement(b *testing.B, tel adaptive.Telemetry) {
	var line strings.Builder
	var total time.Duration
	for _, bk := range tel.Backends {
		total += bk.Time
	}
	us := total.Seconds() * 1e6
	for _, bk := range tel.Backends {
		fmt.Fprintf(&line, "%s: %d ops, %.0f%% of the time; ", bk.Name, bk.Ops, 100*bk.Time.Seconds()*1e6/max(us, 1))
	}
	for _, bt := range tel.Buckets {
		var t float64
		for _, at := range bt.Arms {
			t += at.MeanUs * float64(at.N)
		}
		if t < 0.02*us {
			continue
		}
		line.WriteString(bt.Name)
		for _, at := range bt.Arms {
			fmt.Fprintf(&line, " %s %d×%.0fµs", at.Backend, at.N, at.MeanUs)
		}
		fmt.Fprintf(&line, " (%d switches, %d alarms); ", bt.Switches, bt.Alarms)
	}
	b.Log(line.String())
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
