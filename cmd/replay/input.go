package main

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/adaptsched/adaptsched/internal/input"
	"github.com/adaptsched/adaptsched/sim"
	"github.com/adaptsched/adaptsched/trace"
)

// defaultTrace is the trace replayed without arguments: a mixed-serving
// run of the simulator recorded by trace.Recorder (recordDefault;
// regenerate with go run ./cmd/replay -record-default
// cmd/replay/testdata/default.jsonl.gz, or go test ./cmd/replay -rewrite).
//
//go:embed testdata/default.jsonl.gz
var defaultTrace []byte

// defaultName is how the report names the embedded trace.
const defaultName = "default"

// replay runs the replay that o asks for and returns its report.
func replay(o options, stdin io.Reader, stderr io.Writer) (*Report, *plotData, error) {
	interrupted.Store(false)
	// Caught from the start, so that Ctrl-C while a workload or table is
	// prepared still ends in the report of what was replayed (the
	// default action would exit 130 silently).
	defer notifyInterrupt()()
	if onOp != nil {
		onOp(-1) // before anything is prepared
	}
	var table *sim.Table
	if o.table != "" {
		var err error
		if table, err = loadTable(o.table, o.figures, stdin, stderr); err != nil {
			return nil, nil, err
		}
	}
	var rs *runSet
	var pd *plotData
	var err error
	switch {
	case o.workload != "":
		rs, pd, err = replayWorkload(&o, stderr)
	case o.input == "" && table != nil:
		rs, pd, err = replayTable(&o, table, stderr)
	default:
		var in *traceInput
		var cleanup func()
		prog := newProgress(stderr, o.progressMin)
		in, cleanup, err = openInput(&o, stdin, prog)
		if err != nil {
			return nil, nil, err
		}
		defer cleanup()
		rs, pd, err = replayTrace(&o, in, table, prog, stderr)
		prog.done()
	}
	if err != nil {
		return nil, nil, err
	}
	pd.runs = rs.runs
	return rs.report(), pd, nil
}

// openInput returns the trace that o names: the embedded default, stdin
// (spooled to a temporary file), a file or a pipe, as an adaptsched trace
// or a Chrome trace, its header read. cleanup closes and removes what it
// made.
func openInput(o *options, stdin io.Reader, prog *progress) (*traceInput, func(), error) {
	ropts := trace.ReaderOptions{SkipBad: o.skipBad}
	if o.input == "" {
		if o.profile == "" {
			o.profile = defaultGPUProfile
		}
		in := memoryTrace(defaultName, defaultTrace, ropts)
		in.note = fmt.Sprintf("default trace: %d ops of a simulated mixed-serving run (Llama-3.2-1B) on sim:h100 + sim:cpu2, placed by thompson, %.0f%% shadow runs; counterfactuals without a measurement come from profiles %s / %s",
			defaultOps, defaultShadow*100, o.profile, o.cpuProfile)
		return in, in.close, readHeader(in)
	}
	path, name, cleanup := o.input, o.input, func() {}
	if o.input == "-" {
		// Spooled to a file, so that its format can be told (a Chrome
		// trace's key may follow megabytes); it is parsed once.
		var err error
		if path, cleanup, err = spoolFile(stdin, "stdin"); err != nil {
			return nil, cleanup, err
		}
		name = "stdin"
	}
	in, closeIn, err := openPath(o, path, name, ropts, prog)
	return in, func() { closeIn(); cleanup() }, err
}

// spoolFile copies r, called name, to a temporary file and returns its
// path and what removes it.
func spoolFile(r io.Reader, name string) (string, func(), error) {
	f, err := os.CreateTemp("", "replay-input-*")
	if err != nil {
		return "", func() {}, fmt.Errorf("replay: spooling %s: %w", name, err)
	}
	cleanup := func() { os.Remove(f.Name()) }
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		cleanup()
		return "", func() {}, fmt.Errorf("replay: spooling %s: %w", name, err)
	}
	return f.Name(), cleanup, nil
}

