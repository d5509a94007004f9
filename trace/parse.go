package trace

import (
	"fmt"
	"strconv"
)

// parser decodes one event line. It is a purpose-built JSON reader for
// Event: encoding/json per line falls short of the reader's target of
// 500,000 events/s (BenchmarkReader; BENCHMARKS.md), because it reflects
// over the struct and allocates every string. This one accepts exactly
// the JSON grammar (unknown members are validated and skipped), interns the
// repetitive strings (op, dtype, bucket, backend, reason) and allocates
// one backing array for all of an event's dimensions. Its results are
// checked against encoding/json by FuzzReader.
type parser struct {
	b      []byte
	i      int
	scr    []byte
	dims   []int
	ends   []int
	intern map[string]string
	recent [64]string // intern1's cache
	// reuse mode (Reader.NextInto): an event's shapes and shadow map
	// live in these buffers, valid until the next event.
	reuse     bool
	shapes    [][]int
	shadowMap map[string]float64
}

func (p *parser) fail(format string, args ...any) error {
	return fmt.Errorf("column %d: "+format, append([]any{p.i + 1}, args...)...)
}

func (p *parser) ws() {
	if p.i < len(p.b) && p.b[p.i] > ' ' {
		return // the common case: no space
	}
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\r', '\n':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) expect(c byte) error {
	p.ws()
	if p.i >= len(p.b) {
		return p.fail("unexpected end of line, want %q", c)
	}
	if p.b[p.i] != c {
		return p.fail("unexpected %q, want %q", p.b[p.i], c)
	}
	p.i++
	return nil
}

// peek returns the next non-space byte, or 0 at the end.
func (p *parser) peek() byte {
	p.ws()
	if p.i >= len(p.b) {
		return 0
	}
	return p.b[p.i]
}

func (p *parser) literal(s string) bool {
	if len(p.b)-p.i >= len(s) && string(p.b[p.i:p.i+len(s)]) == s {
		p.i += len(s)
		return true
	}
	return false
}

// null consumes a null literal if one comes next.
func (p *parser) null() bool { return p.peek() == 'n' && p.literal("null") }

// object calls member for each key of an object; member must consume the
// value.
func (p *parser) object(member func(key []byte) error) error {
	if err := p.expect('{'); err != nil {
		return err
	}
	if p.peek() == '}' {
		p.i++
		return nil
	}
	for {
		key, err := p.rawString()
		if err != nil {
			return err
		}
		if err := p.expect(':'); err != nil {
			return err
		}
		if err := member(key); err != nil {
			return err
		}
		switch p.peek() {
		case ',':
			p.i++
		case '}':
			p.i++
			return nil
		case 0:
			return p.fail("unexpected end of line in object")
		default:
			return p.fail("unexpected %q in object", p.b[p.i])
		}
	}
}

// array calls elem for each element of an array (null: none).
func (p *parser) array(elem func() error) error {
	if p.null() {
		return nil
	}
	if err := p.expect('['); err != nil {
		return err
	}
	if p.peek() == ']' {
		p.i++
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		switch p.peek() {
		case ',':
			p.i++
		case ']':
			p.i++
			return nil
		case 0:
			return p.fail("unexpected end of line in array")
		default:
			return p.fail("unexpected %q in array", p.b[p.i])
		}
	}
}

// skip consumes any JSON value.
func (p *parser) skip() error {
	switch c := p.peek(); {
	case c == '{':
		return p.object(func([]byte) error { return p.skip() })
	case c == '[':
		return p.array(p.skip)
	case c == '"':
		_, err := p.rawString()
		return err
	case c == 't' || c == 'f':
		_, err := p.bool()
		return err
	case c == 'n':
		if p.null() {
			return nil
		}
	case c == '-' || (c >= '0' && c <= '9'):
		_, _, err := p.number()
		return err
	}
	return p.fail("want a value")
}

