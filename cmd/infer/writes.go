package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/trace"
)

// traceErr names the trace file in a write error.
func traceErr(path string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("infer: trace %s: %w", path, err)
}

// stickyWriter keeps the first write error, so that every write to
// stdout (tokens, summary, table) reaches the exit code; after one it
// writes nothing more.
type stickyWriter struct {
	w   io.Writer
	err error
}

func (s *stickyWriter) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.w.Write(p)
	s.err = err
	return n, err
}

// failed returns the first write error, naming it as the output's.
func (s *stickyWriter) failed() error {
	if s.err == nil {
		return nil
	}
	return fmt.Errorf("infer: writing the output: %w", s.err)
}

// openTrace creates path and a Recorder writing to it for the backends
// infos. closeTrace closes the Recorder, then the file, and names path in
// any error of either (TestWriteErrorsReachExit).
func openTrace(path string, infos []backends.Info) (rec *trace.Recorder, closeTrace func() error, err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, err
	}
	if rec, err = trace.NewRecorder(f, trace.Header{Created: time.Now(), Backends: infos}, trace.RecorderOptions{}); err != nil {
		return nil, nil, errors.Join(traceErr(path, err), traceErr(path, f.Close()))
	}
	return rec, func() error { return errors.Join(traceErr(path, rec.Close()), traceErr(path, f.Close())) }, nil
}
