package history

import "testing"

// TestDefaultOptionsQuiet: a library logs only through the logger it is
// given, so the default store writes no line, not even a warning.
func TestDefaultOptionsQuiet(t *testing.T) {
	l := DefaultOptions(t.TempDir()).Logger
	if l.Error().Enabled() {
		t.Error("DefaultOptions logs: want no logger until WithLogger")
	}
}
