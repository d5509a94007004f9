package rocm

import (
	"errors"
	"testing"
)

func TestParseArg(t *testing.T) {
	for _, c := range []struct {
		arg  string
		p    Platform
		dev  int
		fail bool
	}{
		{"", Auto, 0, false}, {"1", Auto, 1, false}, {"nvidia", NVIDIA, 0, false},
		{"amd:2", AMD, 2, false}, {"NVIDIA:3", NVIDIA, 3, false}, {"-1", 0, 0, true}, {"gpu", 0, 0, true},
	} {
		o, err := ParseArg(c.arg)
		if (err != nil) != c.fail || (!c.fail && (o.Platform != c.p || o.Device != c.dev)) {
			t.Errorf("ParseArg(%q) = %v %d, %v", c.arg, o.Platform, o.Device, err)
		}
		if c.fail && !errors.Is(err, ErrOptions) {
			t.Errorf("ParseArg(%q): %v, want ErrOptions", c.arg, err)
		}
	}
}

func FuzzParseArg(f *testing.F) {
	for _, s := range []string{"", "1", "amd:0", "nvidia:12", "x:y", "::"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, arg string) {
		o, err := ParseArg(arg)
		if err != nil {
			if !errors.Is(err, ErrOptions) {
				t.Fatalf("error %v does not wrap ErrOptions", err)
			}
			return
		}
		if verr := o.validate(); verr != nil {
			t.Fatalf("ParseArg(%q) accepted options that validate rejects: %v", arg, verr)
		}
	})
}

func TestPlatformString(t *testing.T) {
	if AMD.String() != "amd" || NVIDIA.String() != "nvidia" || Platform(9).String() != "Platform(9)" {
		t.Error("Platform.String")
	}
}

func TestValidate(t *testing.T) {
	bad := []Options{DefaultOptions().WithDevice(-1), DefaultOptions().WithPlatform(7), DefaultOptions().WithProbeTimeout(0)}
	for _, o := range bad {
		if _, err := Open(o); !errors.Is(err, ErrOptions) {
			t.Errorf("Open(%+v): %v, want ErrOptions", o, err)
		}
	}
}
