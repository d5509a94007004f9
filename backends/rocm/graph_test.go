//go:build cgo

package rocm

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/backends/cpu"
	"github.com/adaptsched/adaptsched/executor"
	"github.com/adaptsched/adaptsched/kernels"
)

// stepBufs are a small decode-like step's buffers: x in, y = 2x, z = y+x,
// and a cache [1, 2, ctx, 2] that each step appends z to at its position.
type stepBufs struct {
	x, y, z, cache backends.Buffer
	ctx            int
}

func newStepBufs(t testing.TB, d *Device, ctx int) *stepBufs {
	t.Helper()
	s := &stepBufs{ctx: ctx}
	for _, p := range []*backends.Buffer{&s.x, &s.y, &s.z} {
		b, err := d.Alloc(16)
		if err != nil {
			t.Fatal(err)
		}
		*p = b
	}
	c, err := d.Alloc(int64(16 * ctx))
	if err != nil {
		t.Fatal(err)
	}
	s.cache = c
	if _, err := d.Write(s.cache, make([]byte, 16*ctx)); err != nil {
		t.Fatal(err)
	}
	return s
}

// stepInput is step pos's x.
func stepInput(pos int) []float32 {
	f := float32(pos + 1)
	return []float32{f, -f, 0.5 * f, 10 + f}
}

