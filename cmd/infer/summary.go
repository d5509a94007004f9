package main

import (
	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/backends/rocm"
	"github.com/adaptsched/adaptsched/executor"
)

// Summary is the -json output.
type Summary struct {
	Strategy   string   `json:"strategy"`
	Backends   []string `json:"backends"`
	Params     int64    `json:"params"`
	Batch      int      `json:"batch"`
	Tokens     int64    `json:"tokens"`
	Seconds    float64  `json:"seconds"`
	TokensPerS float64  `json:"tokens_per_s"`
	// ModelledSeconds is the measured steps' time on the model's clock
	// (modelClock): the simulated Timeline's makespan when every backend
	// is simulated, else the sum of the durations the backends reported
	// for the ops and copies and of the GPU's gatherings' device time;
	// ModelledTokensPerS is Tokens over it.
	ModelledSeconds    float64 `json:"modelled_seconds"`
	ModelledTokensPerS float64 `json:"modelled_tokens_per_s"`
	// PromptTokens were prefilled in the measured steps;
	// ModelledServedTokensPerS counts them with Tokens.
	PromptTokens             int64   `json:"prompt_tokens"`
	ModelledServedTokensPerS float64 `json:"modelled_served_tokens_per_s"`
	// BoundTokensPerS is Tokens over the least time of the placement that
	// ran: the largest of the host's issue time and each simulated
	// device's busy time (0 unless every backend is simulated), so that
	// ModelledTokensPerS / BoundTokensPerS is the pipeline's efficiency.
	BoundTokensPerS float64 `json:"bound_tokens_per_s"`
	// ExecModel is the simulated devices' execution model (sim.ExecModel:
	// async, or sync with -sync); empty unless every backend is simulated.
	ExecModel string `json:"exec_model,omitempty"`
	// WarmupSteps decode steps (WarmupTokens tokens) ran before the
	// measured ones and are in no figure above; ColdModelledTokensPerS
	// counts them too.
	WarmupSteps            int     `json:"warmup_steps"`
	WarmupTokens           int64   `json:"warmup_tokens"`
	ColdModelledTokensPerS float64 `json:"cold_modelled_tokens_per_s"`
	// StepModelledUs is each step's modelled µs (prompt micro-batches and
	// decode steps), warm-up included (with -step-times).
	StepModelledUs []float64 `json:"step_modelled_us,omitempty"`
	// StepWallUs is each of those steps' µs by the wall clock: on real
	// devices the modelled µs are the sum of the ops' reported durations
	// (a gathering's whole), which leaves out the gaps between them.
	StepWallUs []float64 `json:"step_wall_us,omitempty"`
	// StepMode names how each step of StepModelledUs ran under -strategy
	// auto: "prompt", or a decode step's mode as in StepModes.
	StepMode []string `json:"step_mode,omitempty"`
	// Ops, Share (each backend's share of them), Switches and Fallbacks
	// count the whole run, warm-up included, as the Executor's telemetry
	// does; the throughput figures above leave the warm-up out.
	Ops       int64              `json:"ops"`
	Share     map[string]float64 `json:"share"`
	Switches  int64              `json:"switches"`
	Fallbacks int64              `json:"fallbacks"`
	// ExplorePct is the share of decisions whose reason was Explore, in %
	// (adaptive.Telemetry.ExplorationShare).
	ExplorePct float64 `json:"explore_pct"`
	// StepModes counts -strategy auto's decode steps by how they ran:
	// "learned" (the per-op learner), "frozen" (its fastest placement),
	// "only:NAME" (every op on NAME) and "home" (each op where its
	// weights live).
	StepModes map[string]int64 `json:"step_modes,omitempty"`
	// Restarts counts the requests restarted after a device was lost with
	// their KV caches: their tokens prefilled again elsewhere.
	Restarts int64 `json:"restarts,omitempty"`
	// GatheredSteps counts the decode steps whose GPU ops were gathered
	// and launched at once (-graphs): only:NAME's, and auto's in a mode
	// set before the step runs.
	GatheredSteps int64 `json:"gathered_steps,omitempty"`
	// OverlappedSteps counts the decode steps issued before the tokens of
	// the step before them were read (-overlap).
	OverlappedSteps int64 `json:"overlapped_steps,omitempty"`
	// Graphs is what the GPU backend's gatherings did (built, replayed,
	// launched one by one, and why graphs are not used, if they are not).
	Graphs *rocm.GraphStats `json:"graphs,omitempty"`
	// Fleet is the fleet node's counters at exit (-fleet, -fleet-serve).
	Fleet   *FleetSummary `json:"fleet,omitempty"`
	Stopped bool          `json:"stopped"` // by a signal
}

// shares returns each backend's share of the ops that ran.
func shares(st executor.Stats) map[string]float64 {
	var total int64
	for _, b := range st.Backends {
		total += b.Ops
	}
	out := map[string]float64{}
	for _, b := range st.Backends {
		if total > 0 {
			out[b.Name] = float64(b.Ops) / float64(total)
		} else {
			out[b.Name] = 0
		}
	}
	return out
}

// addRun fills sum with what the run did: its backends, their shares,
// fallbacks, explorations and switches. It returns the Telemetry read.
func (sum *Summary) addRun(e *executor.Executor, infos []backends.Info) adaptive.Telemetry {
	for _, in := range infos {
		sum.Backends = append(sum.Backends, in.Name)
	}
	stats, tel := e.Stats(), e.Scheduler().Telemetry()
	sum.Share = shares(stats)
	sum.Fallbacks = stats.Fallbacks
	sum.ExplorePct = tel.ExplorationShare * 100
	for _, b := range tel.Backends {
		sum.Switches += b.Switches
	}
	return tel
}
