// Package clilog builds the commands' loggers: readable lines for people
// (no JSON; colour only when the writer is a terminal; no timestamp, since
// a person reads them as they come), and JSON lines, one object each with
// a timestamp, for machines that ask for them (the commands' -log-json).
//
// # Usage
//
//	log.Logger = clilog.New(os.Stderr, *logJSON, zerolog.WarnLevel)
//	cfg.Logger = clilog.Slog(log.Logger) // the scheduler and executor log through slog
package clilog

import (
	"context"
	"io"
	"log/slog"
	"os"
	"slices"

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

// Slog returns a log/slog logger that writes through l, so that packages
// kept free of zerolog (the backends: a library should not choose its
// caller's logging) log into the command's lines. Attributes become
// fields; slog's levels map to zerolog's (Debug, Info, Warn, Error).
func Slog(l zerolog.Logger) *slog.Logger {
	return slog.New(zerologHandler{l: l})
}

type zerologHandler struct {
	l     zerolog.Logger
	attrs []slog.Attr
	group string // the groups opened, each followed by "."
}

func zerologLevel(l slog.Level) zerolog.Level {
	switch {
	case l >= slog.LevelError:
		return zerolog.ErrorLevel
	case l >= slog.LevelWarn:
		return zerolog.WarnLevel
	case l >= slog.LevelInfo:
		return zerolog.InfoLevel
	}
	return zerolog.DebugLevel
}

func (h zerologHandler) Enabled(_ context.Context, l slog.Level) bool {
	return zerologLevel(l) >= h.l.GetLevel() && zerologLevel(l) >= zerolog.GlobalLevel()
}

func (h zerologHandler) Handle(_ context.Context, r slog.Record) error {
	e := h.l.WithLevel(zerologLevel(r.Level))
	for _, a := range h.attrs {
		e = e.Interface(a.Key, a.Value.Resolve().Any())
	}
	r.Attrs(func(a slog.Attr) bool {
		e = e.Interface(h.group+a.Key, a.Value.Resolve().Any())
		return true
	})
	e.Msg(r.Message)
	return nil
}

// WithAttrs keeps as qualified by the groups opened so far: a group
// qualifies the attributes added after it only (TestSlogGroups).
func (h zerologHandler) WithAttrs(as []slog.Attr) slog.Handler {
	h.attrs = slices.Clip(h.attrs)
	for _, a := range as {
		a.Key = h.group + a.Key
		h.attrs = append(h.attrs, a)
	}
	return h
}

// WithGroup opens group name: later keys read "name.key". An empty name
// opens none, as slog.Handler says.
func (h zerologHandler) WithGroup(name string) slog.Handler {
	if name != "" {
		h.group += name + "."
	}
	return h
}
