package history

import (
	"errors"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/adaptsched/adaptsched/learned"
	"github.com/dgraph-io/badger/v4"
)

// childEnv names the test that a re-executed test binary is to run as a
// child (childRun), with the directory it works in.
const childEnv = "ADAPTSCHED_HISTORY_CHILD"

// childDir returns the directory the parent gave, when this process is
// test name's child.
func childDir(name string) (string, bool) {
	v, ok := os.LookupEnv(childEnv)
	test, dir, _ := strings.Cut(v, "=")
	return dir, ok && test == name
}

// childRun runs test t.Name() in a new process of this test binary, with
// dir, as uid 65534 when nobody is set (file modes bind it, where they do
// not bind root), and fails t with the child's output when the child
// fails or dies of a signal.
func childRun(t *testing.T, dir string, nobody bool) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for d := bin; d != "/" && nobody; d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
		if d == os.TempDir() {
			break
		}
	}
	copyFile(t, exe, filepath.Join(bin, "test"))
	cmd := exec.Command(filepath.Join(bin, "test"), "-test.run=^"+t.Name()+"$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"="+t.Name()+"="+dir, "TMPDIR="+dir)
	if nobody {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("child did not pass:\n%s", out)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// unprivileged returns the directory to work in where the caller should
// go on: here when this process is not root, or in the child that runs as
// nobody (childRun) when it is. It returns false in the root parent,
// which has run the child.
func unprivileged(t *testing.T) (string, bool) {
	if dir, ok := childDir(t.Name()); ok {
		return dir, true
	}
	if os.Geteuid() != 0 {
		return t.TempDir(), true
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	childRun(t, dir, true)
	return "", false
}

// TestPermissionIsNotDamage: a store that this process may not read or
// write gets a *PermissionError that says it is not damage, and
// WithMoveDamaged leaves it where it is.
func TestPermissionIsNotDamage(t *testing.T) {
	root, ok := unprivileged(t)
	if !ok {
		return
	}
	dir := filepath.Join(root, "store")
	o, _ := testOpts(t, dir)
	db := mustOpen(t, o)
	db.Put(learned.Key{Backend: "cpu", Bucket: "MatMul/f32/1"}, grown(1, 2))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	var file string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".sst") || e.Name() == "MANIFEST" {
			file = filepath.Join(dir, e.Name())
		}
	}
	for _, c := range []struct {
		name string
		path string
		mode fs.FileMode
	}{{"file", file, 0o200}, {"directory", dir, 0o500}} {
		t.Run(c.name, func(t *testing.T) {
			st, _ := os.Stat(c.path)
			if err := os.Chmod(c.path, c.mode); err != nil {
				t.Fatal(err)
			}
			defer os.Chmod(c.path, st.Mode().Perm())
			_, err := Open(o.WithMoveDamaged(true))
			var pe *PermissionError
			if !errors.As(err, &pe) || !errors.Is(err, fs.ErrPermission) || errors.Is(err, ErrDamaged) ||
				!strings.Contains(err.Error(), "not damage") || !strings.Contains(err.Error(), c.path) {
				t.Fatalf("Open: %v, want a PermissionError naming %s", err, c.path)
			}
			if _, err := os.Stat(dir); err != nil {
				t.Fatalf("the store was moved: %v", err)
			}
		})
	}
	db = mustOpen(t, o)
	defer db.Close()
	if r := db.Records(); len(r) != 1 || r[0].N != 1 {
		t.Errorf("records after the permissions came back: %+v", r)
	}
}

// TestCloseUnwritable: a store whose directory turns unwritable while it
// runs ends in one FaultError naming the directory, and Close returns
// within a second although Badger would retry its table for ever; the
// next Open (the directory writable again) has what was flushed.
func TestCloseUnwritable(t *testing.T) {
	root, ok := unprivileged(t)
	if !ok {
		return
	}
	dir := filepath.Join(root, "store")
	o, log := testOpts(t, dir)
	db := mustOpen(t, o)
	k := learned.Key{Backend: "cpu", Bucket: "MatMul/f32/1"}
	db.Put(k, grown(1, 2))
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o700)
	db.Put(learned.Key{Backend: "cpu", Bucket: "MatMul/f32/2"}, grown(3))
	start := time.Now()
	err := db.Close()
	took := time.Since(start)
	var fe *FaultError
	if !errors.As(err, &fe) || !errors.Is(err, ErrUnwritable) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Close: %v, want a FaultError naming %s", err, dir)
	}
	if took > time.Second {
		t.Errorf("Close took %v", took)
	}
	if n := strings.Count(log.String(), `"level":"error"`); n != 1 {
		t.Errorf("%d error lines, want 1:\n%s", n, log.String())
	}
}

