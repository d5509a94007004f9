//go:build cgo

package rocm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/adaptsched/adaptsched/kernels/hip"
)

// kernelPrograms maps each kernel name to the program declaring it.
var kernelPrograms = sync.OnceValue(func() map[string]string {
	m := map[string]string{}
	for _, p := range hip.Programs() {
		src, err := hip.Source(p)
		if err != nil {
			continue
		}
		for _, k := range hip.Kernels(src) {
			m[k] = p
		}
	}
	return m
})

// compileOptions are the compiler flags for arch on platform p: the full
// gcnArchName (target features included) for hiprtc, sm_XY for nvrtc,
// which then emits a cubin for that architecture.
func compileOptions(p Platform, arch string) []string {
	if p == NVIDIA {
		return []string{"--gpu-architecture=" + arch}
	}
	return []string{"--gpu-architecture=" + arch, "-O3"}
}

// cacheKey names a program's binary: architecture and the SHA-256 of the
// source and flags.
func cacheKey(arch, src string, opts []string) string {
	h := sha256.Sum256([]byte(src + "\x00" + strings.Join(opts, "\x00")))
	return strings.ReplaceAll(arch, ":", "_") + "-" + hex.EncodeToString(h[:]) + ".bin"
}

// compileProgram compiles one program of kernels/hip for arch, reading and
// filling the disk cache in cacheDir ("" for none). A failed cache write
// only costs a compile next time, so it is not an error.
func compileProgram(s *shim, p Platform, arch, prog, cacheDir string) ([]byte, error) {
	src, err := hip.Source(prog)
	if err != nil {
		return nil, err
	}
	opts := compileOptions(p, arch)
	var path string
	if cacheDir != "" {
		path = filepath.Join(cacheDir, cacheKey(arch, src, opts))
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return b, nil
		}
	}
	code, log, status := s.compile(src, prog, opts)
	if status != 0 {
		return nil, fmt.Errorf("%w: %s for %s: status %d: %s", ErrCompile, prog, arch, status, strings.TrimSpace(log))
	}
	if path != "" {
		writeCache(path, code)
	}
	return code, nil
}

func writeCache(path string, b []byte) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return
	}
	_, werr := f.Write(b)
	cerr := f.Close()
	if werr != nil || cerr != nil || os.Rename(f.Name(), path) != nil {
		os.Remove(f.Name())
	}
}

// function returns kernel's handle, compiling and loading its program at
// first use (under do).
func (d *Device) function(kernel string) (uintptr, error) {
	if f, ok := d.functions[kernel]; ok {
		return f, nil
	}
	prog, ok := kernelPrograms()[kernel]
	if !ok {
		return 0, fmt.Errorf("%w: %s", errNoKernel, kernel)
	}
	if err := d.bind(); err != nil {
		return 0, err
	}
	mod, ok := d.modules[prog]
	if !ok {
		image, err := compileProgram(d.s, d.v.platform, d.arch, prog, d.opts.CacheDir)
		if err != nil {
			return 0, err
		}
		m, code := d.s.moduleLoad(image)
		if err := d.check(fModuleLoad, code); err != nil {
			return 0, fmt.Errorf("%s: %w", prog, err)
		}
		d.modules[prog], mod = m, m
	}
	f, code := d.s.moduleFunction(mod, kernel)
	if err := d.check(fModuleFunction, code); err != nil {
		return 0, fmt.Errorf("%s: %w", kernel, err)
	}
	d.functions[kernel] = f
	return f, nil
}
