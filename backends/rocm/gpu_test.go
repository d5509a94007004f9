//go:build cgo

package rocm

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

// openGPU opens the real device or skips: these tests and benchmarks need
// a GPU (build them with `go test -c` and run the binary on one).
func openGPU(tb testing.TB) *Device {
	tb.Helper()
	d, err := Open(DefaultOptions().WithCacheDir(tb.TempDir()))
	if err != nil {
		tb.Skipf("no GPU: %v", err)
	}
	tb.Cleanup(func() { d.Close() })
	return d
}

// gpuSpecs covers every catalogue op, and MatMul both batched and not.
func gpuSpecs() []kernels.Spec {
	sh := func(s ...kernels.Shape) []kernels.Shape { return s }
	return []kernels.Spec{
		{Op: kernels.MatMul, In: sh(kernels.Shape{3, 37, 70}, kernels.Shape{70, 45})},
		{Op: kernels.MatMul, In: sh(kernels.Shape{2, 33, 17}, kernels.Shape{2, 17, 29})},
		{Op: kernels.QuantizedMatMul, DType: kernels.Q8_0, In: sh(kernels.Shape{5, 96}, kernels.Shape{40, 96})},
		{Op: kernels.QuantizedMatMul, DType: kernels.Q4_0, In: sh(kernels.Shape{2, 3, 64}, kernels.Shape{33, 64})},
		// Tile edges: rows and outputs not multiples of the kernel's 8×8.
		{Op: kernels.QuantizedMatMul, DType: kernels.Q8_0, In: sh(kernels.Shape{17, 2048}, kernels.Shape{300, 2048})},
		{Op: kernels.QuantizedMatMul, DType: kernels.Q4_0, In: sh(kernels.Shape{9, 1024}, kernels.Shape{37, 1024})},
		{Op: kernels.Softmax, In: sh(kernels.Shape{7, 1000})},
		{Op: kernels.Attention, In: sh(kernels.Shape{2, 4, 5, 64}, kernels.Shape{2, 2, 300, 64}, kernels.Shape{2, 2, 300, 64}), Params: kernels.Params{Causal: true}},
		{Op: kernels.Attention, In: sh(kernels.Shape{1, 2, 3, 16}, kernels.Shape{1, 2, 9, 16}, kernels.Shape{1, 2, 9, 16}), Params: kernels.Params{Scale: 0.3}},
		{Op: kernels.Add, In: sh(kernels.Shape{4, 9, 33}, kernels.Shape{33})},
		{Op: kernels.Mul, In: sh(kernels.Shape{6, 10}, kernels.Shape{6, 10})},
		{Op: kernels.Scale, In: sh(kernels.Shape{1001}), Params: kernels.Params{Scale: 1.5}},
		{Op: kernels.RMSNorm, In: sh(kernels.Shape{5, 300}, kernels.Shape{300})},
		{Op: kernels.LayerNorm, In: sh(kernels.Shape{5, 300}, kernels.Shape{300}, kernels.Shape{300}), Params: kernels.Params{Eps: 1e-3}},
		{Op: kernels.RoPE, In: sh(kernels.Shape{2, 7, 3, 16}), Params: kernels.Params{Pos: 11}},
		{Op: kernels.RoPE, In: sh(kernels.Shape{5, 2, 8}), Params: kernels.Params{RopeBase: 500}},
		{Op: kernels.SiLU, In: sh(kernels.Shape{3, 777})},
		{Op: kernels.SwiGLU, In: sh(kernels.Shape{3, 50}, kernels.Shape{3, 50})},
		{Op: kernels.GELU, In: sh(kernels.Shape{999})},
		{Op: kernels.Dequantize, DType: kernels.Q8_0, In: sh(kernels.Shape{3, 64})},
		{Op: kernels.Dequantize, DType: kernels.Q4_0, In: sh(kernels.Shape{2, 96})},
		{Op: kernels.Dequantize, DType: kernels.F16, In: sh(kernels.Shape{4, 7})},
		{Op: kernels.Copy, DType: kernels.Q4_0, In: sh(kernels.Shape{3, 64})},
		{Op: kernels.Copy, In: sh(kernels.Shape{5, 5})},
		{Op: kernels.Transpose, In: sh(kernels.Shape{3, 37, 70})},
		{Op: kernels.Attention, In: sh(kernels.Shape{2, 4, 1, 64}, kernels.Shape{2, 2, 300, 64}, kernels.Shape{2, 2, 300, 64}), Params: kernels.Params{Causal: true, Keys: 17}},
		{Op: kernels.KVAppend, In: sh(kernels.Shape{2, 2, 30, 64}, kernels.Shape{2, 3, 2, 64}), Params: kernels.Params{Pos: 4}},
		{Op: kernels.Argmax, In: sh(kernels.Shape{16, 32000})},
		{Op: kernels.GetRows, DType: kernels.Q8_0, In: sh(kernels.Shape{1000, 256}, kernels.Shape{16})},
		{Op: kernels.GetRows, DType: kernels.Q4_0, In: sh(kernels.Shape{300, 96}, kernels.Shape{2, 3})},
		{Op: kernels.GetRows, DType: kernels.F16, In: sh(kernels.Shape{50, 40}, kernels.Shape{5})},
		{Op: kernels.GetRows, In: sh(kernels.Shape{77, 33}, kernels.Shape{2, 2, 3})},
	}
}

