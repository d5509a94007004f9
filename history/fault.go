package history

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/adaptsched/adaptsched/internal/input"
)

// ErrUnwritable marks a store that could not be written: its disk full,
// its directory or files not writable, an I/O error. The error is a
// *FaultError naming the directory.
var ErrUnwritable = errors.New("history: store cannot be written")

// FaultError is the error of a store that stopped writing: Dir is its
// directory, What the cause in a few words, Err the system's error. From
// the fault on, the DB writes nothing (Badger's files stay as its last
// successful flush left them, which the next Open reads) while Puts and
// the attached Schedulers go on in memory; Close returns the FaultError.
type FaultError struct {
	Dir  string
	What string
	Err  error
}

func (e *FaultError) Error() string {
	return fmt.Sprintf("history: store %s cannot be written (%s: %v): scheduling continues without persistence; "+
		"what its last successful flush wrote is kept", e.Dir, e.What, e.Err)
}

func (e *FaultError) Unwrap() []error { return []error{ErrUnwritable, e.Err} }

// Reported says that the store logged the fault when it occurred, so
// that those who meet it again need not.
func (e *FaultError) Reported() bool { return true }

// PermissionError is Open's error for a store that this process may not
// read or write (a mode, an owner, a read-only file system): the store is
// not damaged, and WithMoveDamaged leaves it where it is. It wraps
// fs.ErrPermission.
type PermissionError struct {
	Dir  string
	Path string // the directory or the file refused
	Err  error
}

func (e *PermissionError) Error() string {
	return fmt.Sprintf("history: store %s cannot be opened: %s: %v; this is a matter of permissions, not damage: "+
		"nothing was changed; give this process read and write access to the directory and its files (or open it as their owner)",
		e.Dir, e.Path, e.Err)
}

func (e *PermissionError) Unwrap() []error { return []error{fs.ErrPermission, e.Err} }

// faultKind names a system error that means the store cannot be written,
// "" for any other.
func faultKind(err error) string {
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return "disk full"
	case errors.Is(err, syscall.EROFS):
		return "read-only file system"
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return "permission denied"
	case errors.Is(err, syscall.EIO):
		return "I/O error"
	}
	return ""
}

// faultKindOf names the fault in a message of Badger's, which has lost
// the system's error value.
func faultKindOf(msg string) string {
	for _, k := range []struct{ text, kind string }{
		{"no space left", "disk full"}, {"quota exceeded", "disk full"}, {"read-only file system", "read-only file system"},
		{"permission denied", "permission denied"}, {"operation not permitted", "permission denied"}, {"input/output error", "I/O error"},
	} {
		if strings.Contains(strings.ToLower(msg), k.text) {
			return k.kind
		}
	}
	return "Badger failed to write"
}

// faults holds a store's first write fault. Badger's logger reports into
// it too: Badger meets a failure of its own writes (a table it cannot
// create) by logging it and retrying every second for ever.
type faults struct {
	dir   string
	log   zerolog.Logger
	once  sync.Once
	first atomic.Pointer[FaultError]
	ch    chan struct{} // closed at the first fault
	armed atomic.Bool   // the store is open: Badger's errors are faults
}

func newFaults(dir string, log zerolog.Logger) *faults {
	return &faults{dir: dir, log: log, ch: make(chan struct{})}
}

// set records the fault (the first only), and says once that the process
// goes on without persistence.
func (f *faults) set(what string, err error) {
	f.once.Do(func() {
		fe := &FaultError{Dir: f.dir, What: what, Err: err}
		f.first.Store(fe)
		f.log.Error().Msg(fe.Error()) // before the close: Close returns at it, and its caller may exit
		close(f.ch)
	})
}

// get returns the fault, nil while there is none.
func (f *faults) get() *FaultError {
	if f == nil {
		return nil
	}
	return f.first.Load()
}

// spaceReserve is the free space a store needs before anything is
// written: what Badger may still write into its mapped files (the rest of
// the memtable's log, the table the memtable becomes) plus 1 MiB. Badger
// writes those through memory maps, and a page that the disk cannot
// back kills the process with SIGBUS: so the writes stop, with a
// FaultError, while the disk still has this much (TestDiskFull).
func spaceReserve(o Options) uint64 { return 2*uint64(o.MemTableSize) + 1<<20 }

// ErrNotStore marks a directory that holds files but no store, or the
// Badger store of another program (keys, and none of this package's):
// Open refuses to write into it.
var ErrNotStore = errors.New("history: not a store directory")

// checkIsStore returns an error wrapping ErrNotStore when dir holds
// files and none of them is Badger's or the store's own.
func checkIsStore(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) == 0 {
		return nil
	}
	var names []string
	for _, e := range ents {
		n := e.Name()
		if n == "MANIFEST" || n == "KEYREGISTRY" || n == "DISCARD" || n == "LOCK" || strings.HasPrefix(n, stateFile) ||
			strings.HasSuffix(n, ".sst") || strings.HasSuffix(n, ".vlog") || strings.HasSuffix(n, ".mem") {
			return nil
		}
		if len(names) < 3 {
			names = append(names, n)
		}
	}
	return fmt.Errorf("%w: %s holds %d entries (%s…) and no store files: give a new or empty directory for -db",
		ErrNotStore, dir, len(ents), strings.Join(names, ", "))
}

// foreignStoreError is Open's error for a Badger store that holds keys
// and none of this package's: another program's. It wraps ErrNotStore.
type foreignStoreError struct {
	Dir  string
	Keys int
	Key  string // one of its keys
}

func (e *foreignStoreError) Error() string {
	return fmt.Sprintf("%v: %s is a Badger store of another program (%d keys, none of adaptsched's, such as %s): "+
		"nothing was written to it; give a new or empty directory for -db", ErrNotStore, e.Dir, e.Keys, input.Quote(e.Key))
}

func (e *foreignStoreError) Unwrap() error { return ErrNotStore }
