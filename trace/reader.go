package trace

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/internal/input"
)

// ReaderOptions configure a Reader; zero fields take the defaults.
type ReaderOptions struct {
	// MaxLine bounds a line's length in bytes (default 1 MiB): a longer
	// line is an error (ErrLineTooLong), or skipped with SkipBad.
	MaxLine int
	// SkipBad skips malformed event lines (counted by Skipped) instead of
	// stopping at the first. A bad header is always an error.
	SkipBad bool
}

// Reader streams a trace's events in constant memory, whatever the file's
// size. Gzip input is recognised by its magic bytes, and a byte-order
// mark before the header is skipped (input.Gunzip). Errors read
// "name:line: message" and wrap ErrTrace or ErrLineTooLong. A Reader is
// not safe for concurrent use.
type Reader struct {
	name    string
	opts    ReaderOptions
	br      *bufio.Reader
	line    int
	long    []byte
	header  Header
	skipped int
	p       parser
	// declared are the backends the header lists; an event naming
	// another is an error, not a new arm.
	declared []string
}

// NewReader reads the header of the trace in r (name is used in errors)
// and returns a Reader positioned at the first event.
func NewReader(r io.Reader, name string, opts ReaderOptions) (*Reader, error) {
	if opts.MaxLine < 0 {
		return nil, fmt.Errorf("%w: max line %d", ErrInvalidOptions, opts.MaxLine)
	}
	if opts.MaxLine == 0 {
		opts.MaxLine = 1 << 20
	}
	// A BOM is skipped in the stream, not trimmed from the header line,
	// so that it counts toward no line's MaxLine (TestTraceBOM).
	br, err := input.Gunzip(r)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: gzip: %w", ErrTrace, name, err)
	}
	rd := &Reader{name: name, opts: opts, br: br}
	line, err := rd.readLine()
	if err == io.EOF {
		return nil, rd.errorf(ErrTrace, "empty trace: no header")
	}
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&rd.header); err != nil {
		return nil, rd.errorf(ErrTrace, "header: %v", err)
	}
	// Only white space may follow the header's object, as after an
	// event's (TestTraceReaderErrors "header trailing").
	if off := int(dec.InputOffset()); len(bytes.TrimSpace(line[off:])) > 0 {
		col := off + len(line[off:]) - len(bytes.TrimLeft(line[off:], " \t\r")) + 1
		return nil, rd.errorf(ErrTrace, "column %d: unexpected data after the header", col)
	}
	if rd.header.Format != TraceFormat {
		return nil, rd.errorf(ErrTrace, "format %s, want %q", input.Quote(rd.header.Format), TraceFormat)
	}
	if rd.header.Version != TraceVersion {
		return nil, rd.errorf(ErrTrace, "version %d, this build reads %d", rd.header.Version, TraceVersion)
	}
	if err := checkHeaderBackends(rd.header.Backends); err != nil {
		return nil, rd.errorf(ErrTrace, "%v", err)
	}
	for _, b := range rd.header.Backends {
		rd.declared = append(rd.declared, b.Name)
	}
	return rd, nil
}

// MaxNominal bounds a header backend's Nominal figures: no device comes
// near it, and larger ones overflow once scaled to per-µs rates.
const MaxNominal = 1e12

// checkHeaderBackends reports the first header backend with an empty or
// repeated name, an unknown Kind, or a Nominal figure that is not finite
// in [0, MaxNominal] (0 stays accepted: it means unknown), or a negative
// Threads or Memory. The replay uses these figures as the arms' cost
// model, so an absurd one would silently skew its results
// (TestTraceReaderErrors "backend ...").
func checkHeaderBackends(bes []backends.Info) error {
	seen := map[string]int{}
	for i, b := range bes {
		if b.Name == "" {
			return fmt.Errorf("backends[%d]: empty name", i)
		}
		if j, ok := seen[b.Name]; ok {
			return fmt.Errorf("backends[%d]: name %s repeats backends[%d]'s", i, input.Quote(b.Name), j)
		}
		seen[b.Name] = i
		at := fmt.Sprintf("backends[%d] (%s)", i, input.Quote(b.Name))
		if b.Kind != backends.CPU && b.Kind != backends.GPU {
			return fmt.Errorf("%s: Kind %d: want %d (cpu) or %d (gpu)", at, b.Kind, backends.CPU, backends.GPU)
		}
		if b.Threads < 0 || b.Memory < 0 {
			return fmt.Errorf("%s: Threads %d, Memory %d: want ≥ 0", at, b.Threads, b.Memory)
		}
		n := b.Nominal
		for _, f := range []struct {
			name string
			v    float64
		}{{"GFLOPS", n.GFLOPS}, {"MemGBps", n.MemGBps}, {"DispatchUs", n.DispatchUs}, {"LinkGBps", n.LinkGBps}, {"LinkLatencyUs", n.LinkLatencyUs}} {
			if !(f.v >= 0 && f.v <= MaxNominal) {
				return fmt.Errorf("%s: Nominal.%s %v: want a figure in [0, %g] (0: unknown)", at, f.name, f.v, MaxNominal)
			}
		}
	}
	return nil
}