// shape reads an event's shapes. In reuse mode the result lives in the
// parser's buffers, valid until the next event; otherwise it has one
// backing array of its own.
func (p *parser) shape() ([][]int, error) {
	if p.null() {
		return nil, nil
	}
	p.dims = p.dims[:0]
	p.ends = p.ends[:0]
	if err := p.expect('['); err != nil {
		return nil, err
	}
	if p.peek() == ']' {
		p.i++
	} else {
		for {
			if err := p.dimList(); err != nil {
				return nil, err
			}
			p.ends = append(p.ends, len(p.dims))
			if done, err := p.arrayNext(); err != nil {
				return nil, err
			} else if done {
				break
			}
		}
	}
	var all []int
	var out [][]int
	if p.reuse {
		if len(p.dims) > 0 {
			all = p.dims
		}
		out = p.shapes[:0]
		if out == nil {
			out = [][]int{}
		}
	} else {
		all = append([]int(nil), p.dims...)
		out = make([][]int, 0, len(p.ends))
	}
	start := 0
	for _, end := range p.ends {
		out = append(out, all[start:end:end])
		start = end
	}
	if p.reuse {
		p.shapes = out
	}
	return out, nil
}

// dimList appends one shape's dimensions (an array of integers, or null)
// to p.dims. It is array specialised to integers, without a closure per
// element: shapes are the bulk of every event (BenchmarkReader).
func (p *parser) dimList() error {
	if p.null() {
		return nil
	}
	if err := p.expect('['); err != nil {
		return err
	}
	if p.peek() == ']' {
		p.i++
		return nil
	}
	for {
		v, err := p.int(strconv.IntSize)
		p.dims = append(p.dims, int(v))
		if err != nil {
			return err
		}
		if done, err := p.arrayNext(); err != nil || done {
			return err
		}
	}
}

// arrayNext consumes what follows an array's element: done after the
// closing bracket.
func (p *parser) arrayNext() (done bool, err error) {
	switch p.peek() {
	case ',':
		p.i++
		return false, nil
	case ']':
		p.i++
		return true, nil
	case 0:
		return false, p.fail("unexpected end of line in array")
	default:
		return false, p.fail("unexpected %q in array", p.b[p.i])
	}
}

func (p *parser) params(ps *Params) error {
	if p.null() {
		return nil
	}
	return p.object(func(key []byte) error {
		var err error
		var f float64
		var n int64
		switch string(key) {
		case "causal":
			ps.Causal, err = p.bool()
		case "scale":
			f, err = p.float(32)
			ps.Scale = float32(f)
		case "eps":
			f, err = p.float(32)
			ps.Eps = float32(f)
		case "rope_base":
			f, err = p.float(32)
			ps.RopeBase = float32(f)
		case "pos":
			n, err = p.int(strconv.IntSize)
			ps.Pos = int(n)
		case "name":
			ps.Name, err = p.istr()
		case "flops":
			ps.FLOPs, err = p.int(64)
		case "bytes":
			ps.Bytes, err = p.int(64)
		default:
			err = p.skip()
		}
		return err
	})
}

func (p *parser) shadow(into map[string]float64) (map[string]float64, error) {
	if p.null() {
		return nil, nil
	}
	m := into // duplicate members merge, as encoding/json does
	if m == nil {
		if p.reuse {
			if p.shadowMap == nil {
				p.shadowMap = map[string]float64{}
			}
			m = p.shadowMap
			clear(m)
		} else {
			m = map[string]float64{}
		}
	}
	err := p.object(func(key []byte) error {
		k := p.intern1(key)
		v, err := p.float(64)
		m[k] = v
		return err
	})
	return m, err
}

// event decodes line into e.
func (p *parser) event(line []byte, e *Event) error {
	p.b, p.i = line, 0
	if p.peek() != '{' {
		return p.fail("want an event object")
	}
	err := p.object(func(key []byte) error {
		var err error
		switch string(key) {
		case "seq":
			e.Seq, err = p.int(64)
		case "op":
			e.Op, err = p.istr()
		case "dtype":
			e.DType, err = p.istr()
		case "shape":
			e.Shape, err = p.shape()
		case "params":
			err = p.params(&e.Params)
		case "bucket":
			e.Bucket, err = p.istr()
		case "backend":
			e.Backend, err = p.istr()
		case "reason":
			e.Reason, err = p.istr()
		case "actual_duration_us":
			e.ActualUs, err = p.float(64)
		case "transfer_us":
			e.TransferUs, err = p.float(64)
		case "shadow_us":
			e.Shadow, err = p.shadow(e.Shadow)
		default:
			err = p.skip()
		}
		return err
	})
	if err != nil {
		return err
	}
	if p.ws(); p.i < len(p.b) {
		return p.fail("unexpected %q after the event", p.b[p.i])
	}
	if e.Op == "" {
		return p.fail("event without an op")
	}
	return nil
}
