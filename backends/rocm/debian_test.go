//go:build cgo

package rocm

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels/hip"
)

// debianHIP is the runtime of Debian's libamdhip64-5 (make ci installs
// it; a user's make test does not); it carries hiprtc inside.
const debianHIP = "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5"

// requireLibs says that the runtime libraries the tests load must be
// present (make ci sets it): a missing one fails the test, not skips it.
const requireLibs = "ADAPTSCHED_REQUIRE_LIBS"

func needDebianHIP(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(debianHIP); err != nil {
		if os.Getenv(requireLibs) == "1" {
			t.Fatalf("%s=1 but Debian's libamdhip64-5 is not installed: %v", requireLibs, err)
		}
		t.Skipf("Debian's libamdhip64-5 is not installed (make ci installs it): %v", err)
	}
}

// TestDebianHIPNoDevice loads the real HIP runtime on a machine without an
// AMD GPU: Open must answer unavailable with the runtime's reason, not
// crash.
func TestDebianHIPNoDevice(t *testing.T) {
	needDebianHIP(t)
	if os.Getenv("ADAPTSCHED_EXPECT_AMD_GPU") != "" {
		t.Skip("an AMD GPU is expected on this machine")
	}
	_, err := Open(DefaultOptions().WithPlatform(AMD).WithLibDirs("/usr/lib/x86_64-linux-gnu"))
	var ue *backends.UnavailableError
	if !errors.As(err, &ue) {
		t.Fatalf("Open: %v, want unavailable", err)
	}
	if !strings.Contains(ue.Reason, debianHIP) || !strings.Contains(ue.Reason, "hipGetDeviceCount") {
		t.Errorf("reason %q: want the runtime's path and its device count answer", ue.Reason)
	}
	t.Log(ue.Reason)
}

const compileArchEnv = "ADAPTSCHED_TEST_COMPILE_ARCH"

// TestKernelsCompileHiprtc compiles every kernel program with Debian's real
// hiprtc for each architecture, one child process per architecture:
// hiprtc 5.2 aborts its process for an architecture it does not know.
func TestKernelsCompileHiprtc(t *testing.T) {
	needDebianHIP(t)
	for _, arch := range []string{"gfx90a", "gfx908", "gfx1030"} {
		t.Run(arch, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperCompile$", "-test.v")
			cmd.Env = append(os.Environ(), compileArchEnv+"="+arch)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("compile child for %s: %v\n%s", arch, err, out)
			}
			for _, p := range hip.Programs() {
				if !bytes.Contains(out, []byte(fmt.Sprintf("compiled %s for %s: ELF", p, arch))) {
					t.Errorf("%s: no code object for %s:\n%s", arch, p, out)
				}
			}
		})
	}
}

// TestHelperCompile is the child of TestKernelsCompileHiprtc.
func TestHelperCompile(t *testing.T) {
	arch := os.Getenv(compileArchEnv)
	if arch == "" {
		t.Skip("child process of TestKernelsCompileHiprtc only")
	}
	l := &loaded{v: &amdVendor, s: newShim()}
	h, msg := dlopen(debianHIP)
	if h == nil {
		t.Fatal(msg)
	}
	l.paths[roleRuntime] = debianHIP
	if r := l.loadCompiler([]string{t.TempDir()}); r != "" {
		t.Fatal(r)
	}
	for _, p := range hip.Programs() {
		code, err := compileProgram(l.s, AMD, arch, p, "")
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if !bytes.HasPrefix(code, []byte("\x7fELF")) {
			t.Fatalf("%s: %d bytes, not an ELF code object", p, len(code))
		}
		src, _ := hip.Source(p)
		for _, k := range hip.Kernels(src) {
			if !bytes.Contains(code, []byte(k)) {
				t.Errorf("%s: kernel %s missing from the code object", p, k)
			}
		}
		t.Logf("compiled %s for %s: ELF, %d bytes", p, arch, len(code))
	}
}
