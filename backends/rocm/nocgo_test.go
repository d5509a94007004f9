//go:build !cgo

package rocm

import (
	"errors"
	"strings"
	"testing"

	"github.com/adaptsched/adaptsched/backends"
)

// TestOpenWithoutCgo: a cgo-free build links the backend and reports it
// unavailable, saying why, through Open and through the registry.
func TestOpenWithoutCgo(t *testing.T) {
	_, err := Open(DefaultOptions())
	var ue *backends.UnavailableError
	if !errors.As(err, &ue) || !strings.Contains(ue.Reason, "cgo") {
		t.Fatalf("Open: %v, want an UnavailableError naming cgo", err)
	}
	if _, err := backends.Open("rocm"); !errors.Is(err, backends.ErrUnavailable) {
		t.Fatalf(`backends.Open("rocm"): %v, want ErrUnavailable`, err)
	}
}
