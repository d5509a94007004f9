package history

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/ristretto/v2/z"
	"github.com/rs/zerolog"
)

// stateFile is the store's own record of what it held, written beside
// Badger's files (write to a temporary file, then rename) at Open and
// Close, after a flush that added keys, and otherwise at most once a
// second (stateEvery): the number of keys and Badger's highest
// version. Keys are never deleted and versions only grow, so a store that
// opens with fewer keys or an older version than its state file says has
// lost data: a MANIFEST truncated or deleted (Badger then starts an empty
// store and deletes the tables it no longer lists), a table rolled back.
// A crash between a flush and the state file's rename leaves the file
// behind the store, never ahead of it.
const stateFile = "ADAPTSCHED-STATE"

// storeState is stateFile's content.
type storeState struct {
	Keys    int    `json:"keys"`
	Version uint64 `json:"version"`
}

func readState(dir string) (st storeState, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return st, false, nil
	}
	if err != nil {
		return st, false, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, false, fmt.Errorf("%s: %w", stateFile, err)
	}
	return st, true, nil
}

// writeState replaces dir's state file by st, synced before the rename:
// after a power cut the file is the old one or the new one, never empty
// or torn, which Open would take for a damaged store.
func writeState(dir string, st storeState) error {
	b, _ := json.Marshal(st)
	tmp := filepath.Join(dir, stateFile+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, stateFile))
}

// checkFiles looks for damage before Badger opens dir, since Badger meets
// some of it by deleting files and some by panicking in its own
// goroutines, where it cannot be recovered: a MANIFEST that is missing,
// unreadable or that lists a table the directory lacks, and tables that
// do not open or whose blocks fail their checksums (every table is read
// through Badger's own reader, with its panics recovered). It returns a
// *DamagedError, or nil for a sound or a new store, and the tables that
// the MANIFEST does not list ("orphans"): a crash between writing a table
// and recording it leaves those legitimately (Badger deletes them; their
// records are in the WAL or in other tables), and so does a truncated
// MANIFEST, where they hold records found nowhere else. Open tells the
// two apart with trialOpen.
func checkFiles(dir string) (orphans []string, err error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil // Badger reports what it cannot read
	}
	tables := map[uint64]string{}
	var hasManifest, hasState bool
	for _, e := range ents {
		switch name := e.Name(); {
		case name == badger.ManifestFilename:
			hasManifest = true
		case name == stateFile:
			hasState = true
		case strings.HasSuffix(name, ".sst"):
			if id, ok := table.ParseFileID(name); ok {
				tables[id] = name
			}
		}
	}
	damaged := func(format string, a ...any) error {
		return &DamagedError{Dir: dir, Reason: fmt.Sprintf(format, a...)}
	}
	if !hasManifest {
		if len(tables) > 0 || hasState {
			return nil, damaged("its MANIFEST is missing (Badger would start an empty store and delete the %d tables)", len(tables))
		}
		return nil, nil
	}
	f, err := os.Open(filepath.Join(dir, badger.ManifestFilename))
	if err != nil {
		return nil, damaged("MANIFEST: %v", err)
	}
	mf, _, err := badger.ReplayManifestFile(f, 0, badger.DefaultOptions(dir).WithLogger(nil))
	f.Close()
	if err != nil {
		return nil, damaged("MANIFEST: %v", err)
	}
	ids := make([]uint64, 0, len(tables))
	for id := range tables {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if _, ok := mf.Tables[id]; !ok {
			orphans = append(orphans, tables[id])
		}
	}
	for id := range mf.Tables {
		if _, ok := tables[id]; !ok {
			return nil, damaged("table %s, listed in the MANIFEST, is missing", table.IDToFilename(id))
		}
	}
	// Only the listed tables are read: Badger deletes the others before it
	// reads any table, and a crash may have left one half written.
	for _, id := range ids {
		tm, ok := mf.Tables[id]
		if !ok {
			continue
		}
		if err := checkTable(filepath.Join(dir, tables[id]), tm.Compression); err != nil {
			return nil, damaged("table %s: %v", tables[id], err)
		}
	}
	return orphans, nil
}

