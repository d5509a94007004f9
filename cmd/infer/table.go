package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/adaptsched/adaptsched/adaptive"
)

// tableWidth is the most columns the placement table takes with two
// backends (TestPlacementTableWidth): a bucket name longer than
// bucketWidth is cut with "…".
const (
	tableWidth  = 100
	bucketWidth = 38
)

// tableLegend explains the placement table's columns, printed below it.
const tableLegend = `ops: ops observed in this process; on: the incumbent, the backend the
bucket exploits now; sw: its switches of incumbent; alarms: changes
detected on the incumbent (its durations drifted: its posterior was
widened, so the others are tried again); per backend: its share of the
bucket's ops and its posterior mean duration.
A "└" row is a shape of the bucket above that learns on its own (its best
backend differs from the bucket's); its ops count in the bucket too.
`

// placementTable prints, per bucket that ran ops, its ops, incumbent,
// switches and alarms, and each backend's share of its ops and mean µs;
// a bucket's shapes that learn on their own follow it, indented.
func placementTable(w io.Writer, tel adaptive.Telemetry) error {
	type row struct {
		b           adaptive.BucketTelemetry
		parent, own string // the bucket's name; the shape's own part
	}
	var rows []row
	for _, b := range tel.Buckets {
		r := row{b: b, parent: b.Name}
		if b.Parent != "" {
			r.parent, r.own = b.Parent, shapePart(b.Name, b.Parent)
		}
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(x, y row) int {
		return cmp.Or(strings.Compare(x.parent, y.parent), strings.Compare(x.own, y.own))
	})
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprint(tw, "bucket\tops\ton\tsw\talarms")
	for _, b := range tel.Backends {
		fmt.Fprintf(tw, "\t%s", b.Name)
	}
	fmt.Fprintln(tw)
	for _, r := range rows {
		var total int64
		for _, a := range r.b.Arms {
			total += a.N
		}
		if total == 0 {
			continue
		}
		name := r.parent
		if r.own != "" {
			name = "  └ " + r.own
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d", cut(name, bucketWidth), total, r.b.Incumbent, r.b.Switches, r.b.Alarms)
		for _, a := range r.b.Arms {
			fmt.Fprintf(tw, "\t%3.0f%% %s", 100*float64(a.N)/float64(total), micros(a.MeanUs))
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := io.WriteString(w, tableLegend)
	return err
}

// shapePart is what a shape's bucket name adds to its parent's: its
// shapes ("[1x768 2048x768]"), without the op and dtype the parent names.
func shapePart(name, parent string) string {
	s := strings.TrimSpace(strings.TrimPrefix(name, parent))
	if i := strings.IndexByte(s, '['); i >= 0 {
		return s[i:]
	}
	return s
}

// cut shortens s to n characters, the last an ellipsis.
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// micros formats a duration in µs in at most 8 characters.
func micros(us float64) string {
	switch {
	case us >= 1e6:
		return fmt.Sprintf("%.2fs", us/1e6)
	case us >= 1e4:
		return fmt.Sprintf("%.1fms", us/1e3)
	}
	return fmt.Sprintf("%.1fµs", us)
}
