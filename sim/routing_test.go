package sim

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/adaptsched/adaptsched/internal/input"
)

func TestReadRoutingMixtral(t *testing.T) {
	for _, f := range []string{"expert_popularity_college_medicine.json", "expert_popularity_machine_learning.json"} {
		r, err := ReadRouting("testdata/moe/"+f, 32, 8)
		if err != nil {
			t.Fatal(err)
		}
		if r.Layers() != 32 || r.Experts() != 8 || r.Tokens <= 0 {
			t.Fatalf("%s: %d layers × %d experts, %d tokens", f, r.Layers(), r.Experts(), r.Tokens)
		}
		// Top-2 routing: each layer's counts sum to 2–3× the input tokens
		// (the file's total counts prompts, the counts generated tokens too).
		var sum int64
		for _, c := range r.Counts[0] {
			sum += c
		}
		if sum < r.Tokens || sum > 4*r.Tokens {
			t.Errorf("%s: layer 0 sums to %d over %d tokens", f, sum, r.Tokens)
		}
	}
}

func TestParseRoutingErrors(t *testing.T) {
	cases := []struct {
		name, json      string
		layers, experts int
		want            string
	}{
		{"syntax", "{\"total_input_tokens\": 3,\n \"expert_popularity\": [[1, 2],, [3, 4]]}", 0, 0, "r.json: line 2, column 32"},
		{"fraction", "{\"expert_popularity\": [[1, 2.5]]}", 0, 0, "line 1, column 31"},
		{"string", "{\"expert_popularity\": [[1, \"x\"]]}", 0, 0, "line 1, column 31"},
		{"truncated", "{\"expert_popularity\": [[1, 2]", 0, 0, "unexpected end"},
		{"trailing", "{\"expert_popularity\": [[1, 2]]} {}", 0, 0, "data after the JSON object"},
		{"missing", "{\"total_input_tokens\": 3}", 0, 0, "no expert_popularity"},
		{"layers", "{\"expert_popularity\": [[1, 2], [3, 4]]}", 3, 2, "2 layers, want 3"},
		{"experts", "{\"expert_popularity\": [[1, 2], [3, 4, 5]]}", 2, 2, "layer 1: 3 experts, want 2"},
		{"ragged", "{\"expert_popularity\": [[1, 2], [3, 4, 5]]}", 0, 0, "layer 1: 3 experts, layer 0 has 2"},
		{"negative", "{\"expert_popularity\": [[1, 2], [3, -4]]}", 2, 2, "layer 1, expert 1: count -4"},
		{"empty layer", "{\"expert_popularity\": [[1, 2], [0, 0]]}", 2, 2, "layer 1: no expert was chosen"},
		{"negative tokens", "{\"total_input_tokens\": -1, \"expert_popularity\": [[1]]}", 0, 0, "total_input_tokens is -1"},
	}
	for _, c := range cases {
		_, err := ParseRouting("r.json", []byte(c.json), c.layers, c.experts)
		if err == nil || !errors.Is(err, ErrBadRouting) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "r.json") {
			t.Errorf("%s: error %v, want one naming r.json and %q", c.name, err, c.want)
		}
	}
	if _, err := ReadRouting("testdata/moe/none.json", 0, 0); !errors.Is(err, ErrBadRouting) || !strings.Contains(err.Error(), "none.json") {
		t.Errorf("missing file: %v", err)
	}
}

