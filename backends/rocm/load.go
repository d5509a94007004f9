//go:build cgo

package rocm

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"unsafe"
)

// loaded is a vendor whose libraries are open and whose function table is
// resolved; blasReason says why it has no BLAS, when it has none.
type loaded struct {
	v          *vendor
	s          *shim
	paths      [numRoles]string
	blasReason string
}

// openLib tries each candidate of role r and records every failure.
func openLib(v *vendor, r libRole, dirs []string) (unsafe.Pointer, string, []string) {
	var tried []string
	for _, p := range v.candidates(r, dirs) {
		h, msg := dlopen(p)
		if h != nil {
			return h, p, tried
		}
		tried = append(tried, fmt.Sprintf("%s (%s)", p, msg))
	}
	return nil, "", tried
}

// resolve fills the table's entries of role r from lib.
func (l *loaded) resolve(r libRole, lib unsafe.Pointer, path string) error {
	for _, sym := range l.v.syms {
		if sym.role != r {
			continue
		}
		ok := false
		for _, name := range sym.names {
			if l.s.sym(sym.f, lib, name) {
				ok = true
				break
			}
		}
		if !ok && !sym.optional {
			return fmt.Errorf("%s: symbol %s not found", path, strings.Join(sym.names, " or "))
		}
	}
	return nil
}

// unavailable builds the reason of a failed load.
func unavailable(v *vendor, what string, tried []string) string {
	return fmt.Sprintf("%s: no %s library: tried %s", v.platform, what, strings.Join(tried, "; "))
}

// loadRuntime opens the runtime (and, on NVIDIA, the driver) and counts
// devices. It touches nothing else: with no device, the compiler, BLAS and
// modules are never loaded.
func loadRuntime(v *vendor, o Options) (*loaded, int, string) {
	l := &loaded{v: v, s: newShim()}
	h, path, tried := openLib(v, roleRuntime, o.LibDirs)
	if h == nil {
		return nil, 0, unavailable(v, roleNames[roleRuntime], tried)
	}
	l.paths[roleRuntime] = path
	if err := l.resolve(roleRuntime, h, path); err != nil {
		return nil, 0, fmt.Sprintf("%s: %v", v.platform, err)
	}
	if len(v.libs[roleDriver]) > 0 {
		dh, dpath, dtried := openLib(v, roleDriver, o.LibDirs)
		if dh == nil {
			return nil, 0, unavailable(v, roleNames[roleDriver], dtried)
		}
		l.paths[roleDriver] = dpath
		if err := l.resolve(roleDriver, dh, dpath); err != nil {
			return nil, 0, fmt.Sprintf("%s: %v", v.platform, err)
		}
	}
	n, code := l.s.deviceCount()
	switch {
	case slices.Contains(v.noDevice, code):
		return nil, 0, fmt.Sprintf("%s: no device: %s returned %d (%s) [%s]", v.platform, v.syms[0].names[0], code, l.s.errorString(code), path)
	case code != 0:
		return nil, 0, fmt.Sprintf("%s: %s returned %d (%s) [%s]", v.platform, v.syms[0].names[0], code, l.s.errorString(code), path)
	case n == 0:
		return nil, 0, fmt.Sprintf("%s: no device: %s found 0 [%s]", v.platform, v.syms[0].names[0], path)
	case o.Device >= n:
		return nil, 0, fmt.Sprintf("%s: device %d requested, %d present", v.platform, o.Device, n)
	}
	return l, n, ""
}

// loadCompiler resolves the runtime compiler: its own library, or (ROCm
// 5) the hiprtc symbols inside the runtime.
func (l *loaded) loadCompiler(dirs []string) string {
	h, path, tried := openLib(l.v, roleRTC, dirs)
	if h != nil {
		l.paths[roleRTC] = path
		if err := l.resolve(roleRTC, h, path); err != nil {
			return fmt.Sprintf("%s: %v", l.v.platform, err)
		}
		return ""
	}
	if l.v.rtcInRuntime && l.paths[roleRuntime] != "" {
		rh, _ := dlopen(l.paths[roleRuntime])
		if rh != nil && l.resolve(roleRTC, rh, l.paths[roleRuntime]) == nil {
			l.paths[roleRTC] = l.paths[roleRuntime]
			return ""
		}
		tried = append(tried, l.paths[roleRuntime]+" (no hiprtc symbols)")
	}
	return unavailable(l.v, roleNames[roleRTC], tried)
}

// loadBLAS opens the vendor BLAS; a failure only records why MatMul will
// run the tiled kernel.
func (l *loaded) loadBLAS(dirs []string) bool {
	h, path, tried := openLib(l.v, roleBLAS, dirs)
	if h == nil {
		l.blasReason = unavailable(l.v, roleNames[roleBLAS], tried)
		return false
	}
	if err := l.resolve(roleBLAS, h, path); err != nil {
		l.blasReason = err.Error()
		return false
	}
	l.paths[roleBLAS] = path
	return true
}

// scanArch finds gcnArchName ("gfx90a:sramecc+:xnack-") in a
// hipDeviceProp_t of any layout: the first string after name[256] that
// starts with "gfx" and a digit. Scanning avoids hard-coding the offset,
// which moved between ROCm 5 (R0000) and ROCm 6 (R0600).
func scanArch(props []byte) string {
	for i := 256; i+4 <= len(props); i++ {
		if props[i] == 'g' && bytes.HasPrefix(props[i:], []byte("gfx")) && props[i+3] >= '0' && props[i+3] <= '9' {
			end := bytes.IndexByte(props[i:], 0)
			if end < 0 {
				end = len(props) - i
			}
			return string(props[i : i+end])
		}
	}
	return ""
}

// baseArch drops the target features: "gfx90a:sramecc+:xnack-" → "gfx90a".
func baseArch(a string) string {
	base, _, _ := strings.Cut(a, ":")
	return base
}
