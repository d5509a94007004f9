package main

// After pass 1: the models of the durations a trace lacks, and which
// buckets can be compared.

import (
	"fmt"
	"math"
	"strings"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
	"github.com/adaptsched/adaptsched/sim"
)

// hasKind reports whether a backend of the kind is known.
func (s *scanner) hasKind(gpu bool) bool {
	for _, a := range s.arms {
		if a.gpu == gpu {
			return true
		}
	}
	return false
}

// addModelArms adds the backends that only a model knows (a -table's
// columns, and with a profile the kind the trace lacks) and returns the
// profiles that model durations, nil without -sim-gpu. A trace of one
// kind of backend (a Kineto trace measures the GPU only) compares nothing
// without a model of the other kind: without -table or -sim-gpu the
// simulator's defaults stand in, said in a note.
func (s *scanner) addModelArms() (notes []string, gpuProf, cpuProf *sim.Profile, err error) {
	if s.o.profile == "" && s.table == nil && len(s.arms) > 0 && s.hasKind(true) != s.hasKind(false) {
		s.o.profile = defaultGPU
		notes = append(notes, fmt.Sprintf("the trace measures one kind of backend: the other is modelled by the simulated profiles sim:%s / sim:%s (choose with -sim-gpu / -sim-cpu, or give -table)", defaultGPU, s.o.cpuProfile))
	}
	if s.o.profile != "" {
		gpuProf = sim.MustProfile(s.o.profile)
		cpuProf = sim.MustProfile(s.o.cpuProfile)
	}
	if s.table != nil {
		for _, label := range s.table.Backends() {
			if s.matchTable(label) < 0 {
				p, _ := sim.LookupProfile(strings.TrimPrefix(label, "sim:"))
				if err := s.addModel(label, !strings.HasPrefix(strings.ToLower(label), "cpu"), p); err != nil {
					return nil, nil, nil, err
				}
			}
		}
	}
	if gpuProf != nil {
		if !s.hasKind(false) {
			if err := s.addModel("cpu", false, cpuProf); err != nil {
				return nil, nil, nil, err
			}
		}
		if !s.hasKind(true) {
			if err := s.addModel("gpu", true, gpuProf); err != nil {
				return nil, nil, nil, err
			}
		}
	}
	return notes, gpuProf, cpuProf, nil
}

// addModel adds a backend that a model stands for, unless one is named so.
func (s *scanner) addModel(name string, gpu bool, prof *sim.Profile) error {
	if _, ok := s.armIdx[name]; ok {
		return nil
	}
	i, err := s.arm(name, nil)
	if err != nil {
		return err
	}
	a := &s.arms[i]
	a.gpu, a.model = gpu, true
	a.info.Kind, a.info.SharedMemory = backends.CPU, true
	if gpu {
		a.info.Kind, a.info.SharedMemory = backends.GPU, false
	}
	a.info.Nominal = defaultNominal(gpu, prof)
	return nil
}

// finish adds the backends that only a model knows, attaches the models,
// and sets every bucket's oracle; it returns notes for the report.
func (s *scanner) finish() ([]string, error) {
	notes, gpuProf, cpuProf, err := s.addModelArms()
	if err != nil {
		return nil, err
	}
	for i := range s.arms {
		a := &s.arms[i]
		if s.table != nil {
			for c, label := range s.table.Backends() {
				if sameBackend(label, a.name) {
					a.tableCol = c
				}
			}
		}
		if gpuProf != nil {
			a.prof = cpuProf
			if a.gpu {
				a.prof = gpuProf
			}
			if !a.described {
				a.info.Nominal = a.prof.Nominal
			}
		}
	}
	if len(s.arms) < 2 {
		notes = append(notes, "one backend only: give -sim-gpu (with -sim-cpu) or -table to model the others")
	}
	if len(s.arms) == 0 {
		return notes, fmt.Errorf("%w: %s: no event names a backend, and no model adds one", errInput, s.in.name)
	}
	// Models per distinct op, then per bucket.
	for _, ent := range s.specs {
		if ent.n == 0 {
			continue
		}
		var tbl []float64
		if s.table != nil {
			tbl = tableMeans(s.table, ent.spec)
		}
		for a := range s.arms {
			arm := &s.arms[a]
			switch {
			case tbl != nil && arm.tableCol >= 0:
				ent.model[a], ent.sigma[a], ent.msrc[a] = tbl[arm.tableCol], sim.DefaultSpread, srcTable
			case arm.prof != nil && ent.spec.Op != kernels.Opaque:
				ent.model[a], ent.sigma[a], ent.msrc[a] = arm.prof.MeanUs(ent.spec), arm.prof.Sigma, srcProfile
			default:
				continue
			}
			b := s.buckets[ent.task.Bucket]
			b.modelSum[a] += float64(ent.n) * ent.model[a]
			b.modelN[a] += ent.n
		}
	}
	for _, b := range s.buckets {
		if b.ops == 0 {
			continue
		}
		best := math.Inf(1)
		for a := range s.arms {
			switch {
			case b.meas[a].n > 0:
				b.mean[a] = b.meas[a].meanUs()
				b.traceMean[a], b.traceSigma[a] = b.mean[a], b.meas[a].sigma()
			case b.modelN[a] == b.ops:
				b.mean[a] = b.modelSum[a] / float64(b.ops)
			default:
				b.excluded = true
				continue
			}
			if b.mean[a] < best {
				best, b.oracle = b.mean[a], a
			}
		}
	}
	return notes, nil
}

// matchTable returns the trace backend that a table column stands for, or -1.
func (s *scanner) matchTable(label string) int {
	for i, a := range s.arms {
		if sameBackend(label, a.name) {
			return i
		}
	}
	return -1
}

func sameBackend(a, b string) bool {
	return strings.TrimPrefix(a, "sim:") == strings.TrimPrefix(b, "sim:")
}

// tableMeans returns the table's mean µs of spec on each of its backends
// (sim.Arm.Truth of its arms), or nil when the table lacks it on one.
func tableMeans(t *sim.Table, spec kernels.Spec) []float64 {
	arms := t.Arms()
	out := make([]float64, len(arms))
	for a, arm := range arms {
		base, _, err := arm.Truth(spec)
		if err != nil {
			return nil
		}
		out[a] = base * arm.Profile.SpikeMean()
	}
	return out
}
