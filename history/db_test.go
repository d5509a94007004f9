package history

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/hardware"
	"github.com/adaptsched/adaptsched/learned"
	"github.com/dgraph-io/badger/v4"
	"github.com/rs/zerolog"
)

var testFP = hardware.FingerprintOf([]backends.Info{
	{Name: "cpu", Kind: backends.CPU, Platform: "host", Model: "Test CPU", Arch: "amd64", Threads: 8},
	{Name: "rocm", Kind: backends.GPU, Platform: "amd", Model: "MI300X", Arch: "gfx942", Runtime: "hip 6.2"},
})

// syncBuf is a log sink safe for Badger's and the flusher's goroutines.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func testOpts(t testing.TB, dir string) (Options, *syncBuf) {
	log := &syncBuf{}
	o := DefaultOptions(dir).WithFingerprint(testFP).WithLogger(zerolog.New(log))
	if dir == "" {
		o = o.WithInMemory(true)
	}
	return o, log
}

func mustOpen(t testing.TB, o Options) *DB {
	t.Helper()
	db, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

var prior0 = bandit.NewPrior(100, 1, 0.2)

// grown returns prior0 updated by ys.
func grown(ys ...float64) bandit.NormalGamma {
	p := prior0
	for _, y := range ys {
		p.Update(y)
	}
	return p
}

func near(a, b, tol float64) bool {
	return math.Abs(a-b) <= tol*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

func ngNear(a, b bandit.NormalGamma, tol float64) bool {
	return near(a.Mu, b.Mu, tol) && near(a.Kappa, b.Kappa, tol) && near(a.Alpha, b.Alpha, tol) && near(a.Beta, b.Beta, tol)
}

func byKey(recs []Record) map[learned.Key]Record {
	m := map[learned.Key]Record{}
	for _, r := range recs {
		m[r.Key] = r
	}
	return m
}

// DESIGN.md § Persistence: posteriors survive Close and Open, with their
// priors and update counts; the directory is private (0700).
func TestRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	o, _ := testOpts(t, dir)
	db := mustOpen(t, o)
	want := map[learned.Key]Record{}
	for i := range 50 {
		k := learned.Key{Backend: []string{"cpu", "rocm", "sim:mi300x"}[i%3], Bucket: fmt.Sprintf("MatMul/f32/s%d", i)}
		p := grown(float64(i)/10, 4.5, 4.7)
		db.PutWithPrior(k, prior0, p)
		want[k] = Record{Key: k, Prior: prior0, Posterior: p, N: 1}
	}
	plain := learned.Key{Backend: "cpu", Bucket: "Softmax/f32/s3"} // Put without a prior: prior stays unknown
	db.Put(plain, grown(3))
	db.Put(plain, grown(3, 3.1))
	want[plain] = Record{Key: plain, Posterior: grown(3, 3.1), N: 2}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o700 {
		t.Errorf("directory mode %v, want 0700", perm)
	}
	db = mustOpen(t, o)
	defer db.Close()
	got := byKey(db.Records())
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for k, w := range want {
		g := got[k]
		if g.Prior != w.Prior || g.Posterior != w.Posterior || g.N != w.N || g.Updated.IsZero() {
			t.Errorf("%v: got %+v, want %+v", k, g, w)
		}
	}
	loaded := db.Load()
	for k, p := range loaded {
		if p != want[k].Posterior {
			t.Errorf("Load %v: %+v, want %+v", k, p, want[k].Posterior)
		}
	}
	if len(loaded) != len(want) {
		t.Errorf("Load gave %d records, want %d", len(loaded), len(want))
	}
}

// Write keeps a batch of changes and writes it with whatever waits:
// each change replaces its record and adds its N; records, not updates,
// are written (500 Puts of 99 keys wait as 99 records, and nothing is
// written before a Write or Flush); a change that is not finite is
// refused and counted; after Close, Write keeps nothing.
func TestWrite(t *testing.T) {
	o, _ := testOpts(t, t.TempDir())
	db := mustOpen(t, o)
	for i := range 500 {
		db.Put(learned.Key{Backend: "cpu", Bucket: "b" + strconv.Itoa(i%99)}, grown(float64(i)))
	}
	if s := db.Stats(); s.Flushes != 0 || s.Pending != 99 || s.Durable != 0 {
		t.Fatalf("500 updates of 99 records: %+v, want no flush and 99 pending", s)
	}
	k := learned.Key{Backend: "gpu", Bucket: "b0"}
	changes := []learned.Change{
		{Key: k, Prior: prior0, Posterior: grown(1, 2, 3), N: 3},
		{Key: learned.Key{Backend: "gpu", Bucket: "bad"}, Prior: prior0, Posterior: bandit.NormalGamma{Mu: math.NaN(), Kappa: 1, Alpha: 1, Beta: 1}, N: 1},
	}
	if err := db.Write(changes); err != nil {
		t.Fatal(err)
	}
	if s := db.Stats(); s.Flushes != 1 || s.Durable != 503 || s.Records != 100 || s.Pending != 0 || s.Rejected != 1 {
		t.Fatalf("after a Write: %+v, want one flush of 503 updates over 100 records, 1 rejected", s)
	}
	changes[0].Posterior, changes[0].N = grown(1, 2, 3, 4), 1
	if err := db.Write(changes[:1]); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Write(changes[:1]); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close: %v, want ErrClosed", err)
	}
	db = mustOpen(t, o)
	defer db.Close()
	if r := byKey(db.Records())[k]; r.N != 4 || r.Prior != prior0 || r.Posterior != grown(1, 2, 3, 4) {
		t.Errorf("reopened: %+v, want N 4 and the last posterior", r)
	}
}

