package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// testName matches a test, benchmark or fuzz target's name, and a * or
// { after it: such a name is a prefix (`TestGPU*`,
// `BenchmarkGPUGathered{Direct,Executor}`). A single letter after Test,
// Benchmark or Fuzz is a placeholder (`BenchmarkX/y-2`), not a name.
var testName = regexp.MustCompile(`\b((?:Test|Benchmark|Fuzz)[A-Z0-9_]\w+)([*{]?)`)

// TestNamesRealTests: every test, benchmark or fuzz target that a Go
// comment, the README, BENCHMARKS.md or a file of docs/ names is a
// function of the repository's tests. Reason: a comment names the test
// or benchmark that holds its rule or figure (CONVENTIONS.md), and a
// renamed or never-written test leaves it pointing at nothing.
func TestNamesRealTests(t *testing.T) {
	defined := map[string]bool{}
	type ref struct{ name, where string }
	var refs []ref
	note := func(text, where string) {
		for _, m := range testName.FindAllStringSubmatch(text, -1) {
			name := m[1]
			if m[2] != "" {
				name += "*"
			}
			refs = append(refs, ref{name, where})
		}
	}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if strings.HasSuffix(name, "_test.go") {
			for _, decl := range f.Decls {
				if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil && testName.MatchString(fn.Name.Name) {
					defined[fn.Name.Name] = true
				}
			}
		}
		for _, g := range f.Comments {
			for _, c := range g.List {
				note(c.Text, fset.Position(c.Slash).String())
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*"))
	for _, f := range append([]string{filepath.Join(root, "README.md"), filepath.Join(root, "BENCHMARKS.md")}, docs...) {
		if !strings.HasSuffix(f, ".md") && !strings.HasSuffix(f, ".csv") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			note(line, f+":"+strconv.Itoa(i+1))
		}
	}
	if len(defined) == 0 || len(refs) == 0 {
		t.Fatalf("%d test functions and %d names found: the walk read nothing", len(defined), len(refs))
	}
	for _, r := range refs {
		if prefix, ok := strings.CutSuffix(r.name, "*"); ok {
			if !anyPrefixed(defined, prefix) {
				t.Errorf("%s: no test starts with %s", r.where, prefix)
			}
		} else if !defined[r.name] {
			t.Errorf("%s: names %s, which no test file defines", r.where, r.name)
		}
	}
}

func anyPrefixed(set map[string]bool, prefix string) bool {
	for k := range set {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}
