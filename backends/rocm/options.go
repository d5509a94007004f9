package rocm

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Platform is the vendor stack a Device runs on: HIP on AMD, or HIP's
// other platform, CUDA on NVIDIA.
type Platform uint8

// The platforms. Auto tries AMD first, then NVIDIA.
const (
	Auto Platform = iota
	AMD
	NVIDIA
)

var _ fmt.Stringer = AMD

// String returns "auto", "amd" or "nvidia".
func (p Platform) String() string {
	switch p {
	case Auto:
		return "auto"
	case AMD:
		return "amd"
	case NVIDIA:
		return "nvidia"
	}
	return fmt.Sprintf("Platform(%d)", uint8(p))
}

// Options configure Open. The zero value is not ready: start from
// DefaultOptions.
type Options struct {
	// Platform picks the vendor stack. Default Auto.
	Platform Platform
	// Device is the device index. Default 0.
	Device int
	// LibDirs are the directories searched for the vendor libraries, in
	// order. Default none: the system loader's search (LD_LIBRARY_PATH,
	// ld.so.cache).
	LibDirs []string
	// CacheDir holds compiled kernel binaries. Default
	// os.UserCacheDir()/adaptsched/kernels; "" disables the disk cache.
	CacheDir string
	// NoBLAS skips rocBLAS / cuBLAS: MatMul runs the tiled HIP kernel.
	// Default false.
	NoBLAS bool
	// ProbeTimeout bounds the child process that initialises rocBLAS once
	// before this process does (rocBLAS aborts its process when a kernel
	// library is missing). Default 60 s.
	ProbeTimeout time.Duration
}

// DefaultOptions returns the defaults: Auto platform, device 0, system
// library search, the user cache directory, BLAS on, a 60 s probe limit.
func DefaultOptions() Options {
	return Options{CacheDir: defaultCacheDir(), ProbeTimeout: 60 * time.Second}
}

// WithPlatform returns o with the platform set. Default Auto.
func (o Options) WithPlatform(p Platform) Options { o.Platform = p; return o }

// WithDevice returns o with the device index set. Default 0.
func (o Options) WithDevice(i int) Options { o.Device = i; return o }

// WithLibDirs returns o searching dirs for the vendor libraries. Default
// none (the system loader's search).
func (o Options) WithLibDirs(dirs ...string) Options {
	o.LibDirs = append([]string(nil), dirs...)
	return o
}

// WithCacheDir returns o caching kernel binaries in dir ("" disables).
// Default os.UserCacheDir()/adaptsched/kernels.
func (o Options) WithCacheDir(dir string) Options { o.CacheDir = dir; return o }

// WithNoBLAS returns o with the vendor BLAS disabled. Default false.
func (o Options) WithNoBLAS(v bool) Options { o.NoBLAS = v; return o }

// WithProbeTimeout returns o with the rocBLAS probe limit set. Default 60 s.
func (o Options) WithProbeTimeout(d time.Duration) Options { o.ProbeTimeout = d; return o }

func (o Options) validate() error {
	if o.Platform > NVIDIA {
		return fmt.Errorf("%w: platform %v", ErrOptions, o.Platform)
	}
	if o.Device < 0 {
		return fmt.Errorf("%w: device index %d is negative", ErrOptions, o.Device)
	}
	if o.ProbeTimeout <= 0 {
		return fmt.Errorf("%w: probe timeout %v must be positive", ErrOptions, o.ProbeTimeout)
	}
	return nil
}

// ParseArg reads the registry argument of "rocm:ARG": empty, a device
// index ("1"), a platform ("amd", "nvidia"), or both ("nvidia:1").
func ParseArg(arg string) (Options, error) {
	o := DefaultOptions()
	if arg == "" {
		return o, nil
	}
	for part := range strings.SplitSeq(arg, ":") {
		switch strings.ToLower(part) {
		case "amd":
			o.Platform = AMD
		case "nvidia":
			o.Platform = NVIDIA
		case "auto":
			o.Platform = Auto
		default:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 {
				return o, fmt.Errorf("%w: %q is neither a platform nor a device index", ErrOptions, part)
			}
			o.Device = i
		}
	}
	return o, nil
}

func defaultCacheDir() string {
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "adaptsched", "kernels")
}
