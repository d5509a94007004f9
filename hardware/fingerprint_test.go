package hardware

import (
	"testing"

	"github.com/adaptsched/adaptsched/backends"
)

// TestFingerprintOf: the fingerprint names the devices, not the order
// they are given in nor the names or datasheet figures of their
// backends; another runtime version is other hardware.
func TestFingerprintOf(t *testing.T) {
	cpu := backends.Info{Name: "cpu", Kind: backends.CPU, Platform: "host", Model: "Test CPU", Arch: "amd64", Threads: 8}
	gpu := backends.Info{Name: "rocm", Kind: backends.GPU, Platform: "amd", Model: "MI300X", Arch: "gfx942", Runtime: "hip 6.2"}
	a := FingerprintOf([]backends.Info{cpu, gpu})
	renamed := gpu
	renamed.Name, renamed.Nominal.GFLOPS = "gpu0", 1e5
	if b := FingerprintOf([]backends.Info{renamed, cpu}); b != a {
		t.Errorf("reordered and renamed: %v, want %v", b, a)
	}
	newer := gpu
	newer.Runtime = "hip 6.3"
	if c := FingerprintOf([]backends.Info{cpu, newer}); c.Hash == a.Hash {
		t.Errorf("another runtime kept the fingerprint %v", c)
	}
	if want := "cpu host Test CPU amd64 x8 ; gpu amd MI300X gfx942 hip 6.2"; len(a.Hash) != 16 || a.Desc != want {
		t.Errorf("fingerprint %v: want 16 hex digits and %q", a, want)
	}
	if FingerprintOf(nil).Desc != "no devices" {
		t.Errorf("no devices: %v", FingerprintOf(nil))
	}
}
