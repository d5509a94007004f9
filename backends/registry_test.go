package backends_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

// argError carries the argument a factory received, so that tests see how
// Open split the name.
type argError struct{ arg string }

func (e argError) Error() string { return "arg " + e.arg }

func argFactory(arg string) (backends.Backend, error) { return nil, argError{arg} }

// mustPanic returns the panic value of f, failing the test when f returns.
func mustPanic(t *testing.T, what string, f func()) (v any) {
	t.Helper()
	defer func() { v = recover() }()
	f()
	t.Fatalf("%s: no panic", what)
	return nil
}

// CONVENTIONS.md § 1: Register panics on a nil factory, an empty or
// duplicate name (and a name with ':', which Open could never reach).
// registerOnce registers each of names with argFactory unless an earlier
// run of the tests in this process did (go test -count=2): the registry
// is global, and a second Register of a name panics.
func registerOnce(names ...string) {
	for _, n := range names {
		if !slices.Contains(backends.Drivers(), n) {
			backends.Register(n, argFactory)
		}
	}
}

func TestRegisterPanics(t *testing.T) {
	registerOnce("test-reg-dup")
	cases := []struct {
		what, name string
		f          backends.Factory
		msg        string
	}{
		{"nil factory", "test-reg-nil", nil, "factory is nil"},
		{"empty name", "", argFactory, `name "" is empty`},
		{"colon", "test:reg", argFactory, `"test:reg" is empty or contains ':'`},
		{"duplicate", "test-reg-dup", argFactory, "twice for test-reg-dup"},
	}
	for _, c := range cases {
		v := mustPanic(t, c.what, func() { backends.Register(c.name, c.f) })
		if s := fmt.Sprint(v); !strings.Contains(s, c.msg) {
			t.Errorf("%s: panic %q, want it to contain %q", c.what, s, c.msg)
		}
	}
	for _, n := range []string{"test-reg-nil", "", "test:reg"} {
		if slices.Contains(backends.Drivers(), n) {
			t.Errorf("rejected name %q was registered", n)
		}
	}
}

func TestDriversSorted(t *testing.T) {
	registerOnce("test-sort-c", "test-sort-a", "test-sort-b")
	d := backends.Drivers()
	if !slices.IsSorted(d) {
		t.Fatalf("Drivers() = %v, not sorted", d)
	}
	i := slices.Index(d, "test-sort-a")
	if i < 0 || i+2 >= len(d) || d[i+1] != "test-sort-b" || d[i+2] != "test-sort-c" {
		t.Fatalf("Drivers() = %v, want test-sort-a, -b, -c adjacent", d)
	}
	// The caller owns the slice: changing it must not change the registry.
	d[i] = "zzz"
	if backends.Drivers()[i] != "test-sort-a" {
		t.Fatal("Drivers() returned the registry's own storage")
	}
}

func TestOpenUnknown(t *testing.T) {
	registerOnce("test-unknown")
	_, err := backends.Open("nope")
	want := `backends: unknown backend "nope" (registered: ` + strings.Join(backends.Drivers(), ", ") + ")"
	if !strings.Contains(want, "test-unknown") {
		t.Fatalf("Drivers() = %v: test-unknown is not registered", backends.Drivers())
	}
	if err == nil || err.Error() != want || !errors.Is(err, backends.ErrUnknownBackend) {
		t.Fatalf("Open(\"nope\") error = %v, want %q wrapping ErrUnknownBackend", err, want)
	}
	// The driver part alone names the backend.
	_, err = backends.Open("nope:arg")
	if err == nil || err.Error() != want {
		t.Fatalf("Open(\"nope:arg\") error = %v, want %q", err, want)
	}
}

func TestOpenSplitsArg(t *testing.T) {
	registerOnce("test-split")
	for name, want := range map[string]string{
		"test-split":          "",
		"test-split:":         "",
		"test-split:mi300x":   "mi300x",
		"test-split:a:b":      "a:b", // only the first ':' splits
		"test-split:with spc": "with spc",
	} {
		_, err := backends.Open(name)
		var ae argError
		if !errors.As(err, &ae) || ae.arg != want {
			t.Errorf("Open(%q): factory got %v, want arg %q", name, err, want)
		}
	}
}

// An UnavailableError with NeedsParam is both ErrUnavailable
// and ErrNeedsParam; without, only ErrUnavailable; with a Cause, that too,
// its text unchanged.
func TestNeedsParam(t *testing.T) {
	var err error = &backends.UnavailableError{Backend: "sim", Reason: "no profile", NeedsParam: true}
	if !errors.Is(err, backends.ErrUnavailable) || !errors.Is(err, backends.ErrNeedsParam) {
		t.Errorf("%v: want ErrUnavailable and ErrNeedsParam", err)
	}
	err = &backends.UnavailableError{Backend: "rocm", Reason: "no library"}
	if !errors.Is(err, backends.ErrUnavailable) || errors.Is(err, backends.ErrNeedsParam) {
		t.Errorf("%v: want ErrUnavailable only", err)
	}
	cause := errors.New("no such profile")
	err = &backends.UnavailableError{Backend: "sim:x", Reason: cause.Error(), Cause: cause}
	if !errors.Is(err, backends.ErrUnavailable) || !errors.Is(err, cause) || errors.Is(err, backends.ErrNeedsParam) ||
		err.Error() != "backends: sim:x unavailable: no such profile" {
		t.Errorf("%v: want ErrUnavailable and its cause, the reason its text", err)
	}
}

// TestDescribed: a described backend reports its Info, accepts every op
// and runs nothing, with ErrUnsupported naming it.
func TestDescribed(t *testing.T) {
	info := backends.Info{Name: "gpu", Kind: backends.GPU, Nominal: backends.Nominal{GFLOPS: 1000}}
	b := backends.Described(info)
	if b.Info() != info {
		t.Errorf("Info() = %+v, want %+v", b.Info(), info)
	}
	spec := kernels.Spec{Op: kernels.Add, DType: kernels.F32, In: []kernels.Shape{{4}, {4}}}
	if err := b.Supports(spec); err != nil {
		t.Errorf("Supports: %v", err)
	}
	if _, err := b.Run(spec, nil, nil); !errors.Is(err, backends.ErrUnsupported) || !strings.Contains(err.Error(), "gpu") {
		t.Errorf("Run: %v, want ErrUnsupported naming gpu", err)
	}
	if _, err := b.Alloc(4); !errors.Is(err, backends.ErrUnsupported) {
		t.Errorf("Alloc: %v", err)
	}
}
