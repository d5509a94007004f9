package hardware

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"runtime"
	"slices"
	"strings"

	"github.com/adaptsched/adaptsched/backends"
)

// Fingerprint identifies the hardware that posteriors were learned on.
// Records are scoped by its Hash: what one machine learned never silently
// applies to another (DESIGN.md § Persistence).
type Fingerprint struct {
	Hash string // 16 hex digits of SHA-256 over Desc
	Desc string // human-readable: one line per device, sorted
}

// String returns "hash (desc)".
func (f Fingerprint) String() string { return f.Hash + " (" + f.Desc + ")" }

// FingerprintOf returns the fingerprint of the devices behind infos: for
// CPUs the model, architecture and thread count; for GPUs the platform,
// product name, architecture and runtime version, as the backends report
// them. Backend names and datasheet figures are left out (renaming a
// backend or correcting a figure does not change the hardware). The order
// of infos does not matter.
func FingerprintOf(infos []backends.Info) Fingerprint {
	lines := make([]string, 0, len(infos))
	for _, in := range infos {
		if in.Kind == backends.CPU {
			lines = append(lines, fmt.Sprintf("cpu %s %s %s x%d %s", in.Platform, in.Model, in.Arch, in.Threads, in.Runtime))
		} else {
			lines = append(lines, fmt.Sprintf("%v %s %s %s %s", in.Kind, in.Platform, in.Model, in.Arch, in.Runtime))
		}
	}
	slices.Sort(lines)
	desc := strings.Join(lines, "; ")
	if desc == "" {
		desc = "no devices"
	}
	sum := sha256.Sum256([]byte(desc))
	return Fingerprint{Hash: hex.EncodeToString(sum[:8]), Desc: desc}
}

// HostFingerprint returns a fingerprint of the host alone (OS, GOARCH,
// logical CPUs), the default when the caller gives none.
func HostFingerprint() Fingerprint {
	return FingerprintOf([]backends.Info{{
		Kind: backends.CPU, Platform: "host", Model: runtime.GOOS + "/" + runtime.GOARCH,
		Arch: runtime.GOARCH, Threads: runtime.NumCPU(),
	}})
}
