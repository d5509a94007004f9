//go:build unix

package history

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// lockDir takes dir's Badger lock (the flock on the directory that Badger
// takes) for Open's checks of the files, so that they read only a store
// nobody writes; free is false when another process (or DB) holds it.
// unlock releases it, just before Badger takes it again.
func lockDir(dir string) (unlock func(), free bool, err error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, false, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, err
	}
	return func() { f.Close() }, true, nil
}
