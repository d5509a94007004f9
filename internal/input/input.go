// Package input holds what every reader of a user's file shares: it reads
// regular files only, it reads a file gzipped or not and past a
// byte-order mark alike, and it quotes a bad field in an error at a
// bounded length.
//
// # Usage
//
//	st, err := os.Stat(path)
//	if err != nil { ... }
//	if err := input.Regular(path, st.Mode()); err != nil {
//		return err // "p is a pipe, not a regular file: pass it on stdin instead (- < p)"
//	}
//	text, err := input.Gunzip(f)
//	if err != nil {
//		return fmt.Errorf("%s: gzip: %w", name, err)
//	}
//	return fmt.Errorf("%s:%d: unknown op %s", name, line, input.Quote(op))
package input

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"unicode/utf8"
)

// MaxQuote is how many characters of a field an error quotes: a field of
// a 100 MB line would otherwise make a 100 MB error line.
const MaxQuote = 80

// ErrNotRegular is wrapped by Regular's error.
var ErrNotRegular = errors.New("not a regular file")

// Quote returns s quoted as strconv.Quote does, cut to its first MaxQuote
// characters with "…" and its full length in bytes after the quotes when
// longer.
func Quote(s string) string {
	if utf8.RuneCountInString(s) <= MaxQuote {
		return strconv.Quote(s)
	}
	cut, n := 0, 0
	for i := range s {
		if n == MaxQuote {
			cut = i
			break
		}
		n++
	}
	return strconv.Quote(s[:cut]) + fmt.Sprintf("… (%d bytes)", len(s))
}

// Regular returns nil for a regular file's mode, and otherwise an error
// wrapping ErrNotRegular that names path, what it is, and the way out: a
// FIFO blocks until a writer comes and a device (/dev/zero) never ends,
// while stdin ("-") is read once and kept by the readers that take it.
func Regular(path string, mode fs.FileMode) error {
	if mode.IsRegular() {
		return nil
	}
	return fmt.Errorf("%s is %s, %w: pass it on stdin instead (- < %s)", path, KindOf(mode), ErrNotRegular, path)
}

// KindOf names a file mode's type for a person ("a pipe", "a directory").
func KindOf(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a pipe"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	}
	return "not a plain file"
}

// BOM is the UTF-8 byte-order mark some editors write before text, which
// encoding/json and the line parsers refuse: every reader of a user's file
// skips one at its start (TrimBOM, SkipBOM), and counts lines and columns
// from after it.
const BOM = "\ufeff"

// TrimBOM returns b without a leading BOM.
func TrimBOM(b []byte) []byte { return bytes.TrimPrefix(b, []byte(BOM)) }

// SkipBOM discards a BOM at the start of br.
func SkipBOM(br *bufio.Reader) {
	if b, _ := br.Peek(len(BOM)); string(b) == BOM {
		br.Discard(len(BOM))
	}
}

// PeekSize is how many bytes of a file's text Gunzip's reader lets its
// caller peek: enough for a trace's first line, which tells its format.
const PeekSize = 64 << 10

// Gunzip returns the text of r: decompressed when r starts with gzip's
// magic bytes, past a BOM (SkipBOM), buffered so that its first PeekSize
// bytes can be peeked. It reads r forward only, so r may be a pipe. A
// gzip header it cannot read is gzip's error, for the caller to name the
// file in (TestGunzip).
func Gunzip(r io.Reader) (*bufio.Reader, error) {
	br := bufio.NewReaderSize(r, PeekSize)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, err
		}
		br = bufio.NewReaderSize(gz, PeekSize)
	}
	SkipBOM(br)
	return br, nil
}
