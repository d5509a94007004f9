package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/fleet"
	"github.com/adaptsched/adaptsched/hardware"
	"github.com/adaptsched/adaptsched/history"
	"github.com/adaptsched/adaptsched/learned"
	"github.com/adaptsched/adaptsched/trace"
)

// poisonModel is the poisoning experiment's decoder on sim:h100 and
// sim:cpu2: one block of the default model's width, where the GPU runs
// about half the ops alone. It runs the model before queues (-exec
// serial), on which its 3% bound was set: on the async model, through
// the synchronous Executor, the e^12 µs claim cost 3.6%.
var poisonModel = []string{"-backends", "sim:h100,sim:cpu2", "-tokens", "24", "-batch", "1", "-requests", "2", "-prompt", "4",
	"-dim", "768", "-layers", "1", "-heads", "12", "-kv-heads", "4", "-ffn", "2048", "-vocab", "4000", "-ctx", "64", "-json",
	"-exec", "serial"}

// TestPoisonedPeer is the poisoning experiment through an
// embedded server: a peer, mallory, claims the GPU takes 403 µs
// (N = 10,000), then e^12 µs (N = 10⁹), in every bucket the victim runs.
// The victim's modelled tokens/s stays within 3% of its solo figure, a
// warning names mallory, and the victim's own store holds none of the
// claim.
func TestPoisonedPeer(t *testing.T) {
	tr := filepath.Join(t.TempDir(), "solo.jsonl")
	solo, _ := runInfer(t, append(append([]string(nil), poisonModel...), "-trace", tr))
	buckets := bucketsOf(t, tr)
	ns, err := fleet.Serve("127.0.0.1:0", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	url := "nats://" + ns.Addr().String()
	fp := hardware.FingerprintOf(infosOf(t, "sim:h100", "sim:cpu2"))
	for _, c := range []struct {
		name   string
		n, ln  float64
		victim string
	}{{"403us", 1e4, math.Log(403), "victim1"}, {"e^12us", 1e9, 12, "victim2"}} {
		t.Run(c.name, func(t *testing.T) {
			stop := poison(t, url, fp, buckets, bandit.Stats{N: c.n, Sum: c.n * c.ln, SumSq: c.n * (c.ln*c.ln + 0.01)})
			defer stop()
			db := filepath.Join(t.TempDir(), "store")
			got, stderr := runInfer(t, append(append([]string(nil), poisonModel...), "-fleet", url, "-fleet-node", c.victim, "-db", db))
			t.Logf("modelled tokens/s: solo %.1f, poisoned %.1f (%+.2f%%)", solo.ModelledTokensPerS, got.ModelledTokensPerS,
				100*(got.ModelledTokensPerS/solo.ModelledTokensPerS-1))
			if got.ModelledTokensPerS < 0.97*solo.ModelledTokensPerS {
				t.Errorf("poisoned %.1f modelled tokens/s, solo %.1f: more than 3%% lost", got.ModelledTokensPerS, solo.ModelledTokensPerS)
			}
			if got.Fleet == nil || got.Fleet.Aside != 1 {
				t.Errorf("fleet %+v: want one peer set aside", got.Fleet)
			}
			if !strings.Contains(stderr, "peer mallory") {
				t.Errorf("no warning naming mallory:\n%s", stderr)
			}
			store, err := history.Open(history.DefaultOptions(db).WithFingerprint(fp).WithLogger(zerolog.Nop()))
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			for _, r := range store.Records() {
				if r.Key.Backend == "sim:h100" && r.Posterior.MeanUs() > 100 {
					t.Errorf("the victim's store keeps %v at %.0f µs", r.Key, r.Posterior.MeanUs())
				}
			}
		})
	}
}

// runInfer runs infer with args and returns its summary and stderr.
func runInfer(t *testing.T, args []string) (Summary, string) {
	t.Helper()
	var out, errb bytes.Buffer
	if err := run(context.Background(), args, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	var s Summary
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		t.Fatalf("%v: %q", err, out.String())
	}
	return s, errb.String()
}

// bucketsOf returns the buckets a trace's events ran in.
func bucketsOf(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rd, err := trace.NewReader(f, path, trace.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var out []string
	for {
		e, err := rd.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if !seen[e.Bucket] {
			seen[e.Bucket] = true
			out = append(out, e.Bucket)
		}
	}
}

func infosOf(t *testing.T, names ...string) []backends.Info {
	t.Helper()
	var out []backends.Info
	for _, n := range names {
		b, err := backends.Open(n)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b.Info())
		b.Close()
	}
	return out
}

// poison publishes, as node mallory, the claim st for the GPU in every
// bucket, and returns what stops mallory.
func poison(t *testing.T, url string, fp hardware.Fingerprint, buckets []string, st bandit.Stats) func() {
	t.Helper()
	nc, err := fleet.Connect(url, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	n, err := fleet.Start(nc, fleet.DefaultOptions("mallory", fp).WithInterval(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	p0 := bandit.NormalGamma{Mu: 3, Kappa: 1, Alpha: 2, Beta: 0.04}
	var cs []learned.Change
	for _, b := range buckets {
		cs = append(cs, learned.Change{Key: learned.Key{Backend: "sim:h100", Bucket: b}, Prior: p0, Posterior: p0.With(st), N: uint64(st.N)})
	}
	n.Exchange(cs, nil)
	if err := n.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return func() { n.Close(); nc.Close() }
}