// Header returns the trace's header.
func (r *Reader) Header() Header { return r.header }

// Skipped returns the number of bad lines skipped (SkipBad).
func (r *Reader) Skipped() int { return r.skipped }

// Line returns the number of the last line read (the header is line 1).
func (r *Reader) Line() int { return r.line }

// Next returns the next event, or io.EOF after the last. Blank lines are
// ignored. The event owns its slices and map.
func (r *Reader) Next() (Event, error) {
	var e Event
	r.p.reuse = false
	err := r.next(&e)
	return e, err
}

// NextInto is Next decoding into e, for callers that hold one event at a
// time: it allocates nothing once its buffers have grown, because e's
// Shape and Shadow then live in the Reader's buffers, valid until the
// next call. Every field of e is overwritten; at io.EOF or an error e is
// zero.
func (r *Reader) NextInto(e *Event) error {
	r.p.reuse = true
	return r.next(e)
}

func (r *Reader) next(e *Event) error {
	for {
		*e = Event{}
		line, err := r.readLine()
		if err == io.EOF {
			return io.EOF
		}
		if err != nil {
			if errors.Is(err, ErrLineTooLong) && r.opts.SkipBad {
				r.skipped++
				continue
			}
			return err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		err = r.p.event(line, e)
		if err == nil {
			err = r.checkBackends(e)
		}
		if err != nil {
			if r.opts.SkipBad {
				r.skipped++
				continue
			}
			*e = Event{}
			return r.errorf(ErrTrace, "%v", err)
		}
		return nil
	}
}

func (r *Reader) errorf(sentinel error, format string, args ...any) error {
	return &lineError{name: r.name, line: r.line, msg: fmt.Sprintf(format, args...), err: sentinel}
}

// lineError is "name:line: message", wrapping a sentinel.
type lineError struct {
	name string
	line int
	msg  string
	err  error
}

func (e *lineError) Error() string { return fmt.Sprintf("%s:%d: %s", e.name, e.line, e.msg) }
func (e *lineError) Unwrap() error { return e.err }

// readLine returns the next line without its newline, valid until the next
// call. A line longer than MaxLine is consumed and reported.
func (r *Reader) readLine() ([]byte, error) {
	r.line++
	b, err := r.br.ReadSlice('\n')
	if err == nil {
		return b[:len(b)-1], r.checkLen(len(b) - 1)
	}
	if err == io.EOF {
		if len(b) == 0 {
			r.line--
			return nil, io.EOF
		}
		return b, r.checkLen(len(b))
	}
	if err != bufio.ErrBufferFull {
		return nil, r.errorf(ErrTrace, "read: %v", err)
	}
	r.long = append(r.long[:0], b...)
	tooLong := false
	for {
		b, err = r.br.ReadSlice('\n')
		if !tooLong {
			r.long = append(r.long, b...)
			tooLong = len(r.long) > r.opts.MaxLine+1
		}
		switch err {
		case nil, io.EOF:
			if tooLong {
				r.long = r.long[:0]
				return nil, r.errorf(ErrLineTooLong, "line longer than %d bytes", r.opts.MaxLine)
			}
			if err == nil {
				r.long = r.long[:len(r.long)-1]
			}
			return r.long, r.checkLen(len(r.long))
		case bufio.ErrBufferFull:
		default:
			return nil, r.errorf(ErrTrace, "read: %v", err)
		}
	}
}

func (r *Reader) checkLen(n int) error {
	if n > r.opts.MaxLine {
		return r.errorf(ErrLineTooLong, "line of %d bytes, longer than %d", n, r.opts.MaxLine)
	}
	return nil
}

// checkBackends returns an error when the header declares backends and e
// names another, as its backend or in its shadow runs.
func (r *Reader) checkBackends(e *Event) error {
	if len(r.declared) == 0 {
		return nil
	}
	if e.Backend != "" && !slices.Contains(r.declared, e.Backend) {
		return fmt.Errorf("backend %s is not among the header's backends (%s)", input.Quote(e.Backend), strings.Join(r.declared, ", "))
	}
	for k := range e.Shadow {
		if !slices.Contains(r.declared, k) {
			return fmt.Errorf("shadow_us backend %s is not among the header's backends (%s)", input.Quote(k), strings.Join(r.declared, ", "))
		}
	}
	return nil
}
