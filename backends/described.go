package backends

import (
	"fmt"

	"github.com/adaptsched/adaptsched/kernels"
)

// Described returns a backend that only describes itself: Info returns
// info, Supports accepts every op, and Alloc, Write, Read and Run fail
// with ErrUnsupported. It is what a scheduler places ops on when it does
// not run them (evaluation, replay, tests), the durations coming from
// elsewhere.
func Described(info Info) Backend { return described{info} }

type described struct{ info Info }

var _ Backend = described{}

func (b described) Info() Info                  { return b.info }
func (b described) Supports(kernels.Spec) error { return nil }
func (b described) Close() error                { return nil }

func (b described) Alloc(int64) (Buffer, error) { return nil, b.runsNothing() }

func (b described) Write(Buffer, []byte) (Timing, error) { return Timing{}, b.runsNothing() }

func (b described) Read([]byte, Buffer) (Timing, error) { return Timing{}, b.runsNothing() }

func (b described) Run(kernels.Spec, []Buffer, Buffer) (Timing, error) {
	return Timing{}, b.runsNothing()
}

func (b described) runsNothing() error {
	return fmt.Errorf("%w: %s is described, not run", ErrUnsupported, b.info.Name)
}
