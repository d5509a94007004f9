package trace

// The parser's strings: JSON string decoding, escapes, and interning.

import (
	"unicode/utf16"
	"unicode/utf8"
)

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

// istr reads a string value (null: ""), interned: it returns the same
// string for the same bytes without allocating.
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