// TestReadRoutingRefuses: a FIFO, a device and a file over
// MaxRoutingBytes are refused at once, naming the file (a FIFO hung
// ReadRouting, /dev/zero ran it out of memory).
func TestReadRoutingRefuses(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "r.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, 1<<30); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{fifo, fifo + " is a pipe, not a regular file"},
		{"/dev/zero", "/dev/zero is a character device, not a regular file"},
		{dir, dir + " is a directory, not a regular file"},
		{big, big + ": 1073741824 bytes or more, larger than 4 MiB"},
	} {
		done := make(chan error, 1)
		go func() { _, err := ReadRouting(c.path, 0, 0); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrBadRouting) || !strings.Contains(err.Error(), c.want) || strings.Count(err.Error(), "\n") != 0 {
				t.Errorf("%s: %v, want %q", c.path, err, c.want)
			}
			if c.path != big && !errors.Is(err, input.ErrNotRegular) {
				t.Errorf("%s: %v, want input.ErrNotRegular", c.path, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: still reading after 5 s", c.path)
		}
	}
	// Valid JSON just over the bound is refused; just under, read.
	over := filepath.Join(dir, "over.json")
	if err := os.WriteFile(over, []byte(strings.Repeat(" ", MaxRoutingBytes)+`{"expert_popularity": [[1]]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadRouting(over, 0, 0); !errors.Is(err, ErrBadRouting) || !strings.Contains(err.Error(), "larger than 4 MiB") {
		t.Errorf("over the bound: %v", err)
	}
	if err := os.WriteFile(over, []byte(strings.Repeat(" ", MaxRoutingBytes-40)+`{"expert_popularity": [[1]]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadRouting(over, 0, 0); err != nil {
		t.Errorf("within the bound: %v", err)
	}
}

func TestZipfRoutingSkew(t *testing.T) {
	r, err := ZipfRouting(4, 8, 1.2, 7)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	hits := make([]int, 8)
	var dst []int
	for range 20000 {
		dst = r.Pick(rng, 0, 2, dst)
		if len(dst) != 2 || dst[0] == dst[1] {
			t.Fatalf("picked %v, want 2 distinct", dst)
		}
		hits[dst[0]]++
		hits[dst[1]]++
	}
	hot, cold := 0, 0
	for e, c := range r.Counts[0] {
		if c > r.Counts[0][hot] {
			hot = e
		}
		if c < r.Counts[0][cold] {
			cold = e
		}
	}
	if hits[hot] < 3*hits[cold] {
		t.Errorf("hottest expert picked %d times, coldest %d: no skew", hits[hot], hits[cold])
	}
	if _, err := ZipfRouting(0, 8, 1, 1); !errors.Is(err, ErrBadRouting) {
		t.Errorf("zero layers: %v", err)
	}
}

func FuzzParseRouting(f *testing.F) {
	f.Add([]byte(`{"total_input_tokens": 3, "expert_popularity": [[1, 2], [3, 4]]}`), 2, 2)
	f.Add([]byte(`{"expert_popularity": [[0, 0]]}`), 0, 0)
	f.Add([]byte(`[`), 1, 1)
	f.Fuzz(func(t *testing.T, data []byte, layers, experts int) {
		r, err := ParseRouting("f.json", data, layers, experts)
		if err != nil {
			if !errors.Is(err, ErrBadRouting) || !strings.Contains(err.Error(), "f.json") {
				t.Fatalf("error %v does not name the file", err)
			}
			return
		}
		if layers > 0 && r.Layers() != layers || experts > 0 && r.Experts() != experts {
			t.Fatalf("accepted %d×%d against %d×%d", r.Layers(), r.Experts(), layers, experts)
		}
		rng := rand.New(rand.NewPCG(1, 1))
		for l := range r.Layers() {
			for _, c := range r.Counts[l] {
				if c < 0 {
					t.Fatalf("accepted count %d", c)
				}
			}
			got := r.Pick(rng, l, 2, nil)
			if len(got) != min(2, r.Experts()) {
				t.Fatalf("layer %d: picked %v", l, got)
			}
		}
	})
}

// TestRoutingBOM: a byte-order mark before the JSON is skipped, as the
// trace and perf-table readers skip one, and an error after it is placed
// as without it.
func TestRoutingBOM(t *testing.T) {
	body := "{\"total_input_tokens\": 3,\n \"expert_popularity\": [[1, 2], [3, 4]]}"
	p := filepath.Join(t.TempDir(), "r.json")
	if err := os.WriteFile(p, []byte("\ufeff"+body), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := ReadRouting(p, 2, 2)
	if err != nil || r.Tokens != 3 || r.Counts[1][1] != 4 {
		t.Fatalf("%+v, %v", r, err)
	}
	_, err = ParseRouting("r.json", []byte("\ufeff{\"expert_popularity\": [[1, 2.5]]}"), 0, 0)
	if err == nil || !strings.Contains(err.Error(), "r.json: line 1, column 31") {
		t.Errorf("after a BOM: %v, want line 1, column 31", err)
	}
}
