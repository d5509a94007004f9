package history

import (
	"fmt"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// parser decodes one event line. It is a purpose-built JSON reader for
// Event: encoding/json per line reached about 250,000 events/s, half of
// the 500,000 that issue 4 asks of the reader, because it reflects over
// the struct and allocates every string. This one accepts exactly the JSON
// grammar (unknown members are validated and skipped), interns the
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

// rawString returns a string's decoded bytes, valid until the next call.
func (p *parser) rawString() ([]byte, error) {
	if err := p.expect('"'); err != nil {
		return nil, err
	}
	b := p.b
	start := p.i
	ascii := true
	for i := start; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '"':
			s := b[start:i]
			p.i = i + 1
			if !ascii && !utf8.Valid(s) {
				p.scr = appendValidUTF8(p.scr[:0], s)
				return p.scr, nil
			}
			return s, nil
		case c == '\\':
			p.i = i
			return p.slowString(start)
		case c < 0x20:
			p.i = i
			return nil, p.fail("control character in string")
		case c >= 0x80:
			ascii = false
		}
	}
	p.i = len(b)
	return nil, p.fail("unterminated string")
}

func (p *parser) slowString(start int) ([]byte, error) {
	out := append(p.scr[:0], p.b[start:p.i]...)
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			p.scr = appendValidUTF8(out[:0:0], out)
			return p.scr, nil
		case c < 0x20:
			return nil, p.fail("control character in string")
		case c != '\\':
			out = append(out, c)
			p.i++
			continue
		}
		if p.i+1 >= len(p.b) {
			return nil, p.fail("unterminated escape")
		}
		p.i++
		switch e := p.b[p.i]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := p.hex4(p.i + 1)
			if !ok {
				return nil, p.fail("bad \\u escape")
			}
			p.i += 4
			if utf16.IsSurrogate(r) {
				r2, ok2 := rune(0), false
				if p.i+6 < len(p.b) && p.b[p.i+1] == '\\' && p.b[p.i+2] == 'u' {
					r2, ok2 = p.hex4(p.i + 3)
				}
				if dec := utf16.DecodeRune(r, r2); ok2 && dec != utf8.RuneError {
					r = dec
					p.i += 6
				} else {
					r = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			return nil, p.fail("bad escape \\%c", e)
		}
		p.i++
	}
	return nil, p.fail("unterminated string")
}

func (p *parser) hex4(at int) (rune, bool) {
	if at+4 > len(p.b) {
		return 0, false
	}
	var r rune
	for _, c := range p.b[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// appendValidUTF8 appends s with each invalid byte replaced by U+FFFD, as
// encoding/json decodes.
func appendValidUTF8(dst, s []byte) []byte {
	for len(s) > 0 {
		r, n := utf8.DecodeRune(s)
		if r == utf8.RuneError && n == 1 {
			dst = append(dst, "\uFFFD"...)
		} else {
			dst = append(dst, s[:n]...)
		}
		s = s[n:]
	}
	return dst
}

func (p *parser) str() (string, error) {
	if p.null() {
		return "", nil
	}
	b, err := p.rawString()
	return string(b), err
}

// istr is str for repetitive values: it returns the same string for the
// same bytes without allocating.
func (p *parser) istr() (string, error) {
	if p.null() {
		return "", nil
	}
	b, err := p.rawString()
	if err != nil {
		return "", err
	}
	return p.intern1(b), nil
}

// intern1 returns b as a string, the same string for the same bytes.
func (p *parser) intern1(b []byte) string {
	// A small direct-mapped cache in front of the map: most lookups hit
	// it, and comparing one string is cheaper than hashing it.
	h := len(b)
	if len(b) > 0 {
		h = h*31 + int(b[0])
		h = h*31 + int(b[len(b)-1])
		h = h*31 + int(b[len(b)/2])
	}
	slot := &p.recent[h&(len(p.recent)-1)]
	if *slot == string(b) && len(b) > 0 {
		return *slot
	}
	if s, ok := p.intern[string(b)]; ok {
		*slot = s
		return s
	}
	s := string(b)
	*slot = s
	if p.intern == nil {
		p.intern = make(map[string]string)
	}
	if len(p.intern) < 4096 {
		p.intern[s] = s
	}
	return s
}

// number returns the bytes of a JSON number, checked against the grammar;
// integer reports whether it has no fraction or exponent.
func (p *parser) number() (num []byte, integer bool, err error) {
	p.ws()
	start := p.i
	if p.i < len(p.b) && p.b[p.i] == '-' {
		p.i++
	}
	digits := func() int {
		s := p.i
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
		}
		return p.i - s
	}
	if p.i < len(p.b) && p.b[p.i] == '0' {
		p.i++
	} else if digits() == 0 {
		return nil, false, p.fail("want a number")
	}
	integer = true
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		integer = false
		if digits() == 0 {
			return nil, false, p.fail("bad number")
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		integer = false
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return nil, false, p.fail("bad number")
		}
	}
	return p.b[start:p.i], integer, nil
}

