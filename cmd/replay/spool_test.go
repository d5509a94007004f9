package main

import (
	"io"
	"os"
	"testing"
)

// TestSpool: records come back as they went in, from memory and, past
// the limit, from the temporary file, which close removes.
func TestSpool(t *testing.T) {
	for _, limit := range []int{1 << 20, 64} {
		s := &spool{limit: limit}
		want := [][]measurement{}
		for i := range 100 {
			var m []measurement
			for a := range i % 3 {
				m = append(m, measurement{arm: uint8(a), src: source(a % 2), us: float64(i) + 0.25*float64(a)})
			}
			want = append(want, m)
			if err := s.add(int32(i*1000), m); err != nil {
				t.Fatal(err)
			}
		}
		if (s.file != nil) != (limit == 64) {
			t.Errorf("limit %d: spilled to a file: %v", limit, s.file != nil)
		}
		var name string
		if s.file != nil {
			name = s.file.Name()
		}
		sr, err := s.reader()
		if err != nil {
			t.Fatal(err)
		}
		var got []measurement
		for i := range 100 {
			var ent int32
			ent, got, err = sr.next(got)
			if err != nil || ent != int32(i*1000) || len(got) != len(want[i]) {
				t.Fatalf("limit %d, record %d: %d %v %v, want %d %v", limit, i, ent, got, err, i*1000, want[i])
			}
			for j := range got {
				if got[j] != want[i][j] {
					t.Fatalf("limit %d, record %d: %v, want %v", limit, i, got, want[i])
				}
			}
		}
		if _, _, err := sr.next(got); err != io.EOF {
			t.Errorf("limit %d: after the last record: %v, want EOF", limit, err)
		}
		s.close()
		if name != "" {
			if _, err := os.Stat(name); !os.IsNotExist(err) {
				t.Errorf("the spool's file %s is still there: %v", name, err)
			}
		}
	}
}
