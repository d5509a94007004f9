package flagdoc

import (
	"slices"
	"testing"
)

// TestUndocumented: a flag counts as named only as a whole -name, not as
// part of a longer flag or word; a usage without flags is an error.
func TestUndocumented(t *testing.T) {
	usage := "  -fleet string\n    \tshare\n  -fleet-dir string\n    \tdir\n  -v\tverbose\n"
	for _, c := range []struct {
		doc  string
		want []string
	}{
		{"infer [-fleet URL] [-fleet-dir DIR] [-v]", nil},
		{"infer [-fleet-dir DIR] [-v]", []string{"fleet"}},
		{"infer -fleet URL, -fleet-directory, -verbose", []string{"fleet-dir", "v"}},
		{"(-v) -fleet-dir, -fleet.", nil},
	} {
		got, err := Undocumented(c.doc, usage)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("Undocumented(%q) = %v, %v; want %v", c.doc, got, err, c.want)
		}
	}
	if _, err := Undocumented("anything", "usage: infer\n"); err == nil {
		t.Error("a usage without flags passed")
	}
}
