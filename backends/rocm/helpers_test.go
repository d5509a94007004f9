package rocm

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

// specInputs returns host data for every input of s: uniform values in
// [-1, 1) from a fixed-seed PCG, encoded in each input's dtype; an input
// of row indices (s.IndexRows) holds rows of its table instead.
func specInputs(s kernels.Spec, seed uint64) ([][]byte, error) {
	r := rand.New(rand.NewPCG(seed, 7))
	out := make([][]byte, len(s.In))
	for i, sh := range s.In {
		vals := make([]float32, sh.Elements())
		for j := range vals {
			vals[j] = 2*r.Float32() - 1
			if n := s.IndexRows(i); n > 0 {
				vals[j] = float32(r.IntN(n))
			}
		}
		b, err := kernels.Quantize(s.InDType(i), vals)
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

// compareF32 reports the first element of got that differs from want by
// more than tol·(1+|want|).
func compareF32(got, want []byte, tol float64) error {
	g, w := kernels.AsF32(got), kernels.AsF32(want)
	if len(g) != len(w) {
		return fmt.Errorf("%d values, want %d", len(g), len(w))
	}
	for i := range w {
		d := math.Abs(float64(g[i]) - float64(w[i]))
		if d > tol*(1+math.Abs(float64(w[i]))) || math.IsNaN(float64(g[i])) {
			return fmt.Errorf("element %d: got %g, want %g", i, g[i], w[i])
		}
	}
	return nil
}

// runConcurrently runs every spec from workers goroutines at once, each
// op with its own buffers, and returns the first result that differs from
// kernels.Reference (tolerance tol) or the first error. The Device
// serialises the vendor calls of callers on different OS threads.
func runConcurrently(d backends.Backend, specs []kernels.Spec, workers, reps int, tol float64) error {
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for r := range reps {
				s := specs[(w+r)%len(specs)]
				if err := runChecked(d, s, uint64(w*reps+r), tol); err != nil {
					errs <- fmt.Errorf("worker %d, %v: %w", w, s, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// runChecked runs s on inputs of seed (runRef) and compares its output
// with kernels.Reference.
func runChecked(d backends.Backend, s kernels.Spec, seed uint64, tol float64) error {
	got, want, _, err := runRef(d, s, seed)
	if err != nil {
		return err
	}
	if s.OutDType() != kernels.F32 {
		// Quantized or half blocks are copied, not computed: bit-exact.
		if !bytes.Equal(got, want) {
			return fmt.Errorf("%v output differs from the reference", s.OutDType())
		}
		return nil
	}
	switch s.Op {
	case kernels.Argmax:
		tol = 0 // indices: exact, or a neighbour of a large one would pass
	case kernels.GetRows:
		tol = 0 // rows decoded as the reference decodes them: exact
	}
	return compareF32(got, want, tol)
}

// runRef uploads inputs of seed (specInputs), runs s, reads the output
// back and returns it with kernels.Reference's output and the Timing.
func runRef(d backends.Backend, s kernels.Spec, seed uint64) (got, want []byte, tm backends.Timing, err error) {
	in, err := specInputs(s, seed)
	if err != nil {
		return nil, nil, tm, err
	}
	if got, tm, err = runWith(d, s, in); err != nil {
		return nil, nil, tm, err
	}
	want = make([]byte, s.OutBytes())
	if err := kernels.Reference(s, in, want); err != nil {
		return nil, nil, tm, err
	}
	return got, want, tm, nil
}

// runWith uploads in, runs s on d and returns the output read back and
// the op's Timing.
func runWith(d backends.Backend, s kernels.Spec, in [][]byte) (got []byte, tm backends.Timing, err error) {
	bufs := make([]backends.Buffer, len(in))
	for i, b := range in {
		if bufs[i], err = d.Alloc(int64(len(b))); err != nil {
			return nil, tm, err
		}
		defer bufs[i].Free()
		if _, err := d.Write(bufs[i], b); err != nil {
			return nil, tm, err
		}
	}
	out, err := d.Alloc(s.OutBytes())
	if err != nil {
		return nil, tm, err
	}
	defer out.Free()
	if tm, err = d.Run(s, bufs, out); err != nil {
		return nil, tm, err
	}
	got = make([]byte, s.OutBytes())
	if _, err := d.Read(got, out); err != nil {
		return nil, tm, err
	}
	return got, tm, nil
}
