package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
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
	fs.Float64Var(&g.maxExcluded, "max-excluded", 10, "fail when more than `PCT` percent of the ops are left out of the comparison for want of a measurement or model (ops outside the op catalogue, which no backend here runs, do not count; 100: never)")
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

// onOp, when set (by tests), is called before each op replayed, and with
// -1 before the input or workload is prepared.
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
