package trace

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// RecorderOptions configure a Recorder; zero fields take the defaults.
type RecorderOptions struct {
	// Queue is how many events may wait for the writer (default 65,536):
	// beyond it Record drops and counts rather than block the caller.
	Queue int
}

// Recorder writes a trace: the header at once, then events in the
// background. Record never blocks: a full queue drops the event and counts
// it (Dropped). Record and Dropped are safe for concurrent use.
//
// Events are encoded by hand into one reused buffer (appendEvent) rather
// than by encoding/json, which reflects over the struct and allocates per
// event, too slow for the recorder's target of 1,000,000 events/s
// (BenchmarkRecorder; BENCHMARKS.md). The output is the JSON that
// encoding/json would accept for Event, which the tests check.
type Recorder struct {
	ch      chan Event
	stop    chan struct{}
	done    chan struct{}
	w       *bufio.Writer
	dropped atomic.Int64
	written atomic.Int64
	closed  atomic.Bool
	once    sync.Once
	err     error // the first write error, reported by Close
}

// NewRecorder writes header (Format and Version filled in when empty) to w
// and starts the writer. Close flushes and stops it; it does not close w.
func NewRecorder(w io.Writer, header Header, opts RecorderOptions) (*Recorder, error) {
	if opts.Queue < 0 {
		return nil, fmt.Errorf("%w: recorder queue %d", ErrInvalidOptions, opts.Queue)
	}
	if opts.Queue == 0 {
		opts.Queue = 1 << 16
	}
	if header.Format == "" {
		header.Format = TraceFormat
	}
	if header.Version == 0 {
		header.Version = TraceVersion
	}
	h, err := json.Marshal(header)
	if err != nil {
		return nil, fmt.Errorf("trace: header: %w", err)
	}
	r := &Recorder{ch: make(chan Event, opts.Queue), stop: make(chan struct{}), done: make(chan struct{}), w: bufio.NewWriterSize(w, 256<<10)}
	r.w.Write(h)
	if err := r.w.WriteByte('\n'); err != nil {
		return nil, fmt.Errorf("trace: header: %w", err)
	}
	go r.run()
	return r, nil
}

// Record queues e for writing, or drops and counts it when the queue is
// full or the recorder closed. The recorder keeps e's slices and map until
// it is written: the caller must not change them afterwards.
func (r *Recorder) Record(e Event) {
	if r.closed.Load() {
		r.dropped.Add(1)
		return
	}
	select {
	case r.ch <- e:
	default:
		r.dropped.Add(1)
	}
}

// Dropped returns the number of events dropped so far.
func (r *Recorder) Dropped() int64 { return r.dropped.Load() }

// Written returns the number of events encoded so far.
func (r *Recorder) Written() int64 { return r.written.Load() }

func (r *Recorder) run() {
	defer close(r.done)
	buf := make([]byte, 0, 64<<10)
	for {
		select {
		case e := <-r.ch:
			buf = r.drain(appendEvent(buf, &e), 1)
		case <-r.stop:
			r.drain(buf, 0)
			return
		}
		buf = buf[:0]
	}
}

// drain encodes what is queued after buf (holding n events) and writes it all in one call
// (in chunks of about 64 KiB).
func (r *Recorder) drain(buf []byte, n int64) []byte {
	for {
		select {
		case e := <-r.ch:
			buf = appendEvent(buf, &e)
			n++
			if len(buf) < 60<<10 {
				continue
			}
		default:
		}
		r.write(buf)
		r.written.Add(n)
		if len(r.ch) == 0 {
			return buf
		}
		buf, n = buf[:0], 0
	}
}

func (r *Recorder) write(b []byte) {
	if r.err != nil {
		return
	}
	if _, err := r.w.Write(b); err != nil {
		r.err = fmt.Errorf("trace: write: %w", err)
	}
}

// Close writes every queued event, flushes, and returns the first write
// error. Events recorded after Close are dropped and counted. Close is
// idempotent.
func (r *Recorder) Close() error {
	r.once.Do(func() {
		r.closed.Store(true)
		close(r.stop)
		<-r.done
		if r.err == nil {
			if err := r.w.Flush(); err != nil {
				r.err = fmt.Errorf("trace: write: %w", err)
			}
		}
	})
	return r.err
}

// appendEvent appends e as one JSON line.
func appendEvent(b []byte, e *Event) []byte {
	b = append(b, `{"seq":`...)
	b = strconv.AppendInt(b, e.Seq, 10)
	b = append(b, `,"op":`...)
	b = appendString(b, e.Op)
	b = append(b, `,"dtype":`...)
	b = appendString(b, e.DType)
	b = append(b, `,"shape":[`...)
	for i, sh := range e.Shape {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		for j, d := range sh {
			if j > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(d), 10)
		}
		b = append(b, ']')
	}
	b = append(b, ']')
	if p := &e.Params; *p != (Params{}) {
		b = append(b, `,"params":{`...)
		n := len(b)
		sep := func() {
			if len(b) > n {
				b = append(b, ',')
			}
		}
		if p.Causal {
			b = append(b, `"causal":true`...)
		}
		for _, f := range [...]struct {
			name string
			v    float32
		}{{`"scale":`, p.Scale}, {`"eps":`, p.Eps}, {`"rope_base":`, p.RopeBase}} {
			if f.v != 0 {
				sep()
				b = append(b, f.name...)
				b = appendFloat(b, float64(f.v), 32)
			}
		}
		if p.Pos != 0 {
			sep()
			b = append(b, `"pos":`...)
			b = strconv.AppendInt(b, int64(p.Pos), 10)
		}
		if p.Name != "" {
			sep()
			b = append(b, `"name":`...)
			b = appendString(b, p.Name)
		}
		if p.FLOPs != 0 {
			sep()
			b = append(b, `"flops":`...)
			b = strconv.AppendInt(b, p.FLOPs, 10)
		}
		if p.Bytes != 0 {
			sep()
			b = append(b, `"bytes":`...)
			b = strconv.AppendInt(b, p.Bytes, 10)
		}
		b = append(b, '}')
	}
	for _, f := range [...]struct{ name, v string }{{`,"bucket":`, e.Bucket}, {`,"backend":`, e.Backend}, {`,"reason":`, e.Reason}} {
		if f.v != "" {
			b = append(b, f.name...)
			b = appendString(b, f.v)
		}
	}
	b = append(b, `,"actual_duration_us":`...)
	b = appendFloat(b, e.ActualUs, 64)
	if e.TransferUs != 0 {
		b = append(b, `,"transfer_us":`...)
		b = appendFloat(b, e.TransferUs, 64)
	}
	if len(e.Shadow) > 0 {
		b = append(b, `,"shadow_us":{`...)
		keys := make([]string, 0, len(e.Shadow))
		for k := range e.Shadow {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			b = appendFloat(b, e.Shadow[k], 64)
		}
		b = append(b, '}')
	}
	return append(b, "}\n"...)
}

// appendFloat writes f as a JSON number; NaN and ±Inf, which JSON cannot
// hold, are written as null and read back as NaN.
func appendFloat(b []byte, f float64, bits int) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, bits)
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string. Invalid UTF-8 becomes U+FFFD,
// as encoding/json does.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
