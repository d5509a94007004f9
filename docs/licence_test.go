package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLicence: the module is Apache-2.0 (LICENSE at the root, the full
// text with its copyright line), and every third-party data folder
// (a PROVENANCE.md naming a licence) keeps that licence's text: an MIT
// or LGPL-2.1 text beside it, Apache-2.0 through the root LICENSE. The
// README's Licence section names every such folder.
func TestLicence(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	lic := string(b)
	for _, want := range []string{"Apache License\n                           Version 2.0, January 2004",
		"END OF TERMS AND CONDITIONS", "Copyright 2026 The adaptsched Authors"} {
		if !strings.Contains(lic, want) {
			t.Errorf("LICENSE lacks %q", want)
		}
	}
	beside := map[string]struct{ file, text string }{
		"MIT":      {"LICENSE", "MIT License"},
		"LGPL-2.1": {"LICENSE.LGPL-2.1", "GNU LESSER GENERAL PUBLIC LICENSE\n                       Version 2.1"},
	}
	seen := 0
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, licence, _ := strings.Cut(string(readme), "\n## Licence\n")
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if err != nil || d.Name() != "PROVENANCE.md" {
			return err
		}
		prov, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		seen++
		if dir, _ := filepath.Rel(root, filepath.Dir(p)); !strings.Contains(licence, "`"+filepath.ToSlash(dir)+"`") {
			t.Errorf("README's Licence section does not name %s, which holds third-party data", filepath.ToSlash(dir))
		}
		for name, want := range beside {
			if !strings.Contains(string(prov), name) {
				continue
			}
			text, err := os.ReadFile(filepath.Join(filepath.Dir(p), want.file))
			if err != nil || !strings.Contains(string(text), want.text) {
				t.Errorf("%s names %s but %s beside it does not hold its text (%v)", p, name, want.file, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen == 0 {
		t.Error("no PROVENANCE.md found: the walk is wrong")
	}
}
