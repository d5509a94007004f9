package history

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/adaptsched/adaptsched/learned"
)

// damageStore builds a store the way two runs of a program leave it: each
// run puts 50 records and closes, so Badger holds two tables, the second
// with newer versions of the same keys. It returns the posteriors' Mu of
// the second run.
func damageStore(t *testing.T, dir string) map[learned.Key]float64 {
	t.Helper()
	want := map[learned.Key]float64{}
	for run := 1; run <= 2; run++ {
		o, _ := testOpts(t, dir)
		db := mustOpen(t, o)
		for i := range 50 {
			k := learned.Key{Backend: "cpu", Bucket: "B/" + strconv.Itoa(i)}
			p := grown(float64(run*100 + i))
			db.PutWithPrior(k, prior0, p)
			want[k] = p.Mu
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return want
}

func tables(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.sst"))
	if err != nil || len(m) < 2 {
		t.Fatalf("tables in %s: %v, %v; want 2 or more", dir, m, err)
	}
	slices.Sort(m) // Badger numbers tables in creation order
	return m
}

// listing maps the names of dir's tables, MANIFEST and state file to
// their sizes (the value log and Badger's other files may change when
// Badger opens a store only the state file finds damaged).
func listing(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, e := range ents {
		if n := e.Name(); !strings.HasSuffix(n, ".sst") && n != "MANIFEST" && n != stateFile {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = fi.Size()
	}
	return out
}

func flipByte(t *testing.T, path string, off func(size int) int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[off(len(b))] ^= 0xff
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func sizeOf(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestDamagedStore damages real Badger files in every way found so far (a
// missing or damaged MANIFEST, the newest table's first byte flipped, a
// table zeroed, truncated or flipped mid-file): Open must fail with a
// *DamagedError naming the directory and change no file, rather than open
// an empty store, deleting the tables, silently revert the records, or
// panic in a Badger goroutine; WithMoveDamaged moves the store aside and
// opens an empty one with a warning.
func TestDamagedStore(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, dir string)
		reason string
	}{
		{"manifest-truncated", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "MANIFEST")
			if err := os.Truncate(p, sizeOf(t, p)/2); err != nil {
				t.Fatal(err)
			}
		}, "the MANIFEST does not list 000001.sst, 000002.sst"},
		{"manifest-deleted", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "MANIFEST")); err != nil {
				t.Fatal(err)
			}
		}, "MANIFEST is missing"},
		{"newest-table-first-byte", func(t *testing.T, dir string) {
			ts := tables(t, dir)
			flipByte(t, ts[len(ts)-1], func(int) int { return 0 })
		}, ".sst: "},
		{"table-zeroed", func(t *testing.T, dir string) {
			p := tables(t, dir)[0]
			if err := os.WriteFile(p, make([]byte, sizeOf(t, p)), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "does not decode"},
		{"table-truncated", func(t *testing.T, dir string) {
			p := tables(t, dir)[0]
			if err := os.Truncate(p, sizeOf(t, p)/2); err != nil {
				t.Fatal(err)
			}
		}, "does not decode"},
		{"table-flipped-mid-file", func(t *testing.T, dir string) {
			flipByte(t, tables(t, dir)[0], func(n int) int { return n / 2 })
		}, "checksum"},
		{"rolled-back", func(t *testing.T, dir string) {
			// The Badger files of an earlier run put back (a restored
			// backup, a file system rolled back): every file is sound,
			// only the state file knows the store held more.
			st, err := os.ReadFile(filepath.Join(dir, stateFile))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			o, _ := testOpts(t, dir)
			db := mustOpen(t, o)
			db.PutWithPrior(learned.Key{Backend: "cpu", Bucket: "B/0"}, prior0, grown(1))
			db.Close()
			if err := os.WriteFile(filepath.Join(dir, stateFile), st, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "where its last flush left 51 at version"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			damageStore(t, dir)
			c.damage(t, dir)
			before := listing(t, dir)
			o, log := testOpts(t, dir)
			db, err := Open(o)
			if err == nil {
				n := len(db.Records())
				db.Close()
				t.Fatalf("Open of a damaged store succeeded with %d records", n)
			}
			var de *DamagedError
			if !errors.As(err, &de) || !errors.Is(err, ErrDamaged) || de.Dir != dir {
				t.Fatalf("Open: %v, want a *DamagedError for %s", err, dir)
			}
			for _, s := range []string{dir, c.reason, "WithMoveDamaged", "-reset-damaged-store"} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			if after := listing(t, dir); !mapsEqual(before, after) {
				t.Errorf("Open changed the damaged store:\nbefore %v\n after %v", before, after)
			}
			if strings.Contains(log.String(), "panic") {
				t.Errorf("log: %s", log)
			}

			// The explicit way out: moved aside, an empty store in its place.
			db, err = Open(o.WithMoveDamaged(true))
			if err != nil {
				t.Fatalf("Open with WithMoveDamaged: %v", err)
			}
			defer db.Close()
			if n := len(db.Records()); n != 0 {
				t.Errorf("fresh store has %d records", n)
			}
			moved, _ := filepath.Glob(dir + ".damaged-*")
			if len(moved) != 1 {
				t.Fatalf("moved aside: %v, want one DIR.damaged-*", moved)
			}
			if got := listing(t, moved[0]); !mapsEqual(before, got) {
				t.Errorf("moved store differs:\nbefore %v\n moved %v", before, got)
			}
			if !strings.Contains(log.String(), "moved it aside") || !strings.Contains(log.String(), moved[0]) {
				t.Errorf("no warning naming %s in the log: %s", moved[0], log)
			}
		})
	}
}

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// A sound store reopens with the second run's records, and its state file
// follows every flush; a store from before the state file opens as it
// did and gains one.
func TestStateFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	want := damageStore(t, dir)
	o, _ := testOpts(t, dir)
	db := mustOpen(t, o)
	got := byKey(db.Records())
	db.Close()
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for k, mu := range want {
		if got[k].Posterior.Mu != mu {
			t.Errorf("%v: Mu %v, want %v (the second run's)", k, got[k].Posterior.Mu, mu)
		}
	}
	st, ok, err := readState(dir)
	if err != nil || !ok || st.Keys != 51 || st.Version == 0 {
		t.Fatalf("state %+v, %v, %v; want 51 keys (50 records, 1 fingerprint)", st, ok, err)
	}
	if err := os.Remove(filepath.Join(dir, stateFile)); err != nil {
		t.Fatal(err)
	}
	db = mustOpen(t, o)
	db.Close()
	if st2, ok, _ := readState(dir); !ok || st2.Keys != 51 {
		t.Errorf("state after reopening without one: %+v, %v", st2, ok)
	}
}

// Close records the store's state even when nothing is pending (a relay
// writes everything before the store closes): otherwise the state file
// stayed behind the run's last flushes, and a store rolled back to before
// them (here run 1's files put back under run 2's state file) opened
// without a word, with run 2's records lost.
func TestStateFileAtClose(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	o, _ := testOpts(t, dir)
	keys := make([]learned.Key, 10)
	for i := range keys {
		keys[i] = learned.Key{Backend: "cpu", Bucket: "B/" + strconv.Itoa(i)}
	}
	run := func(y float64) {
		db := mustOpen(t, o)
		for _, k := range keys {
			db.PutWithPrior(k, prior0, grown(y))
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	run(1)
	run1 := t.TempDir()
	if err := copyFiles(dir, run1); err != nil {
		t.Fatal(err)
	}
	run(2)
	st, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := copyFiles(run1, dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, stateFile), st, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := Open(o)
	if err == nil {
		mu := byKey(db.Records())[keys[0]].Posterior.Mu
		db.Close()
		t.Fatalf("Open of a store rolled back to run 1 succeeded (Mu %v, run 2 wrote %v)", mu, grown(2).Mu)
	}
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "where its last flush left") {
		t.Fatalf("Open: %v, want ErrDamaged", err)
	}
}
