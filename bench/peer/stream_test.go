package peer

import (
	"bytes"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

// TestStreamRoundTrip writes a generated stream and reads it back.
func TestStreamRoundTrip(t *testing.T) {
	st := Generate(GenOptions{Seed: 7, Tasks: 1001})
	var buf bytes.Buffer
	if _, err := st.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	got, err := Read(&buf, "gen")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, st) {
		t.Fatalf("read back %+v, wrote %+v", got.Drift, st.Drift)
	}
}

// TestGenerate checks the generator's promises: the same seed gives the
// same stream, every shape appears, the frequencies fall with the rank
// as Zipf's law with s = 1.1 says (rank 1 holds 1/H of the tasks, H the
// generalized harmonic number of 15 shapes, about 2.90: 34.4%), and the
// default drift is blas 3× from the middle.
func TestGenerate(t *testing.T) {
	a, b := Generate(GenOptions{Seed: 24}), Generate(GenOptions{Seed: 24})
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed gave two streams")
	}
	if len(a.Tasks) != 20000 || a.Drift != (Drift{Impl: BLAS, Factor: 3, From: 10000}) {
		t.Fatalf("%d tasks, drift %+v", len(a.Tasks), a.Drift)
	}
	n := make([]int, len(a.Shapes))
	for _, s := range a.Tasks {
		n[s]++
	}
	for i, c := range n {
		if c == 0 {
			t.Fatalf("shape %v never drawn", a.Shapes[i])
		}
	}
	if share := float64(n[0]) / float64(len(a.Tasks)); share < 0.33 || share > 0.36 {
		t.Fatalf("rank 1 holds %.3f of the tasks, want 0.344 ± 0.015", share)
	}
	if n[0] < n[len(n)-1]*5 {
		t.Fatalf("rank 1 %d tasks, rank %d %d: not Zipf", n[0], len(n), n[len(n)-1])
	}
}

// TestCheckedInStream reads testdata/stream.txt and checks that it is
// what `go run ./cmd/peer -gen` writes (seed 24, 20,000 tasks).
func TestCheckedInStream(t *testing.T) {
	f, err := os.Open("testdata/stream.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := Read(f, "testdata/stream.txt")
	if err != nil {
		t.Fatal(err)
	}
	if want := Generate(GenOptions{Seed: 24}); !reflect.DeepEqual(st, want) {
		t.Fatal("testdata/stream.txt is not Generate(seed 24): run go run ./cmd/peer -gen bench/peer/testdata/stream.txt")
	}
}

func TestReadErrors(t *testing.T) {
	const head = "adaptsched-peer-stream 1\ndrift blas 3 1\nshape 1 2 3\n"
	for _, c := range []struct{ in, want string }{
		{"", "x:0: empty"},
		{"adaptsched-peer-stream 2\n", "x:1: want"},
		{"adaptsched-peer-stream 1\ndrift gpu 3 1\n", "x:2: drift"},
		{"adaptsched-peer-stream 1\ndrift blas 0.5 1\n", "x:2: drift"},
		{"adaptsched-peer-stream 1\ndrift blas 3 1\ndrift blas 3 1\n", "x:3: want one line"},
		{"adaptsched-peer-stream 1\nshape 1 0 3\n", "x:2: dimension"},
		{"adaptsched-peer-stream 1\nshape 1 2\n", "x:2: want \"shape"},
		{"adaptsched-peer-stream 1\ntasks 3\n", "x:2: tasks before any shape"},
		{head + "tasks 2\n0 1\n", "x:5: task \"1\""},
		{head + "tasks 2\n0 0 0\n", "x:5: more than the 2"},
		{head + "tasks 3\n0 0\n", "x:5: 2 tasks, 3 announced"},
		{head, "no tasks line"},
		{"adaptsched-peer-stream 1\ndrift blas 3 5\nshape 1 2 3\ntasks 2\n0 0\n", "drift from task 5 of 2"},
		{"adaptsched-peer-stream 1\nshape 1 2 3\ntasks 1\n0\n", "no drift line"},
		{"adaptsched-peer-stream 1\nbogus\n", "x:2: unknown line"},
		{"adaptsched-peer-stream 1\n" + strings.Repeat("#", maxLine+1) + "\n", "x:2: bufio.Scanner: token too long"},
	} {
		_, err := Read(strings.NewReader(c.in), "x")
		if !errors.Is(err, ErrStream) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Read(%.40q) = %v, want ErrStream with %q", c.in, err, c.want)
		}
	}
	ok := head + "# a comment\n\ntasks 3\n0\n0 0\n"
	if _, err := Read(strings.NewReader(ok), "x"); err != nil {
		t.Errorf("Read(%q) = %v", ok, err)
	}
}

// FuzzRead checks that Read never panics and that what it accepts
// survives a round trip.
func FuzzRead(f *testing.F) {
	f.Add("adaptsched-peer-stream 1\ndrift blas 3 1\nshape 1 2 3\ntasks 2\n0 0\n")
	f.Add("adaptsched-peer-stream 1\ndrift blocked 1.5 0\nshape 4 4 4\nshape 1 1 1\ntasks 3\n1 0 1\n")
	f.Fuzz(func(t *testing.T, in string) {
		st, err := Read(strings.NewReader(in), "fuzz")
		if err != nil {
			if !errors.Is(err, ErrStream) {
				t.Fatalf("error %v does not wrap ErrStream", err)
			}
			return
		}
		var buf bytes.Buffer
		if _, err := st.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		back, err := Read(&buf, "again")
		if err != nil || !reflect.DeepEqual(back, st) {
			t.Fatalf("round trip: %v", err)
		}
	})
}