// trialOpen opens a copy of dir the way Open would open dir (Badger may
// write to the copy as it opens: delete the tables its MANIFEST does not
// list, the orphans, replay its log into a table, truncate logs) and
// checks the copy's records against the state file: only then may Badger
// open dir itself. A copy that holds what the last flush recorded had
// orphans from a crash; one that holds less had a truncated MANIFEST, a
// table rolled back or a log lost, and dir is left as it was. The copy is
// removed.
func trialOpen(opts Options, orphans []string) error {
	tmp, err := os.MkdirTemp("", "adaptsched-check-*")
	if err != nil {
		return fmt.Errorf("history: check %s: %w", opts.Dir, err)
	}
	defer os.RemoveAll(tmp)
	if err := copyFiles(opts.Dir, tmp); err != nil {
		return fmt.Errorf("history: check %s: %w", opts.Dir, err)
	}
	trial := opts
	trial.Dir, trial.MoveDamaged, trial.Logger, trial.trial = tmp, false, zerolog.Nop(), true
	db, err := open(trial)
	if err == nil {
		return db.Close()
	}
	var fe *foreignStoreError
	if errors.As(err, &fe) {
		fe.Dir = opts.Dir // the copy's directory is the trial's
		return fe
	}
	var de *DamagedError
	if !errors.As(err, &de) {
		return fmt.Errorf("history: check %s: %w", opts.Dir, err)
	}
	if len(orphans) == 0 {
		return &DamagedError{Dir: opts.Dir, Reason: de.Reason}
	}
	return &DamagedError{Dir: opts.Dir, Reason: fmt.Sprintf(
		"the MANIFEST does not list %s (MANIFEST truncated?), and without %s %s",
		strings.Join(orphans, ", "), map[bool]string{true: "it", false: "them"}[len(orphans) == 1], de.Reason)}
}

// copyFiles copies the regular files of dir (not Badger's lock file) into
// to, holes and all (a log is a mostly empty file of twice the memtable's
// size). Not hard links, even for tables: Badger truncates a table to
// nothing before it deletes it (TestCrash caught a store's table emptied
// by a trial's compaction).
func copyFiles(dir, to string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !e.Type().IsRegular() || e.Name() == "LOCK" {
			continue
		}
		if err := copySparse(filepath.Join(dir, e.Name()), filepath.Join(to, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// copySparse copies file from to a new file to, leaving a hole where from
// reads as a run of zeros.
func copySparse(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	buf := make([]byte, 64<<10)
	var size int64
	for {
		n, rerr := io.ReadFull(in, buf)
		chunk := buf[:n]
		var werr error
		if bytes.Count(chunk, []byte{0}) == n {
			_, werr = out.Seek(int64(n), io.SeekCurrent)
		} else {
			_, werr = out.Write(chunk)
		}
		size += int64(n)
		if werr != nil {
			out.Close()
			return werr
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			out.Close()
			return rerr
		}
	}
	if err := out.Truncate(size); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// checkTable opens one table read-only with Badger's reader and verifies
// every block's checksum. Badger's reader panics on some damage (a zeroed
// or truncated file): the panic is returned as an error.
func checkTable(path string, c options.CompressionType) (err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	fd, err := os.Open(path)
	if err != nil {
		return err
	}
	defer fd.Close()
	defer func() {
		if r := recover(); r != nil {
			msg, _, _ := strings.Cut(strings.Trim(fmt.Sprint(r), "= \n"), "\n")
			err = fmt.Errorf("does not decode (Badger's table reader panicked: %s)", strings.Trim(msg, "= "))
		}
	}()
	// The data is a heap copy, not a mapping: the MmapFile's Close (which
	// OpenTable calls on some errors) then fails at its msync and unmaps
	// nothing; fd is closed here.
	bo := badger.DefaultOptions("")
	t, err := table.OpenTable(&z.MmapFile{Data: data, Fd: fd}, table.Options{
		ReadOnly: true, BlockSize: bo.BlockSize, Compression: c,
		ChkMode: options.OnTableRead,
	})
	if err != nil {
		return shortErr(err)
	}
	_ = t // not DecrRef'd: the last reference deletes the file
	return nil
}

// shortErr keeps the first line of a Badger error (some carry a stack).
func shortErr(err error) error {
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		return errors.New(msg[:i])
	}
	return err
}

// moveAside renames a damaged store's directory to DIR.damaged-TIMESTAMP
// and returns the new name.
func moveAside(dir string, now time.Time) (string, error) {
	to := fmt.Sprintf("%s.damaged-%s", filepath.Clean(dir), now.UTC().Format("20060102T150405Z"))
	if err := os.Rename(dir, to); err != nil {
		return "", fmt.Errorf("history: move damaged store %s aside: %w", dir, err)
	}
	return to, nil
}
