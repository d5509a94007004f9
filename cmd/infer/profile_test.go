package main

import (
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCPUProfile checks that -cpuprofile writes a profile (pprof's format:
// a gzipped protocol buffer, non-empty),
// and that a path that cannot be created is one error naming the flag,
// before anything runs.
func TestCPUProfile(t *testing.T) {
	base := []string{"-backends", "cpu", "-tokens", "2", "-prompt", "1", "-json",
		"-dim", "64", "-layers", "1", "-heads", "4", "-kv-heads", "2", "-ffn", "64", "-vocab", "50", "-ctx", "8"}
	path := filepath.Join(t.TempDir(), "cpu.prof")
	if err := run(context.Background(), append(base, "-cpuprofile", path), io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("the profile is not gzipped: %v", err)
	}
	if b, err := io.ReadAll(z); err != nil || len(b) == 0 {
		t.Fatalf("the profile: %d bytes, %v", len(b), err)
	}
	bad := filepath.Join(t.TempDir(), "missing", "cpu.prof")
	err = run(context.Background(), append(base, "-cpuprofile", bad), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "-cpuprofile") || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("error %v, want one naming -cpuprofile and the cause", err)
	}
}
