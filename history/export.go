package history

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/internal/input"
	"github.com/adaptsched/adaptsched/learned"
)

// snapshotFormat names the JSON snapshot format that Export writes.
const snapshotFormat = "adaptsched-posteriors"

// Snapshot is the JSON document of Export and Import: the records of one
// hardware fingerprint.
type Snapshot struct {
	Format      string           `json:"format"`  // "adaptsched-posteriors"
	Version     int              `json:"version"` // 1
	Fingerprint string           `json:"fingerprint"`
	Hardware    string           `json:"hardware"`
	Exported    time.Time        `json:"exported"`
	Records     []SnapshotRecord `json:"records"`
}

// SnapshotRecord is one record of a Snapshot.
type SnapshotRecord struct {
	Backend   string       `json:"backend"`
	Bucket    string       `json:"bucket"`
	Prior     *NormalGamma `json:"prior,omitempty"` // absent when unknown
	Posterior NormalGamma  `json:"posterior"`
	N         uint64       `json:"n"`
	Updated   time.Time    `json:"updated"`
}

// NormalGamma is bandit.NormalGamma with JSON names.
type NormalGamma struct {
	Mu    float64 `json:"mu"`
	Kappa float64 `json:"kappa"`
	Alpha float64 `json:"alpha"`
	Beta  float64 `json:"beta"`
}

func toJSON(p bandit.NormalGamma) NormalGamma { return NormalGamma(p) }

// ImportMode says what Import does with a record whose key the store
// already holds.
type ImportMode uint8

// The import modes.
const (
	// ImportMerge combines the two: the posterior of the union of both
	// sides' observations (bandit.Merge), N summed. Snapshots must cover
	// disjoint observations (each machine exports what it learned itself),
	// or the shared ones count twice.
	ImportMerge ImportMode = iota
	// ImportReplace overwrites the stored record with the snapshot's.
	ImportReplace
)

var _ fmt.Stringer = ImportMerge

// String returns "merge" or "replace".
func (m ImportMode) String() string {
	switch m {
	case ImportMerge:
		return "merge"
	case ImportReplace:
		return "replace"
	}
	return fmt.Sprintf("ImportMode(%d)", uint8(m))
}

// ImportStats counts what Import did.
type ImportStats struct {
	Added    int // keys new to the store
	Merged   int // keys combined exactly (ImportMerge)
	Replaced int // keys overwritten (ImportReplace)
	// Inexact counts keys merged without a known prior on one side: the
	// side with more evidence (larger κ) is kept, the other dropped.
	Inexact int
}

