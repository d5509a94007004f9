// Package flagdoc checks a command's documentation against its flags,
// for the commands' tests: every flag -h lists is named, as -name, in
// the package comment that go doc shows.
package flagdoc

import (
	"bytes"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"regexp"
	"testing"
)

// usageFlag matches a flag's line in flag.PrintDefaults' output.
var usageFlag = regexp.MustCompile(`(?m)^  -([\w-]+)`)

// Check fails t where the package comment of the Go file at path does
// not name a flag that parse (a command's parseFlags: flags, then where
// -h prints the usage) lists for -h.
func Check[T any](t testing.TB, path string, parse func([]string, io.Writer) (T, error)) {
	t.Helper()
	var usage bytes.Buffer
	parse([]string{"-h"}, &usage)
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly|parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	if f.Doc == nil {
		t.Fatalf("%s: no package comment", path)
	}
	missing, err := Undocumented(f.Doc.Text(), usage.String())
	if err != nil || len(missing) > 0 {
		t.Errorf("%s's package comment does not name %v (%v)", path, missing, err)
	}
}

// Undocumented returns the flags that usage (flag.PrintDefaults' output)
// lists and doc does not name as -name, in usage's order. A usage that
// lists no flag returns an error, since then nothing was checked.
func Undocumented(doc, usage string) ([]string, error) {
	flags := usageFlag.FindAllStringSubmatch(usage, -1)
	if len(flags) == 0 {
		return nil, fmt.Errorf("the usage lists no flag:\n%s", usage)
	}
	var missing []string
	for _, m := range flags {
		if !regexp.MustCompile(`(^|[^\w-])-` + regexp.QuoteMeta(m[1]) + `($|[^\w-])`).MatchString(doc) {
			missing = append(missing, m[1])
		}
	}
	return missing, nil
}