// TestGPUArgmax runs argmax_f32 on the real device on rows of ties,
// negatives and NaN: the decoder's greedy token taken there.
func TestGPUArgmax(t *testing.T) { checkArgmax(t, openGPU(t)) }

// TestGPUGetRows runs the get_rows kernels on the real device: every
// dtype's rows as the reference decodes them, and a row of NaN for an
// index that is not a row.
func TestGPUGetRows(t *testing.T) {
	d := openGPU(t)
	checkGetRows(t, d)
	checkGetRowsBadIndex(t, d)
}

// TestGPUArgmaxFeedsGetRows: the next token's embedding taken on the real
// device from the Argmax queued before it.
func TestGPUArgmaxFeedsGetRows(t *testing.T) { checkArgmaxFeedsGetRows(t, openGPU(t), nil) }

// TestGPUKVAppendInPlace runs KVAppend in place on the real device: the
// decoder's KV cache stays there.
func TestGPUKVAppendInPlace(t *testing.T) { checkKVAppendInPlace(t, openGPU(t)) }

// TestGPUOps checks every op against kernels.Reference on the real device,
// with the vendor BLAS and with the tiled MatMul kernel.
func TestGPUOps(t *testing.T) {
	d := openGPU(t)
	t.Logf("%+v", d.Info())
	tiled, err := Open(DefaultOptions().WithCacheDir(t.TempDir()).WithNoBLAS(true))
	if err != nil {
		t.Fatal(err)
	}
	defer tiled.Close()
	for _, dev := range []*Device{d, tiled} {
		for _, s := range gpuSpecs() {
			got, want, tm := runSpec(t, dev, s)
			tol := 1e-4
			switch s.Op {
			case kernels.MatMul, kernels.QuantizedMatMul, kernels.Attention:
				tol = 1e-3
			case kernels.Argmax:
				tol = 0 // indices: exact
			case kernels.GetRows:
				tol = 0 // rows decoded as the reference decodes them: exact
			}
			if err := compareF32(got, want, tol); err != nil {
				t.Errorf("%v (blas %v): %v", s, dev.blas != 0, err)
			}
			if tm.Clock != backends.DeviceEvents || tm.Duration <= 0 {
				t.Errorf("%v: timing %+v", s, tm)
			}
		}
	}
}

// TestGPUConcurrent runs every op from 16 goroutines at once on the real
// device: callers on different OS threads each bind to the device, and
// every result matches the reference.
func TestGPUConcurrent(t *testing.T) {
	d := openGPU(t)
	if err := runConcurrently(d, gpuSpecs(), 16, 3*len(gpuSpecs()), 1e-3); err != nil {
		t.Fatal(err)
	}
}

// TestGPUEventTiming checks the events against the wall clock: a matmul's
// event time is positive and no longer than the call around it.
func TestGPUEventTiming(t *testing.T) {
	d := openGPU(t)
	s := kernels.Spec{Op: kernels.MatMul, In: []kernels.Shape{{512, 512}, {512, 512}}}
	runSpec(t, d, s)
	a, _ := d.Alloc(s.InBytes(0))
	out, _ := d.Alloc(s.OutBytes())
	for range 5 {
		start := time.Now()
		tm, err := d.Run(s, []backends.Buffer{a, a}, out)
		wall := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		if tm.Duration <= 0 || tm.Duration > wall {
			t.Errorf("event time %v, wall %v", tm.Duration, wall)
		}
	}
}

// TestGPUTransfers moves 100 MiB (two staging chunks) both ways and
// checks the bytes and the timings.
func TestGPUTransfers(t *testing.T) {
	d := openGPU(t)
	n := 100 << 20
	src := make([]byte, n)
	for i := range src {
		src[i] = byte(i*7 + i>>13)
	}
	b, err := d.Alloc(int64(n))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free()
	wt, err := d.Write(b, src)
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, n)
	rt, err := d.Read(dst, b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range src {
		if src[i] != dst[i] {
			t.Fatalf("byte %d: %d, want %d", i, dst[i], src[i])
		}
	}
	if wt.Duration <= 0 || rt.Duration <= 0 {
		t.Errorf("timings %v / %v", wt, rt)
	}
	t.Logf("write %.1f GB/s, read %.1f GB/s", float64(n)/wt.Duration.Seconds()/1e9, float64(n)/rt.Duration.Seconds()/1e9)
}

