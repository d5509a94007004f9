// Package clilog builds the commands' loggers: readable lines for people
// (no JSON; colour only when the writer is a terminal; no timestamp, since
// a person reads them as they come), and JSON lines, one object each with
// a timestamp, for machines that ask for them (the commands' -log-json).
//
// # Usage
//
//	log.Logger = clilog.New(os.Stderr, *logJSON, zerolog.WarnLevel)
package clilog

import (
	"io"
	"os"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
)

// New returns a logger writing to w at level: JSON lines when json is
// true, otherwise zerolog's console format ("WRN message key=value"),
// coloured only when w is a terminal.
func New(w io.Writer, json bool, level zerolog.Level) zerolog.Logger {
	if json {
		return zerolog.New(w).Level(level).With().Timestamp().Logger()
	}
	return zerolog.New(zerolog.ConsoleWriter{
		Out:          w,
		NoColor:      !Terminal(w),
		PartsExclude: []string{zerolog.TimestampFieldName},
	}).Level(level)
}

// Terminal reports whether w is a terminal.
func Terminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}
