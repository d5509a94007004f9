package main

import (
	"fmt"
	"io"
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
