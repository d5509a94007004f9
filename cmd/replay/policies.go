package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/eval"
	"github.com/adaptsched/adaptsched/history"
	"github.com/adaptsched/adaptsched/relay"
)

// buildPolicies returns the policies of o.policies, in that order, built
// for arms: eval.Policies' list (every policy of DESIGN.md § Evaluation,
// the oracle given truth), thompson a Scheduler with the tuning flags and,
// with -db, the store (warm start and write-behind, as in production).
// done closes thompson's Scheduler and the store, and must be called. A
// policy that the arms cannot have (gpu without a GPU backend) is left out
// with a note.
func buildPolicies(o *options, arms []eval.Arm, truth func(bucket, arm int) float64, st *storeSetup) (ps []eval.Policy, done func() error, notes []string, err error) {
	done = func() error { return nil }
	cfg := adaptive.Config{Bandit: o.bandit, Seed: o.seed, Shards: 8}
	var db *history.DB
	if o.db != "" && slices.Contains(o.policies, "thompson") {
		d, warm, err := openStore(o, arms, st)
		if err != nil {
			return nil, done, nil, err
		}
		cfg.Warm, db = warm, d
		notes = append(notes, fmt.Sprintf("thompson warm-started from and saved to %s (%d posteriors loaded)", o.db, len(warm)))
	}
	all, err := eval.Policies(arms, truth, cfg)
	if err != nil {
		if db != nil {
			db.Close()
		}
		return nil, done, nil, fmt.Errorf("%w: %w", errInput, err)
	}
	th := all[0].(*eval.Thompson)
	ro := relay.Options{}
	if db != nil {
		ro.Store = db
	}
	stopFleet := func() {}
	if o.fleet.Enabled() {
		logw := io.Discard
		if st != nil && st.log != nil {
			logw = st.log
		}
		log := zerolog.New(zerolog.ConsoleWriter{Out: logw}).Level(zerolog.WarnLevel)
		ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM) // Ctrl-C while joining
		node, stop, err := o.fleet.Start(ctx, fingerprint(arms, st), log)
		stopSignals()
		if err != nil {
			th.Close()
			if db != nil {
				db.Close()
			}
			return nil, done, nil, err
		}
		stopFleet = stop
		if node == nil { // -fleet-optional, refused: logged
			notes = append(notes, "the fleet refused this node (-fleet-optional): thompson runs alone")
		} else {
			ro.Fleet = node
			fs := node.Stats()
			notes = append(notes, fmt.Sprintf("thompson shares its evidence with the fleet (synced %v: %d other nodes, %d keys)", fs.Synced, fs.Nodes, fs.Keys))
		}
	}
	closeRelay := func() error { return nil }
	if ro.Store != nil || ro.Fleet != nil {
		rl, err := relay.Start(th.Scheduler(), ro)
		if err != nil {
			stopFleet()
			th.Close()
			if db != nil {
				db.Close()
			}
			return nil, done, nil, err
		}
		closeRelay = rl.Close
	}
	done = func() error {
		// thompson first: the relay's last round then takes what it
		// learned to the store and the fleet, whose node publishes it.
		err := errors.Join(th.Err(), th.Close(), closeRelay())
		stopFleet()
		if db != nil {
			err = errors.Join(err, db.Close())
		}
		if err != nil && o.db != "" {
			err = fmt.Errorf("replay: -db %s: %w", o.db, err)
		}
		return errors.Join(err, o.fleet.Err()) // an authorisation refused while running
	}
	byName := map[string]eval.Policy{}
	for _, p := range all {
		byName[p.Name()] = p
	}
	for _, name := range o.policies {
		p, ok := byName[name]
		if !ok {
			notes = append(notes, fmt.Sprintf("policy %s left out: no backend of its kind", name))
			continue
		}
		ps = append(ps, p)
	}
	return ps, done, notes, nil
}
