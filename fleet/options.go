package fleet

import (
	"fmt"
	"regexp"
	"time"

	"github.com/rs/zerolog"

	"github.com/adaptsched/adaptsched/hardware"
)

// Options configures a Node. Build them with DefaultOptions and the WithX
// methods; Start validates them.
type Options struct {
	// NodeID names this node: its keys are its own (one writer per key).
	// It must stay the same across restarts, so that a restarted node
	// overwrites its values rather than adding a second set: 1 to 64 of
	// A–Z a–z 0–9 _ -.
	NodeID string
	// Fingerprint scopes the statistics: only nodes with the same Hash
	// are merged (hardware.FingerprintOf).
	Fingerprint hardware.Fingerprint
	// Bucket is the JetStream key-value bucket; default "adaptsched".
	Bucket string
	// Interval is how often the node retries its set-up, ages values out
	// and publishes what changed (it also publishes as soon as Exchange
	// hands it changes); default 1 s. How often the Scheduler's changes
	// are taken and the fleet's totals folded in is the relay's
	// (relay.Options.Interval).
	Interval time.Duration
	// MaxAge is how long a value lives in the bucket (the stream's
	// MaxAge: nats-server 2.9 has no per-key TTL) and in the other
	// nodes' memory: a departed node's evidence ages out after it. A live
	// node rewrites each of its values every MaxAge/4. Default 24 h,
	// at least 4 Intervals.
	MaxAge time.Duration
	// MaxPeerKeys is the most records the node holds of one other node,
	// their names holding at most 64 bytes a record on average: that
	// node's values past either are left out and counted
	// (Stats.Limited), as a peer is untrusted. Default 8,192
	// (DefaultMaxPeerKeys: 4,096 buckets of two backends), at most
	// 1,048,576. A record held costs 70–90 bytes of heap where the nodes
	// name the same keys (BenchmarkConverge: 37–46 MB for 64 peers at the
	// default), about 500 where each names keys of its own
	// (BenchmarkConvergeDistinct: 267 MB).
	MaxPeerKeys int
	// Logger receives connection trouble and the first value over the
	// limits at warn level, skipped values at debug. The zero value logs
	// nothing.
	Logger zerolog.Logger
	// Now is the clock that ages values; nil means time.Now.
	Now func() time.Time
}

// The defaults that validate fills in.
const (
	DefaultBucket   = "adaptsched"
	DefaultInterval = time.Second
	DefaultMaxAge   = 24 * time.Hour
	// DefaultMaxPeerKeys is Options.MaxPeerKeys's default.
	DefaultMaxPeerKeys = 8192
	// maxMaxPeerKeys bounds Options.MaxPeerKeys: 64 peers of it hold
	// about 4.7 GB, or 34 GB of keys no two name.
	maxMaxPeerKeys = 1 << 20
)

// DefaultOptions returns the options of node id for hardware fp, with the
// defaults above.
func DefaultOptions(id string, fp hardware.Fingerprint) Options {
	return Options{NodeID: id, Fingerprint: fp, Bucket: DefaultBucket, Interval: DefaultInterval, MaxAge: DefaultMaxAge}
}

// WithBucket returns o with the key-value bucket b (default "adaptsched").
func (o Options) WithBucket(b string) Options { o.Bucket = b; return o }

// WithInterval returns o publishing every d (default 1 s).
func (o Options) WithInterval(d time.Duration) Options { o.Interval = d; return o }

// WithMaxAge returns o with values aging out after d (default 24 h).
func (o Options) WithMaxAge(d time.Duration) Options { o.MaxAge = d; return o }

// WithMaxPeerKeys returns o holding at most n records of each other node
// (default 8,192).
func (o Options) WithMaxPeerKeys(n int) Options { o.MaxPeerKeys = n; return o }

// WithLogger returns o logging to l (default: nothing).
func (o Options) WithLogger(l zerolog.Logger) Options { o.Logger = l; return o }

// WithClock returns o aging values by now (default time.Now).
func (o Options) WithClock(now func() time.Time) Options { o.Now = now; return o }

var (
	idRE     = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	bucketRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	fpRE     = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
)

// validate fills the defaults and rejects impossible values.
func (o *Options) validate() error {
	if o.Bucket == "" {
		o.Bucket = DefaultBucket
	}
	if o.Interval == 0 {
		o.Interval = DefaultInterval
	}
	if o.MaxAge == 0 {
		o.MaxAge = DefaultMaxAge
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxPeerKeys == 0 {
		o.MaxPeerKeys = DefaultMaxPeerKeys
	}
	switch {
	case !idRE.MatchString(o.NodeID):
		return fmt.Errorf("%w: node ID %q: want 1 to 64 of A-Z a-z 0-9 _ -", ErrOptions, o.NodeID)
	case !fpRE.MatchString(o.Fingerprint.Hash):
		return fmt.Errorf("%w: fingerprint hash %q", ErrOptions, o.Fingerprint.Hash)
	case !bucketRE.MatchString(o.Bucket):
		return fmt.Errorf("%w: bucket %q", ErrOptions, o.Bucket)
	case o.Interval < 0:
		return fmt.Errorf("%w: Interval %v is negative", ErrOptions, o.Interval)
	case o.MaxAge < 4*o.Interval:
		return fmt.Errorf("%w: MaxAge %v is under 4 Intervals (%v)", ErrOptions, o.MaxAge, o.Interval)
	case o.MaxPeerKeys < 1 || o.MaxPeerKeys > maxMaxPeerKeys:
		return fmt.Errorf("%w: MaxPeerKeys %d: want 1 to %d", ErrOptions, o.MaxPeerKeys, maxMaxPeerKeys)
	}
	return nil
}
