package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/rs/zerolog"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/eval"
	"github.com/adaptsched/adaptsched/hardware"
	"github.com/adaptsched/adaptsched/history"
	"github.com/adaptsched/adaptsched/internal/clilog"
	"github.com/adaptsched/adaptsched/learned"
)

// storeSetup is what -db needs besides the arms: the fingerprint that
// scopes the posteriors ("" takes the arms' own) and where warnings go.
type storeSetup struct {
	fingerprint string
	log         io.Writer
}

// fingerprint returns the hardware fingerprint of thompson's posteriors:
// the arms', or st's.
func fingerprint(arms []eval.Arm, st *storeSetup) hardware.Fingerprint {
	if st != nil && st.fingerprint != "" {
		return hardware.Fingerprint{Hash: st.fingerprint, Desc: "trace fingerprint " + st.fingerprint}
	}
	infos := make([]backends.Info, len(arms))
	for i, a := range arms {
		infos[i] = a.Info
	}
	return hardware.FingerprintOf(infos)
}

// openStore opens -db for thompson's Scheduler, scoped by the arms'
// fingerprint (or st's), and loads the posteriors it holds.
func openStore(o *options, arms []eval.Arm, st *storeSetup) (db *history.DB, warm map[learned.Key]bandit.NormalGamma, err error) {
	fp := fingerprint(arms, st)
	logw := io.Discard
	if st != nil && st.log != nil {
		logw = st.log
	}
	db, err = history.Open(history.DefaultOptions(o.db).WithFingerprint(fp).WithMoveDamaged(o.resetStore).
		WithLogger(clilog.New(logw, o.logJSON, zerolog.WarnLevel)))
	if err != nil {
		// A trace's fingerprint is the trace's, not the flags': say so
		// (TestDBTraceFingerprintSlash).
		if st != nil && st.fingerprint != "" && errors.Is(err, history.ErrInvalidOptions) {
			return nil, nil, fmt.Errorf("replay: -db: the trace header's fingerprint %q cannot scope a store: %w", st.fingerprint, err)
		}
		return nil, nil, fmt.Errorf("replay: -db: %w", err)
	}
	return db, db.Load(), nil
}
