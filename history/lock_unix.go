//go:build unix

package history

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// lockFree reports whether no other process (or DB) holds dir's Badger
// lock (the flock on the directory that Badger takes), so that Open reads
// the files only of a store nobody writes. It takes the lock and releases
// it at once: Badger takes it again when it opens.
func lockFree(dir string) (bool, error) {
	f, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return false, nil
		}
		return false, err
	}
	return true, unix.Flock(int(f.Fd()), unix.LOCK_UN)
}
