package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/mattn/go-isatty"
)

// progress draws a progress bar on stderr while a large input is read:
// only when stderr is a terminal and the input is at least min bytes;
// otherwise every method does nothing.
type progress struct {
	w     io.Writer
	tty   bool
	min   int64
	label string
	total int64
	read  int64
	last  time.Time
	drawn bool
}

func newProgress(stderr io.Writer, min int64) *progress {
	p := &progress{w: stderr, min: min}
	if f, ok := stderr.(*os.File); ok {
		p.tty = isatty.IsTerminal(f.Fd())
	}
	return p
}

// phase names the pass that the following reads belong to.
func (p *progress) phase(label string) {
	if p != nil {
		p.label = label
	}
}

// reader counts what is read from r, a file of size bytes.
func (p *progress) reader(r io.Reader, size int64) io.Reader {
	if p == nil || !p.tty || size < p.min {
		return r
	}
	p.total, p.read = size, 0
	return &countingReader{r: r, p: p}
}

type countingReader struct {
	r io.Reader
	p *progress
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.p.advance(int64(n))
	return n, err
}

func (p *progress) advance(n int64) {
	p.read += n
	if now := time.Now(); now.Sub(p.last) >= 100*time.Millisecond || p.read >= p.total {
		p.last = now
		const width = 30
		frac := float64(p.read) / float64(max(p.total, 1))
		done := int(frac * width)
		bar := make([]byte, width)
		for i := range bar {
			bar[i] = ' '
			if i < done {
				bar[i] = '='
			}
		}
		fmt.Fprintf(p.w, "\rreplay %s [%s] %3.0f%% %d/%d MB", p.label, bar, frac*100, p.read>>20, p.total>>20)
		p.drawn = true
	}
}

// done clears the bar.
func (p *progress) done() {
	if p != nil && p.drawn {
		fmt.Fprintf(p.w, "\r%*s\r", 80, "")
		p.drawn = false
	}
}
