package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
)

// guardOptions are the flags that guard a replay: how much of a trace may be left
// out of the comparison, and what to do with a damaged -db.
type guardOptions struct {
	maxExcluded float64 // percent of the ops
	resetStore  bool
	logJSON     bool
}

func (g *guardOptions) flags(fs *flag.FlagSet) {
	fs.Float64Var(&g.maxExcluded, "max-excluded", 10, "fail when more than `PCT` percent of the ops are left out of the comparison (100: never)")
	fs.BoolVar(&g.resetStore, "reset-damaged-store", false, "move a damaged -db aside (DIR.damaged-TIME) and start an empty one, with a warning")
	fs.BoolVar(&g.logJSON, "log-json", false, "log JSON lines on stderr (default: plain lines)")
}

func (g *guardOptions) validate() error {
	if !(g.maxExcluded >= 0 && g.maxExcluded <= 100) {
		return fmt.Errorf("-max-excluded %v: want a percentage in [0, 100]", g.maxExcluded)
	}
	return nil
}

// errInterrupted: Ctrl-C (or SIGTERM) stopped the replay; exit status 130.
var errInterrupted = errors.New("replay: interrupted")

// interrupted is set by the first SIGINT or SIGTERM while a trace
// replays: the replay stops at the next op, reports what it replayed and
// closes the store (which flushes it). A second signal exits at once.
var interrupted atomic.Bool

// onOp, when set (by tests), is called before each op of pass 2.
var onOp func(op int64)

// notifyInterrupt catches SIGINT and SIGTERM until stop is called. It
// only sets interrupted: the replay's goroutine says so on stderr, which
// it alone writes.
func notifyInterrupt() (stop func()) {
	c := make(chan os.Signal, 2)
	done := make(chan struct{})
	signal.Notify(c, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case <-c:
			interrupted.Store(true)
		case <-done:
			return
		}
		select {
		case <-c:
			os.Exit(130)
		case <-done:
		}
	}()
	return func() {
		signal.Stop(c)
		close(done)
	}
}

// checkExcluded reports the ops that the comparison leaves out (their
// bucket lacks a measurement and a model on some backend), naming the
// backends that cause it and how many events name each: a warning for
// stderr, or an error when they exceed -max-excluded percent. The caller
// prints the warning once the replay is under way, so that an error (a
// damaged -db) comes first.
func checkExcluded(o *options, s *scanner, excluded int64) (warning string, err error) {
	if excluded == 0 || s.ops == 0 {
		return "", nil
	}
	// Ops that each backend's missing durations leave out.
	var cause [maxArms]int64
	for _, b := range s.buckets {
		if !b.excluded {
			continue
		}
		for a := range s.arms {
			if b.meas[a].n == 0 && b.modelN[a] != b.ops {
				cause[a] += b.ops
			}
		}
	}
	var names []string
	for a := range s.arms {
		if cause[a] > 0 {
			names = append(names, fmt.Sprintf("%s (named by %d of %d events, no duration for %d ops)", s.arms[a].name, s.events[a], s.ops, cause[a]))
		}
	}
	slices.Sort(names)
	pct := 100 * float64(excluded) / float64(s.ops)
	msg := fmt.Sprintf("%s: %d of %d ops (%.1f%%) are left out of the comparison: their buckets have no measurement or model on %s; "+
		"give -table or -profile to model the missing durations, or drop the events of a backend that appears only in a few",
		s.in.name, excluded, s.ops, pct, strings.Join(names, ", "))
	if pct > o.maxExcluded {
		return "", fmt.Errorf("%w: %s (-max-excluded %g allows %g%%)", errInput, msg, o.maxExcluded, o.maxExcluded)
	}
	return "replay: warning: " + msg, nil
}