func (p *parser) int(bits int) (int64, error) {
	if v, ok := p.fastInt(); ok {
		return v, nil
	}
	if p.null() {
		return 0, nil
	}
	num, integer, err := p.number()
	if err != nil {
		return 0, err
	}
	if !integer {
		return 0, p.fail("number %s is not an integer", num)
	}
	v, err := strconv.ParseInt(string(num), 10, bits)
	if err != nil {
		return 0, p.fail("number %s out of range", num)
	}
	return v, nil
}

// fastInt reads an integer of at most 18 digits (in range for every
// size that int reads) with no fraction or exponent; otherwise it
// consumes nothing and the general path decides.
func (p *parser) fastInt() (int64, bool) {
	p.ws()
	b, i := p.b, p.i
	neg := i < len(b) && b[i] == '-'
	if neg {
		i++
	}
	start := i
	var v int64
	for i < len(b) && i-start < 19 {
		c := b[i]
		if c < '0' || c > '9' {
			break
		}
		v = v*10 + int64(c-'0')
		i++
	}
	n := i - start
	if n == 0 || n > 18 || (n > 1 && b[start] == '0') {
		return 0, false
	}
	if i < len(b) {
		if c := b[i]; c == '.' || c == 'e' || c == 'E' {
			return 0, false
		}
	}
	p.i = i
	if neg {
		v = -v
	}
	return v, true
}

// pow10 are the powers of ten that a float64 holds exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// fastFloat64 reads a number of at most 15 significant digits with no
// exponent, as strconv's exact path does: the digits and the power of ten
// are exact in a float64, so one division rounds correctly. Otherwise it
// consumes nothing and the general path decides.
func (p *parser) fastFloat64() (float64, bool) {
	p.ws()
	b, i := p.b, p.i
	neg := i < len(b) && b[i] == '-'
	if neg {
		i++
	}
	start := i
	var m uint64
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		m = m*10 + uint64(b[i]-'0')
		i++
	}
	intDigits := i - start
	if intDigits == 0 || (intDigits > 1 && b[start] == '0') {
		return 0, false
	}
	frac := 0
	if i < len(b) && b[i] == '.' {
		i++
		fs := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			m = m*10 + uint64(b[i]-'0')
			i++
		}
		frac = i - fs
		if frac == 0 {
			return 0, false
		}
	}
	if intDigits+frac > 15 {
		return 0, false
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		return 0, false
	}
	p.i = i
	v := float64(m) / pow10[frac]
	if neg {
		v = -v
	}
	return v, true
}

// float reads a number; null (how the recorder writes NaN and ±Inf)
// reads as NaN.
func (p *parser) float(bits int) (float64, error) {
	if bits == 64 {
		if v, ok := p.fastFloat64(); ok {
			return v, nil
		}
	}
	if p.null() {
		return math.NaN(), nil
	}
	num, _, err := p.number()
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseFloat(string(num), bits)
	if err != nil {
		return 0, p.fail("number %s out of range", num)
	}
	return v, nil
}

func (p *parser) bool() (bool, error) {
	switch {
	case p.null():
		return false, nil
	case p.literal("true"):
		return true, nil
	case p.literal("false"):
		return false, nil
	}
	return false, p.fail("want true or false")
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
