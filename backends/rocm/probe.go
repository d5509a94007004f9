//go:build cgo

package rocm

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// probeEnv, when set in the environment, makes a process that imports this
// package initialise rocBLAS and exit (see probeBLAS): package init runs
// the probe before main or any test.
const probeEnv = "ADAPTSCHED_ROCM_BLAS_PROBE"

// probeRequest is what the parent passes to the probe child.
type probeRequest struct {
	LibDirs []string
	Device  int
	BLAS    string // the rocBLAS path the parent loaded
}

// rocblasKernelsPresent checks that rocBLAS ships kernels for arch: files
// in <rocblas dir>/rocblas/library (or $ROCBLAS_TENSILE_LIBPATH) whose
// names contain it. It returns "" when they are there, else the reason.
func rocblasKernelsPresent(libPath, arch string) string {
	dirs := []string{filepath.Join(filepath.Dir(libPath), "rocblas", "library")}
	if env := os.Getenv("ROCBLAS_TENSILE_LIBPATH"); env != "" {
		dirs = append([]string{env}, dirs...)
	}
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if strings.Contains(e.Name(), arch) {
				return ""
			}
		}
	}
	return fmt.Sprintf("rocBLAS has no kernel library for %s in %s", arch, strings.Join(dirs, " or "))
}

// probeBLAS runs rocBLAS's first initialisation (a handle and a 2x2 GEMM)
// in a child process, this executable re-run with probeEnv set, within
// o.ProbeTimeout: rocBLAS aborts the whole process when it cannot load its
// kernels, and the child absorbs that. It returns "" on success, else why.
func probeBLAS(o Options, blasPath string) string {
	exe, err := os.Executable()
	if err != nil {
		return "rocBLAS probe: " + err.Error()
	}
	req, _ := json.Marshal(probeRequest{LibDirs: o.LibDirs, Device: o.Device, BLAS: blasPath})
	ctx, cancel := context.WithTimeout(context.Background(), o.ProbeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), probeEnv+"="+string(req))
	outb, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return fmt.Sprintf("rocBLAS probe: no answer within %v", o.ProbeTimeout)
	}
	if err != nil {
		msg := strings.TrimSpace(string(outb))
		if len(msg) > 500 {
			msg = msg[len(msg)-500:]
		}
		return fmt.Sprintf("rocBLAS probe failed (%v): %s", err, msg)
	}
	return ""
}

// runProbe is the child's side of probeBLAS; it returns the exit status.
func runProbe() int {
	var req probeRequest
	if err := json.Unmarshal([]byte(os.Getenv(probeEnv)), &req); err != nil {
		fmt.Fprintln(os.Stderr, "probe request:", err)
		return 2
	}
	o := DefaultOptions().WithLibDirs(req.LibDirs...).WithDevice(req.Device)
	l, _, reason := loadRuntime(&amdVendor, o)
	if l == nil {
		fmt.Fprintln(os.Stderr, reason)
		return 3
	}
	h, msg := dlopen(req.BLAS)
	if h == nil {
		fmt.Fprintln(os.Stderr, msg)
		return 3
	}
	if err := l.resolve(roleBLAS, h, req.BLAS); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	s := l.s
	if code := s.setDevice(req.Device); code != 0 {
		fmt.Fprintln(os.Stderr, "hipSetDevice:", code)
		return 4
	}
	handle, code := s.create(fBLASCreate)
	if code != 0 {
		fmt.Fprintln(os.Stderr, "rocblas_create_handle:", code)
		return 4
	}
	buf, code := s.malloc(3 * 16)
	if code != 0 {
		fmt.Fprintln(os.Stderr, "hipMalloc:", code)
		return 4
	}
	if code := s.blasSgemm(handle, amdVendor.opN, amdVendor.opN, 2, 2, 2, 1, buf, 2, buf+16, 2, 0, buf+32, 2); code != 0 {
		fmt.Fprintln(os.Stderr, "rocblas_sgemm:", code)
		return 4
	}
	if code := s.call(fStreamSync, 0); code != 0 {
		fmt.Fprintln(os.Stderr, "hipStreamSynchronize:", code)
		return 4
	}
	return 0
}
