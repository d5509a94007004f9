// Package learned holds what a Scheduler learns as plain values: the key
// of one posterior, a changed posterior, and evidence learned elsewhere.
// The scheduler hands out its changes and takes foreign evidence as
// these values; the store and the fleet read and write them without
// importing the scheduler, as drivers of database/sql take
// database/sql/driver's types (DESIGN.md § The data path).
//
// # Usage
//
// adaptive.Scheduler.Changes appends Changes; history.DB.Write keeps
// them; fleet.Node.Exchange publishes their Own evidence and gives back
// Foreign totals, which adaptive.Fold.Foreign folds into the priors. The
// package relay moves them between the three.
package learned

import "github.com/adaptsched/adaptsched/bandit"

// Key names one posterior: a backend and a bucket.
type Key struct {
	Backend string // the backend's Info().Name ("cpu", "sim:mi300x")
	Bucket  string // the bucket's stable name ("MatMul/f32/s42")
}

// Change is one arm's posterior as it stands after a change, with what a
// store and a fleet need of it.
type Change struct {
	Key Key
	// Prior is the prior the posterior grew from (the cost model's,
	// corrected, and the fleet's evidence folded in); Posterior the arm's
	// posterior now.
	Prior, Posterior bandit.NormalGamma
	// N is how many observations the arm learned since its previous
	// Change: 0 for an arm changed otherwise (an observation of its
	// bucket discounts every arm with data).
	N uint64
	// Shape marks the bucket of one shape, which pools its observations
	// into its bucket's too (adaptive's ShapeHits): a store keeps it, and
	// a fleet does not share it, since its bucket's evidence holds it.
	Shape bool
}

// Own returns the evidence behind c's posterior that the Scheduler
// learned itself: the posterior since its prior.
func (c Change) Own() bandit.Stats { return c.Posterior.Since(c.Prior) }

// Foreign is a key's evidence from elsewhere, a total (not an
// increment): what every other node of the fleet learned. This node's
// own previous runs are not in it: their evidence is in its store.
type Foreign struct {
	Key   Key
	Stats bandit.Stats
}
