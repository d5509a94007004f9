package input

import (
	"bufio"
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
