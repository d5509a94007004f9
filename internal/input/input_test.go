package input

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"io/fs"
	"strings"
	"testing"
)

func TestQuote(t *testing.T) {
	if got := Quote("a\"b"); got != `"a\"b"` {
		t.Errorf("short: %s", got)
	}
	long := strings.Repeat("é", 1000)
	got := Quote(long)
	if want := `"` + strings.Repeat("é", MaxQuote) + `"… (2000 bytes)`; got != want {
		t.Errorf("long: %s", got)
	}
	if got := Quote(strings.Repeat("x", MaxQuote)); len(got) != MaxQuote+2 {
		t.Errorf("exactly MaxQuote: %s", got)
	}
}

func TestRegular(t *testing.T) {
	if err := Regular("f", 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mode fs.FileMode
		kind string
	}{{fs.ModeNamedPipe, "a pipe"}, {fs.ModeDevice | fs.ModeCharDevice, "a character device"}, {fs.ModeDir, "a directory"}} {
		err := Regular("/p", c.mode)
		if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), c.kind) || !strings.Contains(err.Error(), "- < /p") {
			t.Errorf("%v: %v", c.mode, err)
		}
	}
}

// TestBOM: a leading byte-order mark is skipped, and nothing else.
func TestBOM(t *testing.T) {
	if got := string(TrimBOM([]byte(BOM + "a" + BOM))); got != "a"+BOM {
		t.Errorf("TrimBOM: %q", got)
	}
	br := bufio.NewReader(strings.NewReader(BOM + "{}"))
	SkipBOM(br)
	if rest, _ := io.ReadAll(br); string(rest) != "{}" {
		t.Errorf("SkipBOM left %q", rest)
	}
	br = bufio.NewReader(strings.NewReader("\xef\xbb{}"))
	SkipBOM(br)
	if rest, _ := io.ReadAll(br); string(rest) != "\xef\xbb{}" {
		t.Errorf("SkipBOM of a partial mark left %q", rest)
	}
}

// TestGunzip: plain and gzipped text, each with and without a BOM, reads
// as the text without it, and its first PeekSize bytes can be peeked; a
// gzip header cut short or bad is gzip's error.
func TestGunzip(t *testing.T) {
	text := strings.Repeat("line\n", PeekSize/5+1)
	for _, bom := range []string{"", BOM} {
		var gz bytes.Buffer
		z := gzip.NewWriter(&gz)
		z.Write([]byte(bom + text))
		z.Close()
		for name, data := range map[string][]byte{"plain": []byte(bom + text), "gzip": gz.Bytes()} {
			rb, err := Gunzip(bytes.NewReader(data))
			if err != nil {
				t.Fatalf("%s, BOM %q: %v", name, bom, err)
			}
			if head, err := rb.Peek(PeekSize); err != nil || string(head) != text[:PeekSize] {
				t.Errorf("%s, BOM %q: peeked %d bytes (%v), want the text's first %d", name, bom, len(head), err, PeekSize)
			}
			if all, _ := io.ReadAll(rb); string(all) != text {
				t.Errorf("%s, BOM %q: read %d bytes, want the text's %d", name, bom, len(all), len(text))
			}
		}
	}
	for _, bad := range []string{"\x1f\x8b", "\x1f\x8bxxxxxxxxxxxx"} {
		if _, err := Gunzip(strings.NewReader(bad)); !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, gzip.ErrHeader) {
			t.Errorf("%q: %v, want gzip's error", bad, err)
		}
	}
}
