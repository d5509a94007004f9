// Package relay moves what a Scheduler learns between it, its store and
// its fleet (DESIGN.md § The data path): one goroutine takes the
// Scheduler's changes as data (adaptive.Scheduler.Changes), writes them
// to the store, hands them to the fleet, and folds the fleet's evidence
// back into the Scheduler's priors (adaptive.Fold.Foreign). The
// Scheduler, the store and the fleet never call one another: the relay
// alone calls each in turn, holding none of their locks while it calls
// another, so that no lock order spans two of them.
//
// # Usage
//
//	db, _ := history.Open(history.DefaultOptions(dir))
//	s, _ := adaptive.New(adaptive.Config{Backends: bes, Warm: db.Load()})
//	r, _ := relay.Start(s, relay.Options{Store: db})
//	... Select and Observe ...
//	s.Close(); r.Close(); db.Close()
//
// Start before the Scheduler's first Select; close the Scheduler, then
// the relay (its last round takes every change), then the store and the
// fleet, which the relay does not close. ExampleStart (example_test.go)
// runs it over an in-memory store.
package relay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/learned"
)

// Store keeps a Scheduler's changes (history.DB). Write keeps them and
// writes them durably before it returns; on an error it keeps them for
// its next Write, which the relay makes at every round until one
// succeeds, with no changes when none are new.
type Store interface {
	Write(changes []learned.Change) error
}

// Fleet shares a Scheduler's changes with other machines (fleet.Node).
// Exchange takes the changes to publish (their own evidence) and appends
// to dst the totals of the keys whose evidence from elsewhere changed
// since its last call; it must not block on the network. Updated
// receives when such totals wait, so that they are folded in as they
// arrive. Flush publishes what Exchange took now, rather than at the
// fleet's next tick.
type Fleet interface {
	Exchange(changes []learned.Change, dst []learned.Foreign) []learned.Foreign
	Updated() <-chan struct{}
	Flush(ctx context.Context) error
}

// Options configure a Relay. The zero value relays nothing; Store and
// Fleet may each be nil.
type Options struct {
	Store Store
	Fleet Fleet
	// Interval is the longest a change waits before the relay takes it:
	// a crash loses at most this much. 0 means DefaultInterval.
	Interval time.Duration
	// Every is how many changed records (one per posterior however often
	// it changed) make the relay take them before the interval is up: it
	// bounds a write's batch. Under overload, when records change faster
	// than about 1/(1+pace) of a core can write them, those rounds are
	// paced (pace) and more records wait, still at most Interval. 0 means
	// DefaultEvery.
	Every int
	// Logger receives failed writes (which are retried) at error level.
	// The zero value logs nothing.
	Logger zerolog.Logger
}

// The defaults of Options.
const (
	DefaultInterval = time.Second
	DefaultEvery    = 1024
)

// ErrOptions marks Options that Start rejects.
var ErrOptions = errors.New("relay: invalid options")

// ErrClosed marks a call on a closed Relay.
var ErrClosed = errors.New("relay: closed")

// Stats are a Relay's counters since Start.
type Stats struct {
	Rounds  int    // rounds that took changes or evidence
	Changes uint64 // changed records taken from the Scheduler
	Foreign uint64 // foreign totals folded into the Scheduler
	Failed  int    // store writes that failed (their records are retried)
	// Busy is the time spent in the store's writes.
	Busy time.Duration
}

// Relay is the loop between one Scheduler, its store and its fleet.
// Flush, Stats and Close are safe for concurrent use.
type Relay struct {
	s     *adaptive.Scheduler
	fold  *adaptive.Fold // nil without a fleet
	opts  Options
	ready <-chan struct{}

	flushReq chan chan error
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once

	mu sync.Mutex // guards st
	st Stats

	// The loop's own.
	changes []learned.Change
	foreign []learned.Foreign
	last    error // the last round's error, for Close
	failing bool  // the last write to the store failed
}

// Start starts relaying s's changes: it makes s track them (Track), and
// with a fleet attaches s's Fold and folds in the evidence the fleet
// holds already, before it returns, so that the first Select starts from
// it. Call it before s's first Select.
func Start(s *adaptive.Scheduler, opts Options) (*Relay, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: nil Scheduler", ErrOptions)
	}
	if opts.Interval < 0 || opts.Every < 0 {
		return nil, fmt.Errorf("%w: interval %v, every %d records", ErrOptions, opts.Interval, opts.Every)
	}
	if opts.Interval == 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Every == 0 {
		opts.Every = DefaultEvery
	}
	r := &Relay{s: s, opts: opts, flushReq: make(chan chan error), stop: make(chan struct{}), done: make(chan struct{})}
	r.ready = s.Track(opts.Every)
	if opts.Fleet != nil {
		r.fold = s.Fold()
		r.round()
	}
	go r.loop()
	return r, nil
}

// pace paces the rounds that Every triggers, and the folds of the
// fleet's updates (loop). Rule: the next one starts
// at least pace times the last round's duration after it ended, so that
// the rounds take at most about 1/(1+pace) of a core (5%) however fast
// records change; the interval's round is never paced, so a crash still
// loses at most Interval. Reason: a Scheduler that changes a new record
// at every Observe otherwise keeps the store writing without pause, and
// where the writer has no idle core that time comes out of
// Select+Observe. TestPacing holds the share; history
// BenchmarkSelectObserve/10k-buckets/parallel the cost beside
// Select+Observe (docs/TUNING.md).
const pace = 19