// TestCloseUnwritableReopens: what the store flushed before its directory
// turned unwritable is there at the next Open (TestCloseUnwritable's
// process left Badger unclosed; the reopening is another process's).
func TestCloseUnwritableReopens(t *testing.T) {
	if dir, ok := childDir(t.Name()); ok {
		o, _ := testOpts(t, dir)
		db := mustOpen(t, o)
		db.Put(learned.Key{Backend: "cpu", Bucket: "MatMul/f32/1"}, grown(1, 2))
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o500); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); !errors.Is(err, ErrUnwritable) {
			t.Fatalf("Close: %v", err)
		}
		return
	}
	dir := filepath.Join(t.TempDir(), "store")
	os.Chmod(filepath.Dir(dir), 0o777)
	childRun(t, dir, os.Geteuid() == 0)
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	o, _ := testOpts(t, dir)
	db := mustOpen(t, o)
	defer db.Close()
	if r := db.Records(); len(r) != 1 || r[0].N != 1 {
		t.Errorf("records: %+v", r)
	}
}

// TestDiskFull: a store on a small tmpfs that fills up stops writing with
// one FaultError ("disk full") while the disk still has spaceReserve,
// rather than die of SIGBUS in Badger's mapped writes; the process (a
// child) exits normally, and once space is freed the store reopens with
// what was flushed before. It needs root to mount the tmpfs.
func TestDiskFull(t *testing.T) {
	if dir, ok := childDir(t.Name()); ok {
		diskFullChild(t, dir)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=40m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v %s", err, out)
	}
	defer exec.Command("umount", mnt).Run()
	dir := filepath.Join(mnt, "store")
	childRun(t, dir, false)
	if err := os.Remove(filepath.Join(mnt, "filler")); err != nil {
		t.Fatal(err)
	}
	o, _ := testOpts(t, dir)
	db := mustOpen(t, o.WithMemTableSize(diskFullMemTable))
	defer db.Close()
	recs := db.Records()
	if len(recs) != diskFullKeys {
		t.Fatalf("%d records after reopening, want the %d flushed before the disk filled", len(recs), diskFullKeys)
	}
	for _, r := range recs {
		if r.N != 1 {
			t.Errorf("%v: N %d, want 1", r.Key, r.N)
		}
	}
}

// diskFullMemTable is the memtable of TestDiskFull's store (the least
// WithMemTableSize takes), which makes spaceReserve 17 MiB of the tmpfs's
// 40.
const diskFullMemTable = minMemTableSize

// diskFullKeys are the records TestDiskFull's child flushes before it
// fills the disk.
const diskFullKeys = 50

func diskFullChild(t *testing.T, dir string) {
	o, log := testOpts(t, dir)
	db := mustOpen(t, o.WithMemTableSize(diskFullMemTable))
	for i := range diskFullKeys {
		db.Put(learned.Key{Backend: "cpu", Bucket: "Opaque/k" + strconv.Itoa(i)}, grown(1))
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	fill(t, filepath.Join(filepath.Dir(dir), "filler"))
	for i := range diskFullKeys {
		db.Put(learned.Key{Backend: "cpu", Bucket: "Opaque/k" + strconv.Itoa(i)}, grown(1, 2))
	}
	err := db.Flush()
	if !errors.Is(err, ErrUnwritable) || !strings.Contains(err.Error(), "disk full") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Flush on a full disk: %v", err)
	}
	start := time.Now()
	if err := db.Close(); !errors.Is(err, ErrUnwritable) {
		t.Fatalf("Close: %v", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("Close took %v", took)
	}
	if n := strings.Count(log.String(), `"level":"error"`); n != 1 {
		t.Errorf("%d error lines, want 1:\n%s", n, log.String())
	}
}

// fill writes path until its file system is full.
func fill(t *testing.T, path string) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}

