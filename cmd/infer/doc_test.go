package main

import (
	"testing"

	"github.com/adaptsched/adaptsched/internal/flagdoc"
)

// TestDocNamesEveryFlag: the package comment (go doc's page) names every
// flag -h lists.
func TestDocNamesEveryFlag(t *testing.T) { flagdoc.Check(t, "main.go", parseFlags) }