// with more keys than the lookup cache has slots.
func TestPutKeys(t *testing.T) {
	o, _ := testOpts(t, "")
	db := mustOpen(t, o)
	defer db.Close()
	const keys, rounds = 3000, 6
	stable := make([]learned.Key, keys)
	for i := range stable {
		stable[i] = learned.Key{Backend: "cpu", Bucket: "b" + strconv.Itoa(i)}
	}
	for round := range rounds {
		for i, k := range stable {
			if round%3 == 2 {
				k = learned.Key{Backend: strings.Clone(k.Backend), Bucket: strings.Clone(k.Bucket)}
			}
			db.Put(k, grown(float64(i)))
		}
	}
	recs := db.Records()
	if len(recs) != keys {
		t.Fatalf("%d records, want %d", len(recs), keys)
	}
	for _, r := range recs {
		if r.N != rounds {
			t.Fatalf("%v: N = %d, want %d", r.Key, r.N, rounds)
		}
	}
}

func TestPutRejects(t *testing.T) {
	o, _ := testOpts(t, "")
	db := mustOpen(t, o)
	db.Put(learned.Key{Backend: "cpu", Bucket: "a"}, bandit.NormalGamma{Mu: math.NaN(), Kappa: 1, Alpha: 1, Beta: 1})
	db.Put(learned.Key{Backend: "cpu", Bucket: "a"}, bandit.NormalGamma{})
	db.PutWithPrior(learned.Key{Backend: "cpu", Bucket: "a"}, bandit.NormalGamma{Kappa: -1, Alpha: 1, Beta: 1}, grown())
	db.Put(learned.Key{Backend: "cpu", Bucket: "a"}, bandit.NormalGamma{Mu: math.Inf(-1), Kappa: 1, Alpha: 1, Beta: 1})
	db.Put(learned.Key{Backend: "cpu", Bucket: "a"}, bandit.NormalGamma{Mu: 1, Kappa: 1, Alpha: 1, Beta: math.Inf(1)})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db.Put(learned.Key{Backend: "cpu", Bucket: "a"}, grown(1))
	if s := db.Stats(); s.Rejected != 6 || s.Records != 0 {
		t.Errorf("stats %+v, want 6 rejected and no record", s)
	}
	if err := db.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close: %v, want ErrClosed", err)
	}
}

func TestOptionsValidate(t *testing.T) {
	base, _ := testOpts(t, "")
	for name, o := range map[string]Options{
		"no dir":      base.WithInMemory(false),
		"weight":      base.WithPriorWeight(1.5),
		"weight NaN":  base.WithPriorWeight(math.NaN()),
		"fingerprint": base.WithFingerprint(hardware.Fingerprint{}),
		"memtable":    base.WithMemTableSize(4096),
		"memtable 4M": base.WithMemTableSize(4 << 20),
	} {
		if _, err := Open(o); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%s: %v, want ErrInvalidOptions", name, err)
		}
	}
}