// TestNotAStore: a directory of other files is refused, and nothing is
// written into it.
func TestNotAStore(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	o, _ := testOpts(t, dir)
	if _, err := Open(o); !errors.Is(err, ErrNotStore) || !strings.Contains(err.Error(), "notes.txt") {
		t.Fatalf("Open: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d entries after the refusal", len(ents))
	}
}

// TestOtherProgramsStore: a Badger store that holds keys and none of
// this package's (another program's) is refused with ErrNotStore naming
// the directory and one of its keys, even with WithMoveDamaged, and not a
// byte of it changes: opening it would add a key, a table and a state
// file to another program's data.
func TestOtherProgramsStore(t *testing.T) {
	dir := t.TempDir()
	bdb, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.Update(func(txn *badger.Txn) error {
		if err := txn.Set([]byte("user/1"), []byte("alice")); err != nil {
			return err
		}
		return txn.Set([]byte("user/2"), []byte("bob"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := bdb.Close(); err != nil {
		t.Fatal(err)
	}
	before := contents(t, dir)
	o, log := testOpts(t, dir)
	for _, move := range []bool{false, true} {
		db, err := Open(o.WithMoveDamaged(move))
		if err == nil {
			db.Close()
			t.Fatalf("move %v: Open of another program's store succeeded", move)
		}
		for _, s := range []string{dir, "another program", `"user/1"`} {
			if !errors.Is(err, ErrNotStore) || !strings.Contains(err.Error(), s) {
				t.Errorf("move %v: Open: %v, want ErrNotStore saying %q", move, err, s)
			}
		}
	}
	if after := contents(t, dir); !mapsEqual(before, after) {
		t.Errorf("Open wrote to another program's store:\nbefore %v\n after %v", before, after)
	}
	if log.String() != "" {
		t.Errorf("log before the refusal: %s", log)
	}
}

// TestDamagedNeverWritten: a store whose damage only an open store shows
// (here its state file records more keys than it holds), left with a live
// log as a crash leaves it, is refused without a byte of any of its files
// changing: Badger would replay the log into a new table, rewrite the
// MANIFEST and delete the log as it opened.
func TestDamagedNeverWritten(t *testing.T) {
	live := filepath.Join(t.TempDir(), "live")
	o, _ := testOpts(t, live)
	o = o.WithMemTableSize(8 << 20)
	db := mustOpen(t, o)
	for i := range 20 {
		db.Put(learned.Key{Backend: "cpu", Bucket: "B/" + strconv.Itoa(i)}, grown(float64(i)))
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "store") // the files as a crash now would leave them
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := copyFiles(live, dir); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if m, _ := filepath.Glob(filepath.Join(dir, "*.mem")); len(m) == 0 {
		t.Fatal("no log in the copied store")
	}
	st, _, err := readState(dir)
	if err != nil {
		t.Fatal(err)
	}
	st.Keys += 5
	if err := writeState(dir, st); err != nil {
		t.Fatal(err)
	}
	before := contents(t, dir)
	o.Dir = dir
	_, err = Open(o)
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "where its last flush left") {
		t.Fatalf("Open: %v", err)
	}
	if after := contents(t, dir); !mapsEqual(before, after) {
		t.Errorf("Open wrote to the damaged store:\nbefore %v\n after %v", before, after)
	}
}

// contents maps each file of dir to a hash of its bytes and its size.
func contents(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = int64(crc32.ChecksumIEEE(b))<<32 | int64(len(b))
	}
	return out
}