// BenchmarkGPUOps reports the device time per op (µs/op, from events) for
// matmul sizes and a few element-wise and reduction sizes.
func BenchmarkGPUOps(b *testing.B) {
	d := openGPU(b)
	specs := []kernels.Spec{
		{Op: kernels.MatMul, In: []kernels.Shape{{64, 4096}, {4096, 4096}}},
		{Op: kernels.MatMul, In: []kernels.Shape{{1024, 1024}, {1024, 1024}}},
		{Op: kernels.QuantizedMatMul, DType: kernels.Q8_0, In: []kernels.Shape{{1, 4096}, {4096, 4096}}},
		{Op: kernels.QuantizedMatMul, DType: kernels.Q8_0, In: []kernels.Shape{{16, 768}, {32000, 768}}},
		{Op: kernels.QuantizedMatMul, DType: kernels.Q8_0, In: []kernels.Shape{{1, 768}, {768, 768}}},
		{Op: kernels.Softmax, In: []kernels.Shape{{32, 4096}}},
		{Op: kernels.Attention, In: []kernels.Shape{{1, 32, 1, 128}, {1, 8, 2048, 128}, {1, 8, 2048, 128}}, Params: kernels.Params{Causal: true}},
		{Op: kernels.Add, In: []kernels.Shape{{1 << 20}, {1 << 20}}},
	}
	for _, s := range specs {
		b.Run(fmt.Sprintf("%v_%v", s.Op, s.In), func(b *testing.B) {
			in := make([]backends.Buffer, len(s.In))
			for i := range in {
				in[i], _ = d.Alloc(s.InBytes(i))
			}
			out, _ := d.Alloc(s.OutBytes())
			if _, err := d.Run(s, in, out); err != nil {
				b.Fatal(err)
			}
			var dev time.Duration
			b.ReportAllocs()
			for b.Loop() {
				tm, err := d.Run(s, in, out)
				if err != nil {
					b.Fatal(err)
				}
				dev += tm.Duration
			}
			b.ReportMetric(float64(dev.Microseconds())/float64(b.N), "device-µs/op")
		})
	}
}

// BenchmarkGPULaunch is the launch latency: a 256-element Scale, timed by
// the wall clock (ns/op) and the events (device-µs/op).
func BenchmarkGPULaunch(b *testing.B) {
	d := openGPU(b)
	s := kernels.Spec{Op: kernels.Scale, In: []kernels.Shape{{256}}, Params: kernels.Params{Scale: 2}}
	in, _ := d.Alloc(1024)
	out, _ := d.Alloc(1024)
	var dev time.Duration
	b.ReportAllocs()
	for b.Loop() {
		tm, err := d.Run(s, []backends.Buffer{in}, out)
		if err != nil {
			b.Fatal(err)
		}
		dev += tm.Duration
	}
	b.ReportMetric(float64(dev.Nanoseconds())/1e3/float64(b.N), "device-µs/op")
}

// BenchmarkGPUTransfer reports host↔device bandwidth from the events.
func BenchmarkGPUTransfer(b *testing.B) {
	d := openGPU(b)
	for _, n := range []int{4 << 10, 1 << 20, 64 << 20} {
		buf, _ := d.Alloc(int64(n))
		host := make([]byte, n)
		for _, dir := range []string{"write", "read"} {
			b.Run(fmt.Sprintf("%s_%dKiB", dir, n>>10), func(b *testing.B) {
				var dev time.Duration
				b.SetBytes(int64(n))
				b.ReportAllocs()
				for b.Loop() {
					var tm backends.Timing
					var err error
					if dir == "write" {
						tm, err = d.Write(buf, host)
					} else {
						tm, err = d.Read(host, buf)
					}
					if err != nil {
						b.Fatal(err)
					}
					dev += tm.Duration
				}
				b.ReportMetric(float64(n)*float64(b.N)/dev.Seconds()/1e9, "GB/s")
			})
		}
		buf.Free()
	}
}