// The smallest memtable validate takes opens a store: Badger refuses a
// memtable whose largest batch (15% of it) cannot hold its 1 MiB value
// threshold, and that refusal read as damage, so WithMoveDamaged moved a
// sound store aside.
func TestSmallestMemTable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	o, _ := testOpts(t, dir)
	db := mustOpen(t, o)
	k := learned.Key{Backend: "cpu", Bucket: "a"}
	db.PutWithPrior(k, prior0, grown(1))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := Open(o.WithMemTableSize(minMemTableSize).WithMoveDamaged(true))
	if err != nil {
		t.Fatalf("Open with a %d-byte memtable: %v", minMemTableSize, err)
	}
	defer db.Close()
	if got := byKey(db.Records())[k]; got.Posterior != grown(1) {
		t.Errorf("record %+v", got)
	}
	if moved, _ := filepath.Glob(dir + ".damaged-*"); len(moved) != 0 {
		t.Errorf("a sound store moved aside: %v", moved)
	}
}

// A key longer than Badger takes (maxKeySize) failed every flush, and
// with it every other record's: Put, Write and Import refuse it, and the
// store goes on writing the others. The longest key Badger takes is kept.
func TestLongKey(t *testing.T) {
	dir := t.TempDir()
	o, _ := testOpts(t, dir)
	db := mustOpen(t, o)
	good := learned.Key{Backend: "cpu", Bucket: "good"}
	longest := learned.Key{Backend: "cpu"}
	longest.Bucket = strings.Repeat("x", maxKeySize-len(appendKey(nil, testFP.Hash, longest)))
	tooLong := learned.Key{Backend: "cpu", Bucket: longest.Bucket + "x"}
	db.PutWithPrior(good, prior0, grown(1))
	db.PutWithPrior(longest, prior0, grown(2))
	db.PutWithPrior(tooLong, prior0, grown(3))
	if err := db.Write([]learned.Change{{Key: tooLong, Prior: prior0, Posterior: grown(3), N: 1}}); err != nil {
		t.Fatalf("Write: %v", err)
	}
	snap := `{"format":"adaptsched-posteriors","version":1,"fingerprint":"` + testFP.Hash +
		`","records":[{"backend":"cpu","bucket":"` + tooLong.Bucket + `","posterior":{"mu":1,"kappa":1,"alpha":1,"beta":1},"n":1}]}`
	if _, err := db.Import(strings.NewReader(snap), ImportMerge); !errors.Is(err, ErrSnapshot) || !strings.Contains(err.Error(), "record 0") {
		t.Errorf("Import: %v, want ErrSnapshot naming record 0", err)
	}
	if s := db.Stats(); s.Rejected != 2 {
		t.Errorf("stats %+v, want 2 rejected", s)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	db = mustOpen(t, o)
	defer db.Close()
	got := byKey(db.Records())
	if len(got) != 2 || got[good].Posterior != grown(1) || got[longest].Posterior != grown(2) {
		t.Errorf("%d records after reopening, want the 2 that Badger takes", len(got))
	}
}

// A flush of up to smallBatch records is one transaction, which Badger
// caps at 15% of the memtable: records with long keys went over it, and
// every flush failed. They are written, however long their keys.
func TestFlushLongKeys(t *testing.T) {
	dir := t.TempDir()
	o, _ := testOpts(t, dir)
	o = o.WithMemTableSize(minMemTableSize)
	db := mustOpen(t, o)
	const n = 200 // under smallBatch; 2 MB of keys, over the 1.26 MB cap
	for i := range n {
		db.PutWithPrior(learned.Key{Backend: "cpu", Bucket: strconv.Itoa(i) + "/" + strings.Repeat("x", 10000)}, prior0, grown(float64(i)))
	}
	if err := db.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = mustOpen(t, o)
	defer db.Close()
	if got := len(db.Records()); got != n {
		t.Errorf("%d records after reopening, want %d", got, n)
	}
}

// A second opener gets a clear error at once, never a hang.
func TestSecondOpen(t *testing.T) {
	dir := t.TempDir()
	o, _ := testOpts(t, dir)
	db := mustOpen(t, o)
	defer db.Close()
	start := time.Now()
	_, err := Open(o)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("second Open: %v, want ErrLocked naming %s", err, dir)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("second Open took %v", d)
	}
}

