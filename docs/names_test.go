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

// Rule: a comment names code that exists. Reason: comments name the test
// or benchmark that holds their rule or figure, and the function they
// speak of (CONVENTIONS.md); renamed or never-written, such a name points
// at nothing and reads as true.

// testName matches a test, benchmark or fuzz target's name, and a * or
// { after it: such a name is a prefix (`TestGPU*`,
// `BenchmarkGPUGathered{Direct,Executor}`). A single letter after Test,
// Benchmark or Fuzz is a placeholder (`BenchmarkX/y-2`), not a name.
var testName = regexp.MustCompile(`\b((?:Test|Benchmark|Fuzz)[A-Z0-9_]\w+)([*{]?)`)

// qualified matches pkg.Name: a package-qualified exported name.
var qualified = regexp.MustCompile(`\b([a-z]\w*)\.([A-Z]\w*)\b`)

// comment is the text of one Go comment, or one line of a doc, and where
// it stands.
type comment struct{ text, where string }

// tree is what the repository's Go files declare, and its comments.
type tree struct {
	tests    map[string]bool            // test, benchmark and fuzz functions
	top      map[string]map[string]bool // package name → its top-level names
	comments []comment
}

// readTree parses every Go file of the repository (not testdata, nor a
// folder whose name starts with . or _).
func readTree(t *testing.T) *tree {
	t.Helper()
	tr := &tree{tests: map[string]bool{}, top: map[string]map[string]bool{}}
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
		pkg := strings.TrimSuffix(f.Name.Name, "_test")
		if tr.top[pkg] == nil {
			tr.top[pkg] = map[string]bool{}
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv != nil {
					continue
				}
				tr.top[pkg][d.Name.Name] = true
				if strings.HasSuffix(name, "_test.go") && testName.MatchString(d.Name.Name) {
					tr.tests[d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, sp := range d.Specs {
					switch s := sp.(type) {
					case *ast.TypeSpec:
						tr.top[pkg][s.Name.Name] = true
					case *ast.ValueSpec:
						for _, n := range s.Names {
							tr.top[pkg][n.Name] = true
						}
					}
				}
			}
		}
		for _, g := range f.Comments {
			for _, c := range g.List {
				tr.comments = append(tr.comments, comment{c.Text, fset.Position(c.Slash).String()})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.tests) == 0 || len(tr.comments) == 0 {
		t.Fatalf("%d test functions and %d comments found: the walk read nothing", len(tr.tests), len(tr.comments))
	}
	return tr
}

// docLines returns the lines of the README, BENCHMARKS.md and the
// Markdown and CSV files of docs/, each with where it stands.
func docLines(t *testing.T) []comment {
	t.Helper()
	var lines []comment
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
			lines = append(lines, comment{line, f + ":" + strconv.Itoa(i+1)})
		}
	}
	return lines
}

// TestNamesRealTests: every test, benchmark or fuzz target that a Go
// comment, the README, BENCHMARKS.md or a file of docs/ names is a
// function of the repository's tests.
func TestNamesRealTests(t *testing.T) {
	tr := readTree(t)
	for _, c := range append(tr.comments, docLines(t)...) {
		for _, m := range testName.FindAllStringSubmatch(c.text, -1) {
			if m[2] != "" {
				if !anyPrefixed(tr.tests, m[1]) {
					t.Errorf("%s: no test starts with %s", c.where, m[1])
				}
			} else if !tr.tests[m[1]] {
				t.Errorf("%s: names %s, which no test file defines", c.where, m[1])
			}
		}
	}
}

// TestNamesRealDecls: where a Go comment or a doc names pkg.Name and pkg
// is one of the repository's packages (not main), the package declares
// Name at its top level. A method is Type.Method: pkg.Method names
// nothing.
func TestNamesRealDecls(t *testing.T) {
	tr := readTree(t)
	for _, c := range append(tr.comments, docLines(t)...) {
		for _, m := range qualified.FindAllStringSubmatch(c.text, -1) {
			if names, ok := tr.top[m[1]]; ok && m[1] != "main" && !names[m[2]] {
				t.Errorf("%s: names %s.%s, which package %s does not declare", c.where, m[1], m[2], m[1])
			}
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
