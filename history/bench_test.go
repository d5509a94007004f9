package history

import (
	"strconv"
	"testing"

	"github.com/adaptsched/adaptsched/learned"
)

// BenchmarkStorePut measures Put on the hot path: a map update under a
// mutex, no I/O, no allocation once the key exists.
func BenchmarkStorePut(b *testing.B) {
	o, _ := testOpts(b, "")
	db := mustOpen(b, o)
	defer db.Close()
	keys := make([]learned.Key, 256)
	for i := range keys {
		keys[i] = learned.Key{Backend: "cpu", Bucket: "MatMul/f32/s" + strconv.Itoa(i)}
		db.PutWithPrior(keys[i], prior0, grown(1))
	}
	p := grown(1, 2)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		db.PutWithPrior(keys[i&255], prior0, p)
		i++
	}
}

// BenchmarkFlush measures one batch on disk: 1,024 updates over 64 records
// (the shape of BenchmarkSelectObserve's batches), then Flush, which
// returns once Badger has applied the write (its memtable flushes and
// compactions run later, in the background).
func BenchmarkFlush(b *testing.B) {
	o, _ := testOpts(b, b.TempDir())
	db := mustOpen(b, o)
	defer db.Close()
	keys := make([]learned.Key, 64)
	for i := range keys {
		keys[i] = learned.Key{Backend: "cpu", Bucket: "MatMul/f32/s" + strconv.Itoa(i)}
	}
	p := grown(1, 2)
	for b.Loop() {
		for j := range 1024 {
			db.PutWithPrior(keys[j&63], prior0, p)
		}
		if err := db.Flush(); err != nil {
			b.Fatal(err)
		}
	}
}