// Values that fail to decode or carry an unknown version are
// skipped, counted and logged, never a crash.
func TestCorruptSkipped(t *testing.T) {
	dir := t.TempDir()
	o, _ := testOpts(t, dir)
	db := mustOpen(t, o)
	good := learned.Key{Backend: "cpu", Bucket: "good"}
	db.PutWithPrior(good, prior0, grown(4))
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	valid := appendValue(nil, &Record{Prior: prior0, Posterior: grown(4), N: 1})
	badVersion := append([]byte{9}, valid[1:]...)
	nan := appendValue(nil, &Record{Posterior: bandit.NormalGamma{Mu: math.NaN(), Kappa: 1, Alpha: 1, Beta: 1}})
	raw := map[string][]byte{
		string(appendKey(nil, testFP.Hash, learned.Key{Backend: "cpu", Bucket: "trunc"})):   valid[:40],
		string(appendKey(nil, testFP.Hash, learned.Key{Backend: "cpu", Bucket: "version"})): badVersion,
		string(appendKey(nil, testFP.Hash, learned.Key{Backend: "cpu", Bucket: "nan"})):     nan,
		string(appendKey(nil, testFP.Hash, learned.Key{Backend: "cpu", Bucket: "empty"})):   {},
		"r/1/" + testFP.Hash + "/\xff\xff\xff\xff":                                          valid, // bad backend length
		"r/2/" + testFP.Hash + "/future":                                                    valid, // unknown schema version
		"zzz":                                                                               valid, // no schema at all
	}
	err := db.bdb.Update(func(txn *badger.Txn) error {
		for k, v := range raw {
			if err := txn.Set([]byte(k), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, log := func() (*DB, *syncBuf) { o2, l := testOpts(t, dir); return mustOpen(t, o2), l }()
	defer db.Close()
	if s := db.Stats(); s.Skipped != len(raw) || s.Records != 1 {
		t.Errorf("stats %+v, want %d skipped and 1 record", s, len(raw))
	}
	if got := byKey(db.Records())[good]; got.Posterior != grown(4) {
		t.Errorf("good record %+v", got)
	}
	if n := strings.Count(log.String(), "skipped"); n != len(raw) {
		t.Errorf("%d log lines about skipped records, want %d:\n%s", n, len(raw), log)
	}
}

// A changed fingerprint keeps the old records and offers them
// only as weakened priors, with a log line.
func TestFingerprintChange(t *testing.T) {
	dir := t.TempDir()
	o, _ := testOpts(t, dir)
	db := mustOpen(t, o)
	ys := []float64{4.0, 4.2, 3.9, 4.1, 4.05, 3.95, 4.0, 4.1, 3.9, 4.0}
	grownNG := grown(ys...)
	db.PutWithPrior(learned.Key{Backend: "rocm", Bucket: "MatMul/f32/s40"}, prior0, grownNG)
	db.PutWithPrior(learned.Key{Backend: "cpu", Bucket: "Add/f32/s10"}, prior0, grown(2))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	newFP := hardware.FingerprintOf([]backends.Info{{Kind: backends.GPU, Platform: "amd", Model: "MI300X", Arch: "gfx942", Runtime: "hip 6.3"}})
	if newFP.Hash == testFP.Hash {
		t.Fatal("a runtime upgrade must change the fingerprint")
	}
	log := &syncBuf{}
	db = mustOpen(t, o.WithFingerprint(newFP).WithLogger(zerolog.New(log)).WithPriorWeight(0.1))
	db.PutWithPrior(learned.Key{Backend: "cpu", Bucket: "Add/f32/s10"}, prior0, grown(1)) // learned anew: the old one must not show
	got := db.Load()
	// Discounting by 0.1 keeps a tenth of the 10 observations: κ = κ0 + 1,
	// α = α0 + 0.5, μ = (κ0μ0 + 0.1Σy)/(κ0+1).
	w := got[learned.Key{Backend: "rocm", Bucket: "MatMul/f32/s40"}]
	sum := 0.0
	for _, y := range ys {
		sum += y
	}
	wantMu := (prior0.Kappa*prior0.Mu + 0.1*sum) / (prior0.Kappa + 1)
	if !near(w.Kappa, prior0.Kappa+1, 1e-9) || !near(w.Alpha, prior0.Alpha+0.5, 1e-9) || !near(w.Mu, wantMu, 1e-9) {
		t.Errorf("weakened %+v, want κ %v α %v μ %v", w, prior0.Kappa+1, prior0.Alpha+0.5, wantMu)
	}
	if got[learned.Key{Backend: "cpu", Bucket: "Add/f32/s10"}] != grown(1) {
		t.Errorf("the new fingerprint's own record must win: %+v", got[learned.Key{Backend: "cpu", Bucket: "Add/f32/s10"}])
	}
	if len(db.Records()) != 1 {
		t.Errorf("%d records under the new fingerprint, want 1", len(db.Records()))
	}
	if l := log.String(); !strings.Contains(l, "fingerprint changed") || !strings.Contains(l, testFP.Desc) {
		t.Errorf("no log line naming the old hardware:\n%s", l)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = mustOpen(t, o) // the old records are still there
	defer db.Close()
	if r := byKey(db.Records())[learned.Key{Backend: "rocm", Bucket: "MatMul/f32/s40"}]; r.Posterior != grownNG {
		t.Errorf("old record after the change: %+v", r)
	}
}

// Merging snapshots from machines of one fingerprint gives the
// posterior of the union of their observations; the reference is one
// posterior updated with every observation in turn.
func TestExportImportMerge(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	keys := []learned.Key{{Backend: "cpu", Bucket: "MatMul/f32/s30"}, {Backend: "rocm", Bucket: "MatMul/f32/s30"}, {Backend: "cpu", Bucket: "Softmax/f32/s12"}}
	union := map[learned.Key]bandit.NormalGamma{}
	var snaps [3]bytes.Buffer
	for m := range snaps {
		o, _ := testOpts(t, "")
		db := mustOpen(t, o)
		for i, k := range keys {
			if m == 2 && i == 2 {
				continue // a key only two machines saw
			}
			p := prior0
			if _, ok := union[k]; !ok {
				union[k] = prior0
			}
			u := union[k]
			for range 20 + 10*m {
				y := 4 + float64(i) + 0.3*r.NormFloat64()
				p.Update(y)
				u.Update(y)
				db.PutWithPrior(k, prior0, p)
			}
			union[k] = u
		}
		if err := db.Export(&snaps[m]); err != nil {
			t.Fatal(err)
		}
		db.Close()
	}
	o, _ := testOpts(t, t.TempDir())
	db := mustOpen(t, o)
	for m := range snaps {
		st, err := db.Import(bytes.NewReader(snaps[m].Bytes()), ImportMerge)
		if err != nil {
			t.Fatal(err)
		}
		if m == 0 && st.Added != 3 || m > 0 && st.Merged != len(keys)-m/2 || st.Inexact != 0 {
			t.Errorf("snapshot %d: %+v", m, st)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = mustOpen(t, o) // and it was written
	defer db.Close()
	got := byKey(db.Records())
	wantN := map[learned.Key]uint64{keys[0]: 20 + 30 + 40, keys[1]: 90, keys[2]: 20 + 30}
	for _, k := range keys {
		if g := got[k]; !ngNear(g.Posterior, union[k], 1e-9) || g.N != wantN[k] || g.Prior != prior0 {
			t.Errorf("%v: merged %+v n %d, want %+v n %d", k, g.Posterior, g.N, union[k], wantN[k])
		}
	}
	// Replace takes the snapshot's record as is.
	st, err := db.Import(bytes.NewReader(snaps[2].Bytes()), ImportReplace)
	if err != nil || st.Replaced != 2 {
		t.Fatalf("replace: %+v %v", st, err)
	}
	if g := byKey(db.Records())[keys[0]]; g.N != 40 {
		t.Errorf("replaced record n %d, want 40", g.N)
	}
}

func TestImportRejects(t *testing.T) {
	o, _ := testOpts(t, "")
	db := mustOpen(t, o)
	defer db.Close()
	other := mustOpen(t, o.WithFingerprint(hardware.FingerprintOf(nil)))
	other.PutWithPrior(learned.Key{Backend: "cpu", Bucket: "x"}, prior0, grown(1))
	var snap bytes.Buffer
	other.Export(&snap)
	other.Close()
	for name, in := range map[string]string{
		"fingerprint": snap.String(),
		"not json":    "{",
		"format":      `{"format":"x","version":1}`,
		"version":     `{"format":"adaptsched-posteriors","version":7}`,
		"unknown":     `{"format":"adaptsched-posteriors","version":1,"extra":1}`,
		"bad posterior": `{"format":"adaptsched-posteriors","version":1,"fingerprint":"` + testFP.Hash +
			`","records":[{"backend":"cpu","bucket":"b","posterior":{"mu":0,"kappa":0,"alpha":1,"beta":1}}]}`,
	} {
		if _, err := db.Import(strings.NewReader(in), ImportMerge); !errors.Is(err, ErrSnapshot) {
			t.Errorf("%s: %v, want ErrSnapshot", name, err)
		}
	}
	if s := db.Stats(); s.Records != 0 {
		t.Errorf("a rejected snapshot changed the store: %+v", s)
	}
}

func TestMergeDifferentPriors(t *testing.T) {
	ys := []float64{3, 3.5, 4, 2.5}
	otherPrior := bandit.NewPrior(1000, 3, 0.5)
	b := otherPrior
	for _, y := range ys[2:] {
		b.Update(y)
	}
	out, exact := mergeRecords(Record{Prior: prior0, Posterior: grown(ys[:2]...), N: 2}, Record{Prior: otherPrior, Posterior: b, N: 2})
	if !exact || !ngNear(out.Posterior, grown(ys...), 1e-9) || out.N != 4 {
		t.Errorf("merge across priors: %+v, want %+v", out.Posterior, grown(ys...))
	}
	out, exact = mergeRecords(Record{Posterior: grown(1, 2, 3)}, Record{Prior: prior0, Posterior: grown(1)})
	if exact || out.Posterior != grown(1, 2, 3) {
		t.Errorf("merge without a prior: %+v exact %v", out.Posterior, exact)
	}
}

// A crash loses at most the last interval and never corrupts the
// store. The test binary runs itself as a child (crashChild, from TestMain) that
// writes without pause and reports on stdout how many updates its flushes
// made durable; the parent SIGKILLs it at a random moment, 20 times,
// reopening the store in between.
func TestCrash(t *testing.T) {
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(7, 7))
	for round := range 20 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "HISTORY_CRASH_DIR="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 1024)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		var base, durable uint64
		started := false
		kill := time.After(24 * time.Hour)
	read:
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					break read
				}
				if v, ok := strings.CutPrefix(l, "base "); ok {
					base, _ = strconv.ParseUint(v, 10, 64)
					started = true
					kill = time.After(time.Duration(20+r.IntN(130)) * time.Millisecond)
				} else if v, ok := strings.CutPrefix(l, "durable "); ok {
					durable, _ = strconv.ParseUint(v, 10, 64)
				}
			case <-kill:
				cmd.Process.Signal(syscall.SIGKILL)
				kill = nil
			}
		}
		cmd.Wait()
		if !started {
			t.Fatalf("round %d: the child never started", round)
		}
		o, _ := testOpts(t, dir)
		db := mustOpen(t, o)
		s := db.Stats()
		var total uint64
		for _, rec := range db.Records() {
			total += rec.N
			// The child writes posteriors with κ = κ0 + N exactly.
			if rec.Prior != prior0 || rec.Posterior.Kappa != prior0.Kappa+float64(rec.N) {
				t.Errorf("round %d: inconsistent record %+v", round, rec)
			}
		}
		db.Close()
		if s.Skipped != 0 {
			t.Fatalf("round %d: %d records skipped after the crash", round, s.Skipped)
		}
		if total < base+durable {
			t.Fatalf("round %d: %d updates stored, the child had made %d durable", round, total, base+durable)
		}
		t.Logf("round %d: base %d, durable %d, stored %d", round, base, durable, total)
	}
}

// TestMain runs crashChild instead of the tests when TestCrash started
// this process.
func TestMain(m *testing.M) {
	if dir := os.Getenv("HISTORY_CRASH_DIR"); dir != "" {
		crashChild(dir)
	}
	os.Exit(m.Run())
}

// crashChild writes posteriors without pause until it is killed, and
// prints how many updates its flushes made durable.
func crashChild(dir string) {
	o := DefaultOptions(dir).WithFingerprint(testFP).WithLogger(zerolog.Nop())
	db, err := Open(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ns := map[learned.Key]uint64{}
	var base uint64
	for _, rec := range db.Records() {
		ns[rec.Key] = rec.N
		base += rec.N
	}
	fmt.Printf("base %d\n", base)
	// Batches of changes as a relay writes them: 256 updates of 8 keys.
	var last uint64
	var batch []learned.Change
	for i := 0; ; i++ {
		k := learned.Key{Backend: "cpu", Bucket: "Bucket/" + strconv.Itoa(i%8)}
		ns[k]++
		p := prior0
		p.Kappa += float64(ns[k])
		batch = append(batch, learned.Change{Key: k, Prior: prior0, Posterior: p, N: 1})
		if len(batch) == 256 {
			if err := db.Write(batch); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			batch = batch[:0]
			if d := db.Stats().Durable; d != last {
				last = d
				fmt.Printf("durable %d\n", d)
			}
		}
	}
}

// A key Open skipped (here a value of a newer build) is still in Badger:
// learning it again rewrites it without counting a new key, so the state
// file keeps matching and the next Open finds no damage.
func TestRewriteSkippedKeyIsNotDamage(t *testing.T) {
	dir := t.TempDir()
	o, _ := testOpts(t, dir)
	db := mustOpen(t, o)
	k := learned.Key{Backend: "cpu", Bucket: "future"}
	k2 := learned.Key{Backend: "cpu", Bucket: "imported"}
	valid := appendValue(nil, &Record{Prior: prior0, Posterior: grown(4), N: 1})
	future := append([]byte{2}, valid[1:]...) // written by a newer build
	if err := db.bdb.Update(func(txn *badger.Txn) error {
		if err := txn.Set(appendKey(nil, testFP.Hash, k), future); err != nil {
			return err
		}
		return txn.Set(appendKey(nil, testFP.Hash, k2), future)
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = mustOpen(t, o)
	if s := db.Stats(); s.Skipped != 2 {
		t.Fatalf("stats %+v, want 2 skipped", s)
	}
	db.PutWithPrior(k, prior0, grown(5)) // the scheduler learns the key again
	snap := `{"format":"adaptsched-posteriors","version":1,"fingerprint":"` + testFP.Hash +
		`","records":[{"backend":"cpu","bucket":"imported","posterior":{"mu":1,"kappa":1,"alpha":1,"beta":1},"n":1}]}`
	if st, err := db.Import(strings.NewReader(snap), ImportMerge); err != nil || st.Added != 1 {
		t.Fatalf("import: %+v %v", st, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := Open(o)
	if err != nil {
		t.Fatalf("reopen of a healthy store: %v", err)
	}
	defer db.Close()
	if got := byKey(db.Records()); got[k].Posterior != grown(5) || got[k2].N != 1 {
		t.Errorf("rewritten records %+v", got)
	}
}

// A fingerprint hash is one segment of every record key: one with '/'
// would be split at it on reading, so that after a reopen no record is
// the store's own. Open refuses it, naming it.
func TestFingerprintWithSlash(t *testing.T) {
	dir := t.TempDir()
	o, _ := testOpts(t, dir)
	o = o.WithFingerprint(hardware.Fingerprint{Hash: "trace/1", Desc: "trace fingerprint trace/1"})
	_, err := Open(o)
	if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), `"trace/1"`) {
		t.Fatalf("a fingerprint with '/': %v, want ErrInvalidOptions naming it", err)
	}
}

// exportOne returns the snapshot of a store holding one record, and that
// record's JSON object as Export wrote it.
func exportOne(t *testing.T) (snap, rec string) {
	t.Helper()
	o, _ := testOpts(t, "")
	src := mustOpen(t, o)
	defer src.Close()
	src.PutWithPrior(learned.Key{Backend: "cpu", Bucket: "MatMul/f32/s30"}, prior0, grown(4, 5))
	var b bytes.Buffer
	if err := src.Export(&b); err != nil {
		t.Fatal(err)
	}
	snap = b.String()
	i, j := strings.Index(snap, `"records": [`), strings.LastIndex(snap, "]")
	if i < 0 || j < i {
		t.Fatalf("no records array in %s", snap)
	}
	return snap, strings.TrimSpace(snap[i+len(`"records": [`) : j])
}

// importRejected checks that in is refused with ErrSnapshot, with an
// error containing want, and that the store holding one record is
// unchanged.
func importRejected(t *testing.T, in, want string) {
	t.Helper()
	o, _ := testOpts(t, "")
	db := mustOpen(t, o)
	defer db.Close()
	k := learned.Key{Backend: "cpu", Bucket: "MatMul/f32/s30"}
	db.PutWithPrior(k, prior0, grown(3))
	before := db.Records()
	_, err := db.Import(strings.NewReader(in), ImportMerge)
	if !errors.Is(err, ErrSnapshot) || !strings.Contains(err.Error(), want) {
		t.Errorf("import: %v, want ErrSnapshot saying %q", err, want)
	}
	if after := db.Records(); len(after) != 1 || after[0] != before[0] {
		t.Errorf("a rejected snapshot changed the store: %+v, was %+v", after, before)
	}
}

// A snapshot that lists a key twice would merge its evidence twice:
// Import refuses it, naming both records, and changes nothing.
func TestImportDuplicateKey(t *testing.T) {
	snap, rec := exportOne(t)
	dup := strings.Replace(snap, rec, rec+",\n"+rec, 1)
	importRejected(t, dup, "records 0 and 1")
}

// A snapshot is one JSON document: two concatenated (cat a.json b.json)
// are refused, naming where the second starts, rather than the second
// silently dropped.
func TestImportTrailingData(t *testing.T) {
	snap, _ := exportOne(t)
	importRejected(t, snap+snap, fmt.Sprintf("offset %d", len(snap)))
	importRejected(t, snap+"x", "after the snapshot")
}

// Two valid records whose merge overflows (κ = α = β = 1e308 on both
// sides) would leave a non-finite posterior to be kept and written:
// Import refuses the snapshot, naming the record, and changes nothing.
func TestImportMergeOverflow(t *testing.T) {
	o, _ := testOpts(t, "")
	db := mustOpen(t, o)
	defer db.Close()
	k := learned.Key{Backend: "cpu", Bucket: "huge"}
	huge := bandit.NormalGamma{Mu: 1, Kappa: 1e308, Alpha: 1e308, Beta: 1e308}
	db.PutWithPrior(k, prior0, huge)
	before := db.Records()
	p0, err := json.Marshal(toJSON(prior0))
	if err != nil {
		t.Fatal(err)
	}
	snap := `{"format":"adaptsched-posteriors","version":1,"fingerprint":"` + testFP.Hash +
		`","records":[{"backend":"cpu","bucket":"huge","prior":` + string(p0) + `,` +
		`"posterior":{"mu":1,"kappa":1e308,"alpha":1e308,"beta":1e308},"n":1}]}`
	_, err = db.Import(strings.NewReader(snap), ImportMerge)
	if !errors.Is(err, ErrSnapshot) || !strings.Contains(err.Error(), "record 0") {
		t.Errorf("import: %v, want ErrSnapshot naming record 0", err)
	}
	if after := db.Records(); len(after) != 1 || after[0] != before[0] || !validNG(after[0].Posterior) {
		t.Errorf("a rejected snapshot changed the store: %+v, was %+v", after, before)
	}
}

// TestMetaKeyBeforeFingerprints: a meta key of a later schema that sorts
// before the fingerprints' ("m/a") hides none of them: the store reopens
// sound, its fingerprint read and not written again.
func TestMetaKeyBeforeFingerprints(t *testing.T) {
	dir := t.TempDir()
	o, _ := testOpts(t, dir)
	db := mustOpen(t, o)
	db.PutWithPrior(learned.Key{Backend: "cpu", Bucket: "b"}, prior0, grown(4))
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.bdb.Update(func(txn *badger.Txn) error { return txn.Set([]byte("m/a"), []byte("later")) }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	var version uint64
	for i := range 3 {
		db, err := Open(o)
		if err != nil {
			t.Fatalf("open %d: %v", i+2, err)
		}
		if st := db.Stats(); st.Records != 1 {
			t.Errorf("open %d: %d records, want 1", i+2, st.Records)
		}
		if v := db.bdb.MaxVersion(); i > 0 && v != version {
			t.Errorf("open %d: version %d, was %d: the fingerprint written again", i+2, v, version)
		} else {
			version = v
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
