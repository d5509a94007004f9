package main

import (
	"fmt"
	"slices"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/sim"
)

// buildPolicies returns the policies of o.policies, in that order, built
// for arms: sim.Policies' list (every policy of DESIGN.md § Evaluation,
// the oracle given truth) with thompson rebuilt from the tuning flags, or
// store-backed with -db (then done closes the store and must be called).
// A policy that the arms cannot have (gpu without a GPU backend) is left
// out with a note.
func buildPolicies(o *options, arms []bandit.Arm, truth func(bucket, arm int) float64, st *storeSetup) (ps []bandit.Policy, done func() error, notes []string, err error) {
	done = func() error { return nil }
	all, err := sim.Policies(arms, truth, o.seed)
	if err != nil {
		return nil, done, nil, fmt.Errorf("%w: %w", errInput, err)
	}
	byName := map[string]bandit.Policy{}
	for _, p := range all {
		byName[p.Name()] = p
	}
	if slices.Contains(o.policies, "thompson") {
		if o.db != "" {
			sp, err := newStorePolicy(o, arms, st)
			if err != nil {
				return nil, done, nil, err
			}
			byName["thompson"], done = sp, sp.close
			notes = append(notes, fmt.Sprintf("thompson warm-started from and saved to %s (%d posteriors loaded)", o.db, sp.loaded))
		} else if byName["thompson"], err = adaptive.NewThompsonSeed(o.bandit, arms, o.seed); err != nil {
			return nil, done, nil, fmt.Errorf("%w: %w", errInput, err)
		}
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
