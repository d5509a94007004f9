package trace_test

import (
	"bytes"
	"fmt"
	"io"

	"github.com/adaptsched/adaptsched/trace"
)

func ExampleNewRecorder() {
	var buf bytes.Buffer
	rec, _ := trace.NewRecorder(&buf, trace.Header{}, trace.RecorderOptions{})
	rec.Record(trace.Event{Seq: 1, Op: "Add", DType: "f32", Shape: [][]int{{4}, {4}}, Backend: "cpu", ActualUs: 0.25})
	rec.Close()
	rd, _ := trace.NewReader(&buf, "trace.jsonl", trace.ReaderOptions{})
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			break
		}
		fmt.Println(ev.Seq, ev.Op, ev.Shape, ev.Backend, ev.ActualUs)
	}
	// Output:
	// 1 Add [[4] [4]] cpu 0.25
}