// BenchmarkGPUQueuedChain runs a chain of 64 dependent 256-element Scale
// ops (x → y → x …), as a decode step's small ops come: synchronously
// (Run after Run: launch, synchronisation and timing read per op), queued
// (RunAsync after RunAsync, then Sync), gathered (the same between Record
// and Flush: one graph replayed per chain) and gathered one by one (the
// kernels launched in one call, no graph). ns/op is the chain's wall
// time; the ratios are what queueing and gathering save per step.
func BenchmarkGPUQueuedChain(b *testing.B) {
	d := openGPU(b)
	const ops = 64
	s := kernels.Spec{Op: kernels.Scale, In: []kernels.Shape{{256}}, Params: kernels.Params{Scale: 1.0001}}
	x, _ := d.Alloc(1024)
	y, _ := d.Alloc(1024)
	bufs := [2]backends.Buffer{x, y}
	for _, mode := range []string{"sync", "queued", "gathered", "gathered-one-by-one"} {
		b.Run(mode, func(b *testing.B) {
			gathered := strings.HasPrefix(mode, "gathered")
			if mode == "gathered-one-by-one" {
				noGraphs(b, d)
			}
			for b.Loop() {
				if gathered {
					if err := d.Record(); err != nil {
						b.Fatal(err)
					}
				}
				for i := range ops {
					var err error
					if mode == "sync" {
						_, err = d.Run(s, bufs[i%2:i%2+1], bufs[1-i%2])
					} else {
						_, err = d.RunAsync(s, bufs[i%2:i%2+1], bufs[1-i%2], nil)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				if gathered {
					if err := d.Flush(); err != nil {
						b.Fatal(err)
					}
				}
				if err := d.Sync(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// noGraphs has d launch gathered kernels one by one until tb ends.
func noGraphs(tb testing.TB, d *Device) {
	_ = d.gated(func() error { d.graphStats.NoGraphs = "turned off by the benchmark"; return nil })
	tb.Cleanup(func() { _ = d.gated(func() error { d.graphStats.NoGraphs = d.graphsMissing(); return nil }) })
}

// TestGPUGatheredReplay is TestFakeGatheredReplay on the real device: the
// first step runs kernel by kernel, the second builds a graph, the next
// replay it with the KV append's new position, and the cache holds every
// step's rows.
func TestGPUGatheredReplay(t *testing.T) {
	d := openGPU(t)
	s := newStepBufs(t, d, 8)
	gatheredSteps(t, d, s, 0, 4)
	st := d.Graphs()
	t.Logf("%+v", st)
	if st.NoGraphs != "" || st.OneByOne != 1 || st.Builds != 1 || st.Replays != 2 || st.Updated != 2 {
		t.Errorf("%+v: want graphs, 1 launch one by one, 1 build, 2 replays updating the append's node", st)
	}
	noGraphs(t, d)
	gatheredSteps(t, d, s, 4, 2)
}

// BenchmarkGPUCalls splits the host's cost of one queued op into its
// runtime calls, each on its own (ns/op, wall clock): the device binding
// of every call (do), an event record, a query of a completed event, a
// bare kernel launch, planning the op, and the whole RunAsync. Where a
// queued op costs more than its launch, the rest is in these parts.
func BenchmarkGPUCalls(b *testing.B) {
	d := openGPU(b)
	s := kernels.Spec{Op: kernels.Scale, In: []kernels.Shape{{256}}, Params: kernels.Params{Scale: 1.0001}}
	x, _ := d.Alloc(1024)
	y, _ := d.Alloc(1024)
	if _, err := d.Run(s, []backends.Buffer{x}, y); err != nil { // compile and load
		b.Fatal(err)
	}
	p, err := planOp(s, d.blas != 0)
	if err != nil {
		b.Fatal(err)
	}
	var fn, ev uintptr
	if err := d.do(func() error {
		var err error
		if fn, err = d.function(p.launch.kernel); err != nil {
			return err
		}
		ev, err = d.takeEvent()
		return err
	}); err != nil {
		b.Fatal(err)
	}
	bx, _ := d.own(x)
	by, _ := d.own(y)
	bufs := []*buffer{bx, by}
	check := func(code int) error {
		if code != 0 {
			return fmt.Errorf("status %d", code)
		}
		return nil
	}
	parts := []struct {
		name string
		f    func() error
	}{
		{"do", func() error { return d.do(func() error { return nil }) }},
		{"eventRecord", func() error { return d.do(func() error { return check(d.s.eventRecord(ev, d.stream)) }) }},
		{"eventQuery", func() error { return d.do(func() error { return check(d.s.call(fEventQuery, ev)) }) }},
		{"launch", func() error { return d.do(func() error { return d.launch(&p, fn, bufs) }) }},
		{"planOp", func() error { _, err := planOp(s, d.blas != 0); return err }},
		{"RunAsync", func() error {
			_, err := d.RunAsync(s, []backends.Buffer{x}, y, nil)
			return err
		}},
	}
	for _, part := range parts {
		b.Run(part.name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				if err := part.f(); err != nil {
					b.Fatal(err)
				}
				// Drain now and then so that the queue stays short, as a
				// decode step's does.
				if n++; n%64 == 0 {
					if err := d.Sync(); err != nil {
						b.Fatal(err)
					}
				}
			}
			if err := d.Sync(); err != nil {
				b.Fatal(err)
			}
		})
	}
}
