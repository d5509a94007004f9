package main

import (
	"fmt"
	"io"
	"os"

	"github.com/adaptsched/adaptsched/trace"
)

// openChrome imports a Chrome trace (trace.ImportChrome). Its ops carry
// GPU durations only (backend "gpu", the sum of their kernels; an op that
// joined no kernel is unmeasured), so the CPU's come from -sim-cpu or
// -table (by default the simulated profiles, said in the report). The import
// holds the trace's ops in memory: Chrome traces are one JSON document,
// not a stream.
func openChrome(o *options, path, name string) (*traceInput, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	ct, err := trace.ImportChrome(f, name)
	f.Close()
	if err != nil {
		return nil, err
	}
	c := ct.Counts
	if c.Imported == 0 {
		return nil, fmt.Errorf("%w: %s: no op with input shapes among %d cpu_ops (record with record_shapes=True)", errInput, name, c.CPUOps)
	}
	in := &traceInput{name: name, open: func() (eventIter, error) {
		return &chromeIter{ops: ct.Ops}, nil
	}}
	in.note = fmt.Sprintf("chrome trace: %d ops imported (%d mapped onto the catalogue, %d opaque), %d of %d kernels joined",
		c.Imported, c.Mapped, c.Opaque, c.Joined, c.Kernels)
	return in, nil
}

// chromeIter streams imported ops as events; Line is the op's number.
type chromeIter struct {
	ops []trace.ChromeOp
	i   int
}

func (c *chromeIter) NextInto(e *trace.Event) error {
	if c.i >= len(c.ops) {
		*e = trace.Event{}
		return io.EOF
	}
	c.i++
	*e = c.ops[c.i-1].Event
	return nil
}

func (c *chromeIter) Line() int { return c.i }

// Where names the op last returned by its place in the file: a Chrome
// trace has no lines to point at (it is often one line), its events have
// an index.
func (c *chromeIter) Where() string {
	if c.i == 0 || c.i > len(c.ops) {
		return fmt.Sprintf("op %d", c.i)
	}
	op := &c.ops[c.i-1]
	return fmt.Sprintf("traceEvents[%d] (%s)", op.Index, op.Source)
}
func (c *chromeIter) Skipped() int { return 0 }
