package trace

// The parser's numbers and literals: the JSON number grammar, fast
// integer and float paths, booleans.

import (
	"math"
	"strconv"
)

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
