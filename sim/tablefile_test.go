package sim

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/adaptsched/adaptsched/internal/input"
)

// zeros is an endless stream of zero bytes, as /dev/zero on stdin.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// comments is an endless stream of comment lines.
type comments struct{}

func (comments) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = "#\n"[i%2]
	}
	return len(p) &^ 1, nil
}

// TestTableBounded: an endless input is an error within a second and
// 100 MB of allocations, as a CSV and as a StarPU model; a long field is
// quoted to MaxQuote characters.
func TestTableBounded(t *testing.T) {
	for _, c := range []struct {
		name string
		load func(io.Reader) error
	}{
		{"ReadTable", func(r io.Reader) error { _, err := ReadTable(r, "stdin"); return err }},
		{"LoadTable", func(r io.Reader) error { _, err := LoadTable(r, "stdin"); return err }},
		{"LoadStarPU", func(r io.Reader) error {
			_, err := LoadStarPU(comments{}, "stdin")
			return err
		}},
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		err := c.load(zeros{})
		took := time.Since(start)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrBadTable) {
			t.Errorf("%s: %v", c.name, err)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 100<<20 || took > time.Second && !raceEnabled {
			t.Errorf("%s: %d MB allocated, %v", c.name, alloc>>20, took)
		}
		if len(err.Error()) > 300 {
			t.Errorf("%s: error of %d bytes", c.name, len(err.Error()))
		}
	}
	long := strings.Repeat("x", 1<<20)
	_, err := LoadTable(strings.NewReader("op,shape,backend,mean_us,std_us,n\nMatMul,4x4;4x4,gpu,"+long+",,\n"), "t.csv")
	if err == nil || len(err.Error()) > 300 || !strings.Contains(err.Error(), `"`+strings.Repeat("x", input.MaxQuote)+`"… (1048576 bytes)`) {
		t.Errorf("long field: %.400v", err)
	}
}

// TestLoadTableFileRefuses: a FIFO (alone or in a StarPU directory), a
// device and a file over MaxTableBytes are refused at once, with the way
// out.
func TestLoadTableFileRefuses(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "m.host")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	big := filepath.Join(t.TempDir(), "big.csv")
	if err := os.WriteFile(big, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, 1<<30); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{fifo, "a pipe, not a regular file: pass it on stdin instead (- < " + fifo},
		{dir, "a pipe, not a regular file"},
		{"/dev/zero", "a character device, not a regular file"},
		{big, "1073741824 bytes, larger than 16 MiB"},
	} {
		done := make(chan error, 1)
		go func() { _, err := LoadTableFile(c.path); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrBadTable) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v, want %q", c.path, err, c.want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: still reading after 5 s", c.path)
		}
	}
}

// TestReadTableLongHeader: a StarPU model whose header comment is longer
// than any fixed peek still reads as a model, not as a CSV.
func TestReadTableLongHeader(t *testing.T) {
	m := "# " + strings.Repeat("c", 8<<10) + "\n" + miniModel(t, nil)
	p := filepath.Join(t.TempDir(), "mini.host")
	if err := os.WriteFile(p, []byte(m), 0o600); err != nil {
		t.Fatal(err)
	}
	tab, err := LoadTableFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(tab.Backends(), ","); got != "cpu0_impl0,cuda0_impl0" {
		t.Errorf("arms %s", got)
	}
}
