package history

import (
	"fmt"
	"strings"

	"github.com/rs/zerolog"

	"github.com/adaptsched/adaptsched/hardware"
)

// Options configure a DB. Build them with DefaultOptions and the WithX
// methods (they return a modified copy, like badger.Options); Open
// validates them.
type Options struct {
	Dir          string
	InMemory     bool
	Fingerprint  hardware.Fingerprint
	Logger       zerolog.Logger
	PriorWeight  float64
	SyncWrites   bool
	MemTableSize int64
	MoveDamaged  bool

	trial bool // Open of trialOpen's copy: no trial of its own
}

// DefaultOptions returns the defaults for a store in dir: the host's
// fingerprint (hardware.HostFingerprint), prior weight 0.1, and no
// logger: a library logs only through the logger it is given
// (WithLogger). When it writes is the caller's (package relay).
func DefaultOptions(dir string) Options {
	return Options{
		Dir:          dir,
		Fingerprint:  hardware.HostFingerprint(),
		PriorWeight:  0.1,
		MemTableSize: DefaultMemTableSize,
	}
}

// DefaultMemTableSize is Badger's memtable, in bytes: its own default.
// Rule: keep Badger's default. Reason: every write rewrites each changed
// record under a new version, and a full memtable becomes a level-0
// table that compaction then merges, so a smaller one makes a store
// whose buckets all change between writes pay for compactions beside
// Select+Observe (history BenchmarkSelectObserve/10k-buckets holds it;
// figures in docs/TUNING.md). The cost is memory: up to this much per
// open store.
const DefaultMemTableSize = 64 << 20

// minMemTableSize is the smallest memtable WithMemTableSize accepts.
// Rule: 8 MiB, the round figure above the ~6.7 MiB Badger needs. Reason:
// Badger refuses to open with a memtable whose largest batch (15% of it)
// cannot hold its 1 MiB value threshold, and Open would report that
// refusal as damage (TestSmallestMemTable).
const minMemTableSize = 8 << 20

// WithInMemory keeps the store in memory only (nothing touches the disk;
// Dir is ignored). For tests only. Default false.
func (o Options) WithInMemory(b bool) Options { o.InMemory = b; return o }

// WithFingerprint sets the hardware fingerprint that scopes the records
// (build it with hardware.FingerprintOf from the backends' Info). Default
// hardware.HostFingerprint().
func (o Options) WithFingerprint(f hardware.Fingerprint) Options { o.Fingerprint = f; return o }

// WithLogger sets where the store logs (fingerprint changes, skipped
// records, flush failures; Badger's own warnings). Default: none (the
// zero zerolog.Logger, which discards).
func (o Options) WithLogger(l zerolog.Logger) Options { o.Logger = l; return o }

// WithPriorWeight sets how much of an old fingerprint's evidence survives
// as a prior for the new one, in [0, 1]: the fraction of its observations
// kept (bandit.NormalGamma.Discount). Default 0.1.
func (o Options) WithPriorWeight(w float64) Options { o.PriorWeight = w; return o }

// WithSyncWrites makes every flush fsync. Default false: a killed process
// loses nothing flushed (the OS keeps the written pages), a power cut may
// lose the last flushes; the store is never corrupted either way.
func (o Options) WithSyncWrites(b bool) Options { o.SyncWrites = b; return o }

// WithMemTableSize sets the bytes of Badger's memtable (at least 8 MiB).
// Default DefaultMemTableSize; a smaller one saves memory where few
// records change between flushes.
func (o Options) WithMemTableSize(n int64) Options { o.MemTableSize = n; return o }

// WithMoveDamaged makes Open move a damaged store aside (renamed to
// DIR.damaged-TIMESTAMP, with a warning in the log) and start an empty
// one in its place, where it would fail with a *DamagedError. Default
// false: a damaged store is never replaced without being asked.
func (o Options) WithMoveDamaged(b bool) Options { o.MoveDamaged = b; return o }

func (o Options) validate() error {
	switch {
	case !o.InMemory && o.Dir == "":
		return fmt.Errorf("%w: empty directory (use WithInMemory for a store without one)", ErrInvalidOptions)
	case !(o.PriorWeight >= 0 && o.PriorWeight <= 1):
		return fmt.Errorf("%w: prior weight %v, must be in [0, 1]", ErrInvalidOptions, o.PriorWeight)
	case o.MemTableSize < minMemTableSize:
		return fmt.Errorf("%w: memtable size %d bytes, must be at least %d", ErrInvalidOptions, o.MemTableSize, minMemTableSize)
	case o.Fingerprint.Hash == "":
		return fmt.Errorf("%w: empty fingerprint", ErrInvalidOptions)
	case strings.Contains(o.Fingerprint.Hash, "/"):
		// The hash is one '/'-ended segment of every record key: parseKey
		// would split it, and no record would read back as this store's
		// (TestFingerprintWithSlash).
		return fmt.Errorf("%w: fingerprint %q contains '/'", ErrInvalidOptions, o.Fingerprint.Hash)
	}
	return nil
}