// queueStep writes step pos's x, then queues its three ops and returns
// their events (gathered when d records).
func queueStep(t testing.TB, d *Device, s *stepBufs, pos int) []backends.Event {
	t.Helper()
	if _, err := d.Write(s.x, kernels.AsBytes(stepInput(pos))); err != nil {
		t.Fatal(err)
	}
	ops := []struct {
		spec kernels.Spec
		in   []backends.Buffer
		out  backends.Buffer
	}{
		{kernels.Spec{Op: kernels.Scale, In: []kernels.Shape{{4}}, Params: kernels.Params{Scale: 2}}, []backends.Buffer{s.x}, s.y},
		{kernels.Spec{Op: kernels.Add, In: []kernels.Shape{{4}, {4}}}, []backends.Buffer{s.y, s.x}, s.z},
		{kernels.Spec{Op: kernels.KVAppend, In: []kernels.Shape{{1, 2, s.ctx, 2}, {1, 1, 2, 2}}, Params: kernels.Params{Pos: pos}},
			[]backends.Buffer{s.cache, s.z}, s.cache},
	}
	var evs []backends.Event
	for _, op := range ops {
		ev, err := d.RunAsync(op.spec, op.in, op.out, nil)
		if err != nil {
			t.Fatalf("%v: %v", op.spec.Op, err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// checkCache reads the cache and checks that positions 0 to upto-1 hold
// 3·x of their step (the cache is [1, 2 heads, ctx, 2]).
func checkCache(t testing.TB, d *Device, s *stepBufs, upto int) {
	t.Helper()
	got := make([]float32, 4*s.ctx)
	if _, err := d.Read(kernels.AsBytes(got), s.cache); err != nil {
		t.Fatal(err)
	}
	for pos := range upto {
		x := stepInput(pos)
		for h := range 2 {
			for j := range 2 {
				if g, w := got[(h*s.ctx+pos)*2+j], 3*x[h*2+j]; g != w {
					t.Fatalf("cache head %d position %d [%d] = %v, want %v", h, pos, j, g, w)
				}
			}
		}
	}
}

// gatheredSteps runs steps steps, each recorded and flushed, and checks
// the cache after each; every op's timing is Gathered.
func gatheredSteps(t testing.TB, d *Device, s *stepBufs, from, steps int) {
	t.Helper()
	for pos := from; pos < from+steps; pos++ {
		if err := d.Record(); err != nil {
			t.Fatal(err)
		}
		evs := queueStep(t, d, s, pos)
		if err := d.Flush(); err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			tm, err := ev.Wait()
			if err != nil {
				t.Fatal(err)
			}
			if tm.Clock != backends.Gathered || tm.Duration != 0 {
				t.Fatalf("a gathered op's timing %+v, want Gathered and 0", tm)
			}
		}
		checkCache(t, d, s, pos+1)
	}
}

// TestFakeGatheredReplay: the first gathered step is launched kernel by
// kernel, the second builds a graph of the same kernels, the next ones
// replay it with the KV append's new position, and a replay launches no
// kernel one by one (it succeeds while every kernel launch fails).
func TestFakeGatheredReplay(t *testing.T) {
	d := openFake(t, fakeOptions(t, "blas"))
	s := newStepBufs(t, d, 8)
	gatheredSteps(t, d, s, 0, 3)
	st := d.Graphs()
	if st.NoGraphs != "" || st.OneByOne != 1 || st.Builds != 1 || st.Replays != 1 || st.Launches != 3 || st.Kernels != 9 {
		t.Fatalf("after 3 steps %+v, want 1 launch one by one, 1 build, 1 replay, 3 launches of 3 kernels", st)
	}
	if st.Updated != 1 {
		t.Errorf("nodes updated %d, want 1 (the append's position, once per replay)", st.Updated)
	}
	t.Setenv("FAKEHIP_LAUNCH_ERROR", "1")
	gatheredSteps(t, d, s, 3, 2)
	if st := d.Graphs(); st.Replays != 3 {
		t.Errorf("replays %d, want 3", st.Replays)
	}
}

// TestFakeGatheredRebuild: a step with other kernels builds a new graph.
func TestFakeGatheredRebuild(t *testing.T) {
	d := openFake(t, fakeOptions(t, "blas"))
	s := newStepBufs(t, d, 8)
	gatheredSteps(t, d, s, 0, 2)
	// A gathering of one op: not the last graph's kernels.
	if err := d.Record(); err != nil {
		t.Fatal(err)
	}
	sc := kernels.Spec{Op: kernels.Scale, In: []kernels.Shape{{4}}, Params: kernels.Params{Scale: 3}}
	if _, err := d.RunAsync(sc, []backends.Buffer{s.x}, s.y, nil); err != nil {
		t.Fatal(err)
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 4)
	if _, err := d.Read(kernels.AsBytes(got), s.y); err != nil {
		t.Fatal(err)
	}
	x := stepInput(1)
	for i := range got {
		if got[i] != 3*x[i] {
			t.Fatalf("y = %v, want 3·%v", got, x)
		}
	}
	gatheredSteps(t, d, s, 2, 2)
	// Steps 0 and 1 build the step's graph; the one op is new to its
	// segment, and so is the step after it; the next step builds again.
	if st := d.Graphs(); st.Builds != 2 || st.Replays != 0 || st.OneByOne != 3 {
		t.Errorf("%+v, want 2 builds, 3 gatherings launched one by one", st)
	}
}

// TestFakeGatheredNoGraphs: where kernel nodes cannot be built, gathered
// kernels are launched one by one, with the same results, and the reason
// is kept.
func TestFakeGatheredNoGraphs(t *testing.T) {
	t.Setenv("FAKEHIP_NO_GRAPH", "1")
	d := openFake(t, fakeOptions(t, "blas"))
	s := newStepBufs(t, d, 8)
	gatheredSteps(t, d, s, 0, 3)
	st := d.Graphs()
	if st.Builds != 0 || st.OneByOne != 3 || !strings.Contains(st.NoGraphs, "hipGraphAddKernelNode") || st.Replays != 0 {
		t.Errorf("%+v, want 3 launches one by one and the failing call named", st)
	}
}

// TestFakeGatheredWaitLaunches: an op stays gathered (not Launched, not
// Done) until something needs it: its Wait launches the gathering, and so
// does a copy that reads its output.
func TestFakeGatheredWaitLaunches(t *testing.T) {
	d := openFake(t, fakeOptions(t, "blas"))
	s := newStepBufs(t, d, 8)
	if err := d.Record(); err != nil {
		t.Fatal(err)
	}
	evs := queueStep(t, d, s, 0)
	launched := func(ev backends.Event) bool {
		select {
		case <-ev.(backends.Deferred).Launched():
			return true
		default:
			return false
		}
	}
	if launched(evs[0]) || evs[2].Done() {
		t.Fatal("a gathered op launched before anything waited for it")
	}
	if _, err := evs[1].Wait(); err != nil {
		t.Fatal(err)
	}
	if !launched(evs[2]) {
		t.Fatal("waiting for a gathered op did not launch its gathering")
	}
	// Still recording: the next ops gather again, and a copy of their
	// output launches them first.
	sc := kernels.Spec{Op: kernels.Scale, In: []kernels.Shape{{4}}, Params: kernels.Params{Scale: -1}}
	ev, err := d.RunAsync(sc, []backends.Buffer{s.z}, s.y, nil)
	if err != nil {
		t.Fatal(err)
	}
	if launched(ev) {
		t.Fatal("an op queued while recording was launched at once")
	}
	got := make([]float32, 4)
	rev, err := d.ReadAsync(kernels.AsBytes(got), s.y, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rev.Wait(); err != nil {
		t.Fatal(err)
	}
	x := stepInput(0)
	for i := range got {
		if got[i] != -3*x[i] {
			t.Fatalf("read %v after a gathered op, want -3·%v", got, x)
		}
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
}

// TestFakeGatheredError: a gathered op whose kernel fails as it runs
// reports an error naming it, from Wait and from Sync; the next gathering
// runs.
func TestFakeGatheredError(t *testing.T) {
	d := openFake(t, fakeOptions(t, "blas"))
	s := newStepBufs(t, d, 8)
	gatheredSteps(t, d, s, 0, 1)
	t.Setenv("FAKEHIP_ASYNC_ERROR", "700")
	if err := d.Record(); err != nil {
		t.Fatal(err)
	}
	evs := queueStep(t, d, s, 1)
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	_, err := evs[2].Wait()
	var de *backends.DeviceError
	if !errors.As(err, &de) || de.Op != "KVAppend" {
		t.Fatalf("Wait of a failed gathered op: %v, want a DeviceError naming KVAppend", err)
	}
	if err := d.Sync(); err == nil {
		t.Error("Sync after a failed gathering reported nothing")
	}
}

// TestFakeGatheredClose: Close launches and drains gathered ops.
func TestFakeGatheredClose(t *testing.T) {
	d, err := Open(fakeOptions(t, "blas"))
	if err != nil {
		t.Fatal(err)
	}
	s := newStepBufs(t, d, 8)
	if err := d.Record(); err != nil {
		t.Fatal(err)
	}
	evs := queueStep(t, d, s, 0)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(evs, func(ev backends.Event) bool { return ev.Done() }) || !evs[2].Done() {
		t.Fatal("Close left gathered ops not done")
	}
	if _, err := evs[2].Wait(); err != nil {
		t.Errorf("a gathered op drained by Close: %v", err)
	}
}

// TestFakeGatheredSegments: a long gathering is launched in segments as
// it grows, so that the device starts before the step is all gathered;
// the third step like the last replays each segment's own graph. The
// segments are planned (backends.SegmentPlanner) from measured costs
// (gatherCosts) preset with the weight of a million kernels, so that what
// this test's steps add does not move the plan, whether the host gathers
// a kernel more slowly than the device runs it or the device is the
// slower; SegmentLimit's before any cost is measured.
func TestFakeGatheredSegments(t *testing.T) {
	for _, c := range []struct {
		name                 string
		host, device, launch float64 // µs; 0: not measured
	}{
		{"host-bound", 8, 5, 20},
		{"device-bound", 4, 6, 20},
		{"unmeasured", 0, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) { checkGatheredSegments(t, c.host, c.device, c.launch) })
	}
}

func checkGatheredSegments(t *testing.T, hostUs, deviceUs, launchUs float64) {
	d := openFake(t, fakeOptions(t, "blas"))
	const weight = 1_000_000
	if hostUs > 0 {
		d.costs = gatherCosts{hostNs: int64(hostUs * 1e3 * weight), hostKernels: weight, launchNs: int64(launchUs * 1e3 * weight), launches: weight,
			deviceNs: int64(deviceUs * 1e3 * weight), deviceKernels: weight}
	}
	const ops = 40
	sc := kernels.Spec{Op: kernels.Scale, In: []kernels.Shape{{4}}, Params: kernels.Params{Scale: 2}}
	x, _ := d.Alloc(16)
	y, _ := d.Alloc(16)
	bufs := [2]backends.Buffer{x, y}
	var p backends.SegmentPlanner
	sizes := func(last int, limit func(n, done, last int) int) []int {
		var out []int
		for done := 0; done < ops; {
			out = append(out, min(ops-done, limit(len(out), done, last)))
			done += out[len(out)-1]
		}
		return out
	}
	segments := func(last int) int {
		p.Plan(last, hostUs, deviceUs, launchUs, weight)
		return len(sizes(last, p.Limit))
	}
	segments(ops)
	if got, old := sizes(ops, p.Limit), sizes(ops, backends.SegmentLimit); (hostUs > 0) == slices.Equal(got, old) {
		t.Fatalf("segments %v against SegmentLimit's %v, planned from costs %v, %v, %v µs", got, old, hostUs, deviceUs, launchUs)
	}
	for step := range 4 {
		before := d.Graphs()
		if _, err := d.Write(x, f32Bytes(1, 2, 3, 4)); err != nil {
			t.Fatal(err)
		}
		if err := d.Record(); err != nil {
			t.Fatal(err)
		}
		var first backends.Event
		for i := range ops {
			ev, err := d.RunAsync(sc, bufs[i%2:i%2+1], bufs[1-i%2], nil)
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				first = ev
			}
		}
		select {
		case <-first.(backends.Deferred).Launched():
		default:
			t.Fatalf("step %d: %d kernels gathered and none launched", step, ops)
		}
		if err := d.Flush(); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, 4)
		if _, err := d.Read(kernels.AsBytes(got), bufs[ops%2]); err != nil {
			t.Fatal(err)
		}
		if want := float32(1 << ops); got[0] != want || got[3] != 4*want {
			t.Fatalf("step %d: %v after %d doublings, want %v·[1 2 3 4]", step, got, ops, want)
		}
		last := 0
		if step > 0 {
			last = ops
		}
		st := d.Graphs()
		if n := st.Launches - before.Launches; n != int64(segments(last)) {
			t.Errorf("step %d: %d launches, want %d segments", step, n, segments(last))
		}
		if step == 3 && st.Replays-before.Replays != int64(segments(ops)) {
			t.Errorf("step 3 replayed %d segments, want all %d", st.Replays-before.Replays, segments(ops))
		}
	}
	// Steps 1 to 3 were planned for the 40 ops of the step before: the
	// planner has their device time by that size.
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := d.planner.RanOps(ops); got != 3*ops {
		t.Errorf("the planner has %d kernels' device time for gatherings of %d, want %d", got, ops, 3*ops)
	}
}

// BenchmarkFakeGatheredExecutor is the host's cost of a decode-like
// chain of 64 small ops through the Executor onto this backend (on the
// fake runtime, whose calls cost little: the Go side's share), queued op
// by op and gathered, against the same chain queued on the device by
// hand (RunAsync after the op before, Record and Flush around it when
// gathered, and a Read), the two alternating step by step: ns/op is
// both per step; exec-ns/op the Executor's per op, direct-ns/op the
// device's own, and overhead-ns/op their difference.
func BenchmarkFakeGatheredExecutor(b *testing.B) {
	benchGatheredExecutor(b, func() (*Device, error) { return Open(fakeOptions(&testing.T{}, "blas")) })
}

// BenchmarkGPUGatheredExecutor is BenchmarkFakeGatheredExecutor on the
// real device (skipped without one): the Executor's share of a decode
// step's host time there.
func BenchmarkGPUGatheredExecutor(b *testing.B) {
	benchGatheredExecutor(b, func() (*Device, error) { return Open(DefaultOptions().WithCacheDir(b.TempDir())) })
}

// benchGatheredExecutor is BenchmarkFakeGatheredExecutor on the device
// open returns; it skips when there is none.
func benchGatheredExecutor(b *testing.B, open func() (*Device, error)) {
	const ops = 64
	for _, mode := range []string{"queued", "gathered"} {
		b.Run(mode, func(b *testing.B) {
			d, err := open()
			if err != nil {
				b.Skipf("no device: %v", err)
			}
			c, err := cpu.New("cpu", cpu.Options{Threads: 1, CalibrationFile: "-"})
			if err != nil {
				b.Fatal(err)
			}
			e, err := executor.New(executor.Config{Backends: []backends.Backend{c, d}, Strategy: adaptive.Only("rocm"),
				NoCalibration: true, Seed: 1, CloseBackends: true})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			sc := kernels.Spec{Op: kernels.Scale, In: []kernels.Shape{{256}}, Params: kernels.Params{Scale: 1}}
			var bufs, dbufs [2]backends.Buffer
			for i := range bufs {
				if bufs[i], err = e.Alloc(1024); err != nil {
					b.Fatal(err)
				}
				if _, err := e.Write(bufs[i], make([]byte, 1024)); err != nil {
					b.Fatal(err)
				}
				if dbufs[i], err = d.Alloc(1024); err != nil {
					b.Fatal(err)
				}
				if _, err := d.Write(dbufs[i], make([]byte, 1024)); err != nil {
					b.Fatal(err)
				}
			}
			gathered := mode == "gathered"
			out := make([]byte, 1024)
			step := func() {
				if gathered {
					if err := e.Record(); err != nil {
						b.Fatal(err)
					}
				}
				for i := range ops {
					if _, err := e.Run(sc, bufs[i%2:i%2+1], bufs[1-i%2]); err != nil {
						b.Fatal(err)
					}
				}
				if err := e.Flush(); err != nil {
					b.Fatal(err)
				}
				if _, err := e.Read(out, bufs[ops%2]); err != nil {
					b.Fatal(err)
				}
			}
			direct := directChain(b, d, sc, dbufs, ops, gathered)
			step()
			direct()
			var execNs, directNs time.Duration
			b.ReportAllocs()
			for b.Loop() {
				t0 := time.Now()
				step()
				t1 := time.Now()
				direct()
				execNs += t1.Sub(t0)
				directNs += time.Since(t1)
			}
			per := func(d time.Duration) float64 { return float64(d) / float64(b.N*ops) }
			b.ReportMetric(per(execNs), "exec-ns/op")
			b.ReportMetric(per(directNs), "direct-ns/op")
			b.ReportMetric(per(execNs-directNs), "overhead-ns/op")
		})
	}
}

// TestFakeGatheredUnbound: an op that joins a gathering makes no vendor
// call, not even the binding of its thread to the device (here failing):
// only the launch does, which fails as the binding does.
func TestFakeGatheredUnbound(t *testing.T) {
	d := openFake(t, fakeOptions(t, "blas"))
	sc := kernels.Spec{Op: kernels.Scale, In: []kernels.Shape{{4}}, Params: kernels.Params{Scale: 2}}
	x, _ := d.Alloc(16)
	y, _ := d.Alloc(16)
	if _, err := d.Write(x, f32Bytes(1, 2, 3, 4)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Run(sc, []backends.Buffer{x}, y); err != nil { // loads the kernel
		t.Fatal(err)
	}
	if err := d.Record(); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FAKEHIP_SET_DEVICE_ERROR", "1")
	bufs := [2]backends.Buffer{x, y}
	for i := range backends.SegmentLimit(0, 0, 0) - 1 { // below the first segment's launch
		if _, err := d.RunAsync(sc, bufs[i%2:i%2+1], bufs[1-i%2], nil); err != nil {
			t.Fatalf("gathered op %d: %v", i, err)
		}
	}
	if err := d.Flush(); err == nil {
		t.Fatal("Flush launched with the binding failing")
	}
	os.Unsetenv("FAKEHIP_SET_DEVICE_ERROR")
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 4)
	if _, err := d.Read(kernels.AsBytes(got), y); err != nil {
		t.Fatal(err)
	}
	if want := []float32{8, 16, 24, 32}; !slices.Equal(got, want) { // y = 2x, x = 2y, y = 2x
		t.Errorf("after 3 gathered doublings of [1 2 3 4]: %v, want %v", got, want)
	}
}

// TestFakeGatheredFree: a buffer freed while a gathered op still uses it
// goes back to the pool once the gathering has run, not before.
func TestFakeGatheredFree(t *testing.T) {
	d := openFake(t, fakeOptions(t, "blas"))
	x, _ := d.Alloc(16)
	if _, err := d.Write(x, f32Bytes(1, 2, 3, 4)); err != nil {
		t.Fatal(err)
	}
	liveBefore, _ := d.Pool()
	y, _ := d.Alloc(16)
	liveWith, _ := d.Pool()
	if err := d.Record(); err != nil {
		t.Fatal(err)
	}
	sc := kernels.Spec{Op: kernels.Scale, In: []kernels.Shape{{4}}, Params: kernels.Params{Scale: 2}}
	ev, err := d.RunAsync(sc, []backends.Buffer{x}, y, nil)
	if err != nil {
		t.Fatal(err)
	}
	y.Free()
	if live, _ := d.Pool(); live != liveWith {
		t.Fatalf("live %d bytes after freeing a buffer a gathered op writes, want %d: its memory went back early", live, liveWith)
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := ev.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	if live, _ := d.Pool(); live != liveBefore {
		t.Errorf("live %d bytes after the gathering ran, want %d: the freed buffer's memory was lost", live, liveBefore)
	}
}

// TestFakeGatherCosts: the host's time per gathered kernel is measured
// from a gathering's first op to its last, so that a wait before Flush
// (a decode step reads its token first) is not counted as the host's,
// and each segment's device time comes back from its events.
func TestFakeGatherCosts(t *testing.T) {
	d := openFake(t, fakeOptions(t, "blas"))
	sc := kernels.Spec{Op: kernels.Scale, In: []kernels.Shape{{4}}, Params: kernels.Params{Scale: 2}}
	x, _ := d.Alloc(16)
	y, _ := d.Alloc(16)
	bufs := [2]backends.Buffer{x, y}
	const ops, wait = 40, 30 * time.Millisecond
	if err := d.Record(); err != nil {
		t.Fatal(err)
	}
	for i := range ops {
		if _, err := d.RunAsync(sc, bufs[i%2:i%2+1], bufs[1-i%2], nil); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(wait) // the host waiting, as for a step's token
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	host, device, launch := d.costs.estimates()
	if d.costs.hostKernels != ops-1 || !(host > 0 && host*1e3 < float64(wait.Nanoseconds())/ops/3) {
		t.Errorf("host %.1f µs a kernel over %d kernels: want the gathering's own, not the wait's %v / %d", host, d.costs.hostKernels, wait, ops)
	}
	if d.costs.deviceKernels != ops || !(device > 0) || d.costs.launches == 0 || !(launch > 0) {
		t.Errorf("device %.1f µs a kernel over %d kernels, %d launches of %.1f µs", device, d.costs.deviceKernels, d.costs.launches, launch)
	}
}
