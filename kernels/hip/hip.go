// Package hip holds the GPU kernel sources of adaptsched's catalogue ops:
// plain HIP C++ that hiprtc compiles for AMD GPUs and nvrtc compiles,
// unchanged, for NVIDIA GPUs. backends/rocm compiles them at first use.
//
// common.hip holds device helpers only and is prepended to every other
// source before compiling (see [Source]); each other file is one program.
// Kernels are declared extern "C" so that their names survive compiling.
//
// # Usage
//
//	src, err := hip.Source("reduce.hip") // common.hip + reduce.hip
//	names := hip.Kernels(src)             // softmax_f32, rmsnorm_f32, ...
package hip

import (
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"
)

// Sources holds every .hip file of this folder.
//
//go:embed *.hip
var Sources embed.FS

// Common is the file of shared device helpers prepended to every program.
const Common = "common.hip"

// Programs returns the names of the compilable sources (every .hip file
// but Common), sorted. The caller owns the returned slice.
func Programs() []string {
	entries, _ := fs.ReadDir(Sources, ".")
	var out []string
	for _, e := range entries {
		if n := e.Name(); strings.HasSuffix(n, ".hip") && n != Common {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// Source returns the full text of program name: Common followed by the
// file. It fails for a name that is not one of Programs.
func Source(name string) (string, error) {
	if name == Common || !strings.HasSuffix(name, ".hip") {
		return "", fmt.Errorf("hip: %q is not a kernel program", name)
	}
	common, err := Sources.ReadFile(Common)
	if err != nil {
		return "", fmt.Errorf("hip: %w", err)
	}
	body, err := Sources.ReadFile(name)
	if err != nil {
		return "", fmt.Errorf("hip: %w", err)
	}
	return string(common) + "\n#line 1 \"" + name + "\"\n" + string(body), nil
}

var kernelDecl = regexp.MustCompile(`extern "C" __global__ void (\w+)\(`)

// Kernels returns the names of the extern "C" kernels declared in src, in
// order of appearance.
func Kernels(src string) []string {
	var out []string
	for _, m := range kernelDecl.FindAllStringSubmatch(src, -1) {
		out = append(out, m[1])
	}
	return out
}

// Program returns the program that declares kernel, or "" if none does.
func Program(kernel string) string {
	for _, p := range Programs() {
		src, err := Source(p)
		if err == nil && slices.Contains(Kernels(src), kernel) {
			return p
		}
	}
	return ""
}