// loop is the relay's goroutine. Rule: the fleet's updates are paced
// as Every's rounds are, pace times the last fold's duration apart;
// those signalled meanwhile wait as one (Updated holds one), and the
// interval's round folds them if it comes first. Reason: each fold
// makes the fleet vet every record it holds, and a peer's stream of
// puts kept the relay folding without pause, a core
// (TestUpdatesPaced).
func (r *Relay) loop() {
	defer close(r.done)
	t := time.NewTicker(r.opts.Interval)
	defer t.Stop()
	var busy, foldBusy time.Duration // the last round's and fold's durations
	var end, foldEnd time.Time       // when they ended
	var updated <-chan struct{}
	if r.opts.Fleet != nil {
		updated = r.opts.Fleet.Updated()
	}
	for {
		select {
		case <-updated:
			ok, ticked := r.wait(pace*foldBusy-time.Since(foldEnd), t.C)
			if !ok {
				r.last = r.round()
				return
			}
			if !ticked {
				start := time.Now()
				r.foldIn()
				foldEnd = time.Now()
				foldBusy = foldEnd.Sub(start)
				continue
			}
		case <-t.C:
		case <-r.ready:
			if ok, _ := r.wait(pace*busy-time.Since(end), t.C); !ok {
				r.last = r.round()
				return
			}
		case reply := <-r.flushReq:
			reply <- r.round()
			continue
		case <-r.stop:
			r.last = r.round()
			return
		}
		start := time.Now()
		_ = r.round()
		end = time.Now()
		busy = end.Sub(start)
	}
}

// wait waits d, or until the interval's tick (which writes whatever
// waits), and reports whether the tick came, and ok false if the relay
// was stopped meanwhile.
func (r *Relay) wait(d time.Duration, tick <-chan time.Time) (ok, ticked bool) {
	if d <= 0 {
		return true, false
	}
	pause := time.NewTimer(d)
	defer pause.Stop()
	select {
	case <-pause.C:
	case <-tick:
		return true, true
	case <-r.stop:
		return false, false
	}
	return true, false
}

// round takes the Scheduler's changes, writes them to the store, hands
// them to the fleet and folds the fleet's new totals in. It returns the
// store's error (the records stay with the store, and every round writes
// until a write succeeds).
func (r *Relay) round() error {
	r.changes = r.s.Changes(r.changes[:0])
	var err error
	var took time.Duration
	// After a failed write the store still holds records: write (retry)
	// though nothing is new, or they wait for the next change and Close
	// returns nil over them (TestFailedWriteRetried).
	if r.opts.Store != nil && (len(r.changes) > 0 || r.failing) {
		start := time.Now()
		err = r.opts.Store.Write(r.changes)
		took = time.Since(start)
		// Said once per run of failed writes: a store that stopped
		// writing (a full disk) fails every round, and said why itself.
		var told interface{ Reported() bool }
		if err != nil && !r.failing && !(errors.As(err, &told) && told.Reported()) {
			r.opts.Logger.Error().Err(err).Msg("relay: store write failed; will retry")
		}
		r.failing = err != nil
	}
	r.foreign = r.foreign[:0]
	if r.opts.Fleet != nil {
		r.foreign = r.opts.Fleet.Exchange(r.changes, r.foreign)
		r.fold.Foreign(r.foreign)
	}
	if len(r.changes) > 0 || len(r.foreign) > 0 || err != nil {
		r.mu.Lock()
		r.st.Rounds++
		r.st.Changes += uint64(len(r.changes))
		r.st.Foreign += uint64(len(r.foreign))
		r.st.Busy += took
		if err != nil {
			r.st.Failed++
		}
		r.mu.Unlock()
	}
	return err
}

// foldIn exchanges no change with the fleet and folds in the totals it
// gives back: the fleet's evidence arrived between rounds.
func (r *Relay) foldIn() {
	r.foreign = r.opts.Fleet.Exchange(nil, r.foreign[:0])
	r.fold.Foreign(r.foreign)
	if len(r.foreign) > 0 {
		r.mu.Lock()
		r.st.Foreign += uint64(len(r.foreign))
		r.mu.Unlock()
	}
}

// Flush runs a round now: the Scheduler's changes so far are written to
// the store and handed to the fleet, and the fleet's evidence so far is
// folded in; then the fleet publishes (Fleet.Flush). It returns the
// store's error, else the fleet's, and ErrClosed after Close.
func (r *Relay) Flush(ctx context.Context) error {
	reply := make(chan error, 1)
	select {
	case r.flushReq <- reply:
	case <-r.done:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	var err error
	select {
	case err = <-reply:
	case <-ctx.Done():
		return ctx.Err()
	}
	if err == nil && r.opts.Fleet != nil {
		err = r.opts.Fleet.Flush(ctx)
	}
	return err
}

// Stats returns the relay's counters.
func (r *Relay) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st
}

// Close runs a last round, stops the relay and returns the store's error
// of that round. It does not close the Scheduler, the store or the
// fleet. A second Close returns the same.
func (r *Relay) Close() error {
	r.once.Do(func() { close(r.stop) })
	<-r.done
	return r.last
}
