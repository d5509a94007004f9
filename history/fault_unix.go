//go:build unix

package history

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// checkSpace returns a "disk full" error when dir's file system has less
// than need bytes free for this process.
func checkSpace(dir string, need uint64) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return nil // no figure: Badger's own errors report what fails
	}
	if free := st.Bavail * uint64(st.Bsize); free < need {
		return fmt.Errorf("%w: %d KiB free, the store needs %d KiB free to write safely", syscall.ENOSPC, free>>10, need>>10)
	}
	return nil
}

// checkAccess returns a *PermissionError when this process may not read
// and write dir or a file in it: found before Badger opens them, where a
// refusal would read as damage.
func checkAccess(dir string) error {
	if err := unix.Access(dir, unix.R_OK|unix.W_OK|unix.X_OK); err != nil {
		return &PermissionError{Dir: dir, Path: dir + " " + modeOf(dir), Err: err}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return &PermissionError{Dir: dir, Path: dir, Err: err}
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if err := unix.Access(p, unix.R_OK|unix.W_OK); err != nil {
			return &PermissionError{Dir: dir, Path: p + " " + modeOf(p), Err: err}
		}
	}
	return nil
}

// modeOf describes a file's mode and owner for a permission error.
func modeOf(path string) string {
	st, err := os.Stat(path)
	if err != nil {
		return ""
	}
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return fmt.Sprintf("(mode %v, owner uid %d; this process runs as uid %d)", st.Mode().Perm(), s.Uid, os.Geteuid())
	}
	return fmt.Sprintf("(mode %v)", st.Mode().Perm())
}
