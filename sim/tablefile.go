package sim

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/adaptsched/adaptsched/internal/input"
)

// MaxTableBytes bounds a perf table or a StarPU model file, so that a
// huge or endless input (a sparse file, /dev/zero on stdin) is an error
// at once rather than gigabytes of memory: the real tables are below
// 100 KB (TestTableBounded).
const MaxTableBytes = 16 << 20

// errTooBig is what boundedReader returns past MaxTableBytes.
var errTooBig = fmt.Errorf("larger than %d MiB, the most a table may hold", MaxTableBytes>>20)

// boundedReader reads r and fails with errTooBig past MaxTableBytes.
type boundedReader struct {
	r    io.Reader
	left int64
}

func newBoundedReader(r io.Reader) *boundedReader {
	return &boundedReader{r: r, left: MaxTableBytes + 1}
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errTooBig
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	if b.left <= 0 {
		return n, errTooBig
	}
	return n, err
}

// readTableBytes reads all of r, at most MaxTableBytes.
func readTableBytes(r io.Reader, name string) ([]byte, error) {
	data, err := io.ReadAll(newBoundedReader(r))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadTable, name, err)
	}
	return data, nil
}

// ReadTable reads a perf table (LoadTable) or a StarPU model file
// (LoadStarPU) from r, told apart by the file's header (IsStarPU, on the
// whole of it: a header comment of any length). name is used in errors.
func ReadTable(r io.Reader, name string) (*Table, error) {
	data, err := readTableBytes(r, name)
	if err != nil {
		return nil, err
	}
	if IsStarPU(data) {
		return LoadStarPU(bytes.NewReader(data), name)
	}
	return LoadTable(bytes.NewReader(data), name)
}

// LoadTableFile reads the table at path: a directory of StarPU models
// (LoadStarPUDir), or a file (ReadTable). A FIFO or a device is refused
// before it is opened (opening a FIFO blocks), with the way out: stdin.
func LoadTableFile(path string) (*Table, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadTable, err)
	}
	if st.IsDir() {
		return LoadStarPUDir(path)
	}
	f, err := openTableFile(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadTable(f, path)
}

// openTableFile opens a table file, refusing what checkTableFile refuses
// before opening it (opening a FIFO blocks).
func openTableFile(path string) (*os.File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadTable, err)
	}
	if err := checkTableFile(path, st); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadTable, err)
	}
	return f, nil
}

// checkTableFile refuses what is not a regular file of at most
// MaxTableBytes.
func checkTableFile(path string, st os.FileInfo) error {
	if err := input.Regular(path, st.Mode()); err != nil {
		return fmt.Errorf("%w: %w", ErrBadTable, err)
	}
	if st.Size() > MaxTableBytes {
		return fmt.Errorf("%w: %s: %d bytes, %w", ErrBadTable, path, st.Size(), errTooBig)
	}
	return nil
}
