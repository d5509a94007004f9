// Package docs holds the design document and the conventions; its tests
// check the repository against them: that it stands alone (nothing it
// links or reads lies outside it, and make demo, ops, bench and test do
// not stop where a Debian package cannot be installed), its licences,
// its layering, and that comments and docs name code that exists.
package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the repository, seen from docs/.
const root = ".."

var link = regexp.MustCompile(`\]\(([^)#\s]+)`)

// TestLinksInRepo: the README and the docs link only files the
// repository holds (the README linked ../shared/DESIGN.md).
func TestLinksInRepo(t *testing.T) {
	files := []string{filepath.Join(root, "README.md")}
	more, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files = append(files, more...)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "../shared") {
			t.Errorf("%s names ../shared, outside the repository", f)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") {
				continue
			}
			p := filepath.Join(filepath.Dir(f), target)
			if rel, err := filepath.Rel(root, p); err != nil || strings.HasPrefix(rel, "..") {
				t.Errorf("%s links %s, outside the repository", f, target)
			} else if _, err := os.Stat(p); err != nil {
				t.Errorf("%s links %s: %v", f, target, err)
			}
		}
	}
}

// TestNoOutsideFixtures: no test reads a file outside the repository
// (history's Chrome tests read ../../shared/data/traces).
func TestNoOutsideFixtures(t *testing.T) {
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, "_test.go") || strings.HasSuffix(p, "standalone_test.go") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), "shared/data") {
			t.Errorf("%s reads shared/data, outside the repository: keep fixtures in testdata/", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDemoNeedsOnlyGo: make demo, ops, bench and test do not depend on
// deps (which fails where a Debian package is missing and cannot be
// installed), which stopped them on macOS, Fedora and as a non-root user;
// make test first runs testdeps, which installs what it can and goes on.
func TestDemoNeedsOnlyGo(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	prereqs := map[string][]string{}
	for _, l := range strings.Split(string(b), "\n") {
		name, rest, ok := strings.Cut(l, ":")
		if !ok || strings.ContainsAny(name, " \t$=") || strings.HasPrefix(rest, "=") {
			continue
		}
		prereqs[name] = strings.Fields(rest)
	}
	for _, target := range []string{"demo", "ops", "bench", "test"} {
		p, ok := prereqs[target]
		if !ok {
			t.Errorf("no %s target", target)
		}
		for _, q := range p {
			if q == "deps" {
				t.Errorf("make %s depends on deps", target)
			}
		}
	}
	if p := prereqs["test"]; len(p) == 0 || p[0] != "testdeps" {
		t.Errorf("make test's prerequisites %v, want testdeps first", p)
	}
}