// Export flushes, then writes the current fingerprint's records as one
// JSON Snapshot, sorted by backend and bucket.
func (db *DB) Export(w io.Writer) error {
	if err := db.Flush(); err != nil {
		return err
	}
	recs := db.Records()
	slices.SortFunc(recs, func(a, b Record) int {
		if c := strings.Compare(a.Key.Backend, b.Key.Backend); c != 0 {
			return c
		}
		return strings.Compare(a.Key.Bucket, b.Key.Bucket)
	})
	s := Snapshot{
		Format: snapshotFormat, Version: 1, Fingerprint: db.fp, Hardware: db.opts.Fingerprint.Desc,
		Exported: time.Now().UTC(), Records: make([]SnapshotRecord, len(recs)),
	}
	for i, r := range recs {
		sr := SnapshotRecord{Backend: r.Key.Backend, Bucket: r.Key.Bucket, Posterior: toJSON(r.Posterior), N: r.N, Updated: r.Updated.UTC()}
		if r.Prior != (bandit.NormalGamma{}) {
			p := toJSON(r.Prior)
			sr.Prior = &p
		}
		s.Records[i] = sr
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	if err := enc.Encode(&s); err != nil {
		return fmt.Errorf("history: export: %w", err)
	}
	return nil
}

// Import reads a Snapshot written by Export and adds its records to the
// store (written by the next Flush, Write or Close). The snapshot must carry this store's
// fingerprint: posteriors of other hardware are not evidence about this
// one. Nothing is changed unless the whole snapshot is valid. A scheduler
// already running on this DB does not see imported records: import before
// it starts (or restart it).
func (db *DB) Import(r io.Reader, mode ImportMode) (ImportStats, error) {
	var st ImportStats
	if mode != ImportMerge && mode != ImportReplace {
		return st, fmt.Errorf("%w: import mode %v", ErrInvalidOptions, mode)
	}
	var s Snapshot
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return st, fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	if err := atEOF(dec, r); err != nil {
		return st, err
	}
	switch {
	case s.Format != snapshotFormat:
		return st, fmt.Errorf("%w: format %q, want %q", ErrSnapshot, s.Format, snapshotFormat)
	case s.Version != 1:
		return st, fmt.Errorf("%w: version %d, this build reads 1", ErrSnapshot, s.Version)
	case s.Fingerprint != db.fp:
		return st, fmt.Errorf("%w: fingerprint %s (%s), this store is %s (%s)", ErrSnapshot, s.Fingerprint, s.Hardware, db.fp, db.opts.Fingerprint.Desc)
	}
	recs := make([]Record, len(s.Records))
	// A key listed twice would count its evidence twice
	// (TestImportDuplicateKey).
	seen := make(map[learned.Key]int, len(s.Records))
	for i, sr := range s.Records {
		r := Record{Key: learned.Key{Backend: sr.Backend, Bucket: sr.Bucket}, Posterior: bandit.NormalGamma(sr.Posterior), N: sr.N, Updated: sr.Updated}
		if j, ok := seen[r.Key]; ok {
			return st, fmt.Errorf("%w: records %d and %d are both %s %s", ErrSnapshot, j, i, sr.Backend, sr.Bucket)
		}
		seen[r.Key] = i
		if n := keySize(db.fp, r.Key); n > maxKeySize {
			return st, fmt.Errorf("%w: record %d (%s %s): its key is %d bytes, Badger takes at most %d",
				ErrSnapshot, i, input.Quote(sr.Backend), input.Quote(sr.Bucket), n, maxKeySize)
		}
		if sr.Prior != nil {
			r.Prior = bandit.NormalGamma(*sr.Prior)
			if !validNG(r.Prior) {
				return st, fmt.Errorf("%w: record %d (%s %s): invalid prior %+v", ErrSnapshot, i, sr.Backend, sr.Bucket, r.Prior)
			}
		}
		if !validNG(r.Posterior) {
			return st, fmt.Errorf("%w: record %d (%s %s): invalid posterior %+v", ErrSnapshot, i, sr.Backend, sr.Bucket, r.Posterior)
		}
		recs[i] = r
	}
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return st, ErrClosed
	}
	// Merges are computed before anything changes: two valid records can
	// merge to a non-finite posterior (κ = α = β near MaxFloat64 on both
	// sides), which is refused with the snapshot (TestImportMergeOverflow).
	merged := make([]Record, len(recs))
	exact := make([]bool, len(recs))
	for i, in := range recs {
		e := db.recs[in.Key]
		if e == nil || mode != ImportMerge {
			continue
		}
		merged[i], exact[i] = mergeRecords(e.rec, in)
		if !validNG(merged[i].Posterior) {
			db.mu.Unlock()
			return st, fmt.Errorf("%w: record %d (%s %s): merged with the stored record, the posterior is not finite: %+v",
				ErrSnapshot, i, in.Key.Backend, in.Key.Bucket, merged[i].Posterior)
		}
	}
	for i, in := range recs {
		e := db.recs[in.Key]
		switch {
		case e == nil:
			e = db.newEntry(in)
			st.Added++
		case mode == ImportReplace:
			e.rec = in
			st.Replaced++
		default:
			e.rec = merged[i]
			if exact[i] {
				st.Merged++
			} else {
				st.Inexact++
			}
		}
		db.markDirty(e)
	}
	db.mu.Unlock()
	return st, nil
}

// atEOF returns an ErrSnapshot error, naming its offset, when anything
// but white space follows the JSON document dec read from r: a snapshot
// is one document, and a second (cat a.json b.json) would otherwise be
// dropped without a word (TestImportTrailingData).
func atEOF(dec *json.Decoder, r io.Reader) error {
	off := dec.InputOffset()
	rest := bufio.NewReader(io.MultiReader(dec.Buffered(), r))
	for {
		c, err := rest.ReadByte()
		switch {
		case err == io.EOF:
			return nil
		case err != nil:
			return fmt.Errorf("%w: %w", ErrSnapshot, err)
		case c != ' ' && c != '\t' && c != '\n' && c != '\r':
			return fmt.Errorf("%w: data after the snapshot at offset %d (one snapshot per file)", ErrSnapshot, off)
		}
		off++
	}
}

// mergeRecords combines two records of one key. With both priors known the
// result is the posterior of all their observations, on a's prior (b's
// observations are carried over when the priors differ); otherwise the
// record with more evidence wins and exact is false.
func mergeRecords(a, b Record) (out Record, exact bool) {
	zero := bandit.NormalGamma{}
	if a.Prior == zero || b.Prior == zero {
		if b.Posterior.Kappa > a.Posterior.Kappa {
			return b, false
		}
		return a, false
	}
	q := b.Posterior
	if b.Prior != a.Prior {
		q = bandit.Rebase(b.Prior, b.Posterior, a.Prior)
	}
	out = a
	out.Posterior = bandit.Merge(a.Prior, a.Posterior, q)
	out.N = a.N + b.N
	if b.Updated.After(a.Updated) {
		out.Updated = b.Updated
	}
	return out, true
}
