package clilog

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// People get a plain line (no JSON, no ANSI colour in a file or
// a buffer), machines a JSON object when they ask.
func TestNew(t *testing.T) {
	var b bytes.Buffer
	l := New(&b, false, zerolog.InfoLevel)
	l.Warn().Str("dir", "x").Msg("history: hello")
	if got := b.String(); got != "WRN history: hello dir=x\n" {
		t.Errorf("human line %q", got)
	}
	b.Reset()
	l = New(&b, false, zerolog.WarnLevel)
	l.Info().Msg("quiet")
	if b.Len() != 0 {
		t.Errorf("info below warn printed %q", b.String())
	}
	b.Reset()
	l = New(&b, true, zerolog.InfoLevel)
	l.Warn().Msg("m")
	if got := b.String(); !strings.HasPrefix(got, `{"level":"warn","time":`) || !strings.Contains(got, `"message":"m"`) {
		t.Errorf("JSON line %q", got)
	}
}