// openPath opens the trace file (or pipe) at path, called name.
func openPath(o *options, path, name string, ropts trace.ReaderOptions, prog *progress) (*traceInput, func(), error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, func() {}, fmt.Errorf("replay: %w", err)
	}
	if m := st.Mode(); !m.IsRegular() && m&os.ModeNamedPipe == 0 {
		// A directory, or a device (/dev/zero) that never ends. Checked
		// before opening, which blocks on a FIFO; a pipe is read as it
		// comes, once.
		return nil, func() {}, fmt.Errorf("%w: %s is %s, not a trace file or a pipe", errInput, path, input.KindOf(m))
	}
	format := o.format
	if format == "auto" && st.Mode().IsRegular() {
		if format, err = sniff(path); err != nil {
			return nil, func() {}, err
		}
	}
	if format == "chrome" {
		in, err := openChrome(o, path, name)
		return in, func() {}, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, func() {}, fmt.Errorf("replay: %w", err)
	}
	r := prog.reader(f, st.Size())
	if format == "auto" {
		// A pipe, read once: an adaptsched trace, told by its first
		// line, streams on from the bytes peeked; anything else is
		// spooled and told as a file is (a Chrome trace's key may follow
		// megabytes) (TestChromeOnPipe).
		var head bytes.Buffer
		rb, err := input.Gunzip(io.TeeReader(r, &head))
		isTrace := err != nil || namesTraceFormat(rb) // a bad gzip header: the trace reader reports it
		r = io.MultiReader(&head, r)
		if !isTrace {
			tmp, rm, err := spoolFile(r, name)
			f.Close()
			if err != nil {
				return nil, func() {}, err
			}
			in, closeIn, err := openPath(o, tmp, name, ropts, prog)
			return in, func() { closeIn(); rm() }, err
		}
	}
	in := streamTrace(name, r, ropts)
	in.closer = f
	return in, in.close, readHeader(in)
}

// memoryTrace is a trace held in memory (the embedded default).
func memoryTrace(name string, b []byte, ropts trace.ReaderOptions) *traceInput {
	return streamTrace(name, bytes.NewReader(b), ropts)
}

// streamTrace is an adaptsched trace read once from r.
func streamTrace(name string, r io.Reader, ropts trace.ReaderOptions) *traceInput {
	in := &traceInput{name: name}
	in.open = func() (eventIter, error) {
		if in.opened {
			return nil, fmt.Errorf("replay: %s: the trace is read once", name)
		}
		in.opened = true
		rd, err := trace.NewReader(r, name, ropts)
		if err != nil {
			return nil, err
		}
		in.header = rd.Header()
		return rd, nil
	}
	return in
}

// readHeader opens in, reading its header; the scan reads on from there.
func readHeader(in *traceInput) error {
	it, err := in.open()
	if err != nil {
		return err
	}
	in.it = it
	return nil
}

// sniff tells an adaptsched trace from a Chrome trace: an adaptsched
// trace names its format on its first line; a Chrome trace is one JSON
// object with a "traceEvents" key among its top-level keys, found by
// walking them wherever it comes (it may follow megabytes of metadata).
// Anything else is read as adaptsched JSONL, whose reader names what is
// wrong.
func sniff(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("replay: %w", err)
	}
	defer f.Close()
	rb, err := input.Gunzip(f)
	if err != nil || namesTraceFormat(rb) { // a bad gzip header: the trace reader reports it
		return "jsonl", nil
	}
	if hasTopKey(rb, "traceEvents") {
		return "chrome", nil
	}
	return "jsonl", nil
}

// namesTraceFormat reports whether rb's first line, within its first
// input.PeekSize bytes, names the adaptsched trace format (peeked, not
// read).
func namesTraceFormat(rb *bufio.Reader) bool {
	first, _ := rb.Peek(input.PeekSize)
	first, _, _ = bytes.Cut(first, []byte("\n"))
	return bytes.Contains(first, []byte(`"`+trace.TraceFormat+`"`))
}

// hasTopKey reports whether r holds a JSON object with key among its
// top-level keys, skipping the values of the others token by token (in
// constant memory).
func hasTopKey(r io.Reader, key string) bool {
	dec := json.NewDecoder(r)
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return false
		}
		if k, _ := t.(string); k == key {
			return true
		}
		depth := 0
		for {
			t, err := dec.Token()
			if err != nil {
				return false
			}
			switch t {
			case json.Delim('{'), json.Delim('['):
				depth++
			case json.Delim('}'), json.Delim(']'):
				depth--
			}
			if depth == 0 {
				break
			}
		}
	}
	return false
}
