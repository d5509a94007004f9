package history

import (
	"encoding/json"
	"errors"
	"fmt"
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
)

// stateFile is the store's own record of what it held, written beside
// Badger's files after every flush that wrote records (write to a
// temporary file, then rename): the number of keys and Badger's highest
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

func writeState(dir string, st storeState) error {
	b, _ := json.Marshal(st)
	tmp := filepath.Join(dir, stateFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, stateFile))
}

// checkFiles looks for damage before Badger opens dir, since Badger meets
// some of it by deleting files and some by panicking in its own
// goroutines, where it cannot be recovered: a MANIFEST that is missing,
// unreadable or out of step with the tables on disk, and tables that do
// not open or whose blocks fail their checksums (every table is read
// through Badger's own reader, with its panics recovered). It returns a
// *DamagedError, or nil for a sound or a new store.
func checkFiles(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil // Badger reports what it cannot read
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
			return damaged("its MANIFEST is missing (Badger would start an empty store and delete the %d tables)", len(tables))
		}
		return nil
	}
	f, err := os.Open(filepath.Join(dir, badger.ManifestFilename))
	if err != nil {
		return damaged("MANIFEST: %v", err)
	}
	mf, _, err := badger.ReplayManifestFile(f, 0, badger.DefaultOptions(dir).WithLogger(nil))
	f.Close()
	if err != nil {
		return damaged("MANIFEST: %v", err)
	}
	ids := make([]uint64, 0, len(tables))
	for id := range tables {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if _, ok := mf.Tables[id]; !ok {
			return damaged("table %s is not in the MANIFEST (MANIFEST truncated? Badger would delete the table)", tables[id])
		}
	}
	for id := range mf.Tables {
		if _, ok := tables[id]; !ok {
			return damaged("table %s, listed in the MANIFEST, is missing", table.IDToFilename(id))
		}
	}
	for _, id := range ids {
		if err := checkTable(filepath.Join(dir, tables[id]), mf.Tables[id].Compression); err != nil {
			return damaged("table %s: %v", tables[id], err)
		}
	}
	return nil
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
