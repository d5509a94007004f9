package history

import (
	"strconv"
	"testing"
	"time"
)

// BenchmarkStorePut measures Put on the hot path: a map update under a
// mutex, no I/O, no allocation once the key exists.
func BenchmarkStorePut(b *testing.B) {
	o, _ := testOpts(b, "")
	db := mustOpen(b, o.WithFlushInterval(10*time.Millisecond))
	defer db.Close()
	keys := make([]Key, 256)
	for i := range keys {
		keys[i] = Key{"cpu", "MatMul/f32/s" + strconv.Itoa(i)}
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
