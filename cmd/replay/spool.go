package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// spool keeps the events of pass 1, decoded, for pass 2: each as its
// distinct op's index and its measured durations per backend, a few bytes
// where the trace line had hundreds, so the trace is parsed once. It holds
// them in memory up to spoolMemory bytes and in a temporary file beyond,
// so that memory does not grow with the trace (BenchmarkReplayMemory).
type spool struct {
	mem   []byte
	file  *os.File
	w     *bufio.Writer
	n     int64 // records
	rec   []byte
	limit int
}

// spoolMemory is the most a spool holds in memory.
const spoolMemory = 4 << 20

// measurement is one measured duration of an event on a backend.
type measurement struct {
	arm uint8
	src source
	us  float64
}

// add appends an event: its op's index and its measurements.
func (s *spool) add(ent int32, meas []measurement) error {
	s.rec = binary.AppendUvarint(s.rec[:0], uint64(ent))
	s.rec = append(s.rec, byte(len(meas)))
	for _, m := range meas {
		s.rec = append(s.rec, m.arm, byte(m.src))
		s.rec = binary.LittleEndian.AppendUint64(s.rec, math.Float64bits(m.us))
	}
	s.n++
	if s.file == nil {
		if s.limit == 0 {
			s.limit = spoolMemory
		}
		if s.mem == nil {
			// Rule: the memory part is allocated whole at the first event.
			// Reason: grown by append, its copies and their first touches
			// of fresh pages were 14% of a replay's profile
			// (BenchmarkReplay); the pages of the part a short trace
			// leaves unused are never touched.
			s.mem = make([]byte, 0, s.limit)
		}
		if len(s.mem)+len(s.rec) <= s.limit {
			s.mem = append(s.mem, s.rec...)
			return nil
		}
		f, err := os.CreateTemp("", "replay-spool-*")
		if err != nil {
			return fmt.Errorf("replay: spooling the trace's events: %w", err)
		}
		s.file, s.w = f, bufio.NewWriterSize(f, 1<<20)
		s.w.Write(s.mem)
		s.mem = nil
	}
	if _, err := s.w.Write(s.rec); err != nil {
		return fmt.Errorf("replay: spooling the trace's events: %w", err)
	}
	return nil
}

// close removes the temporary file, if any.
func (s *spool) close() {
	if s.file != nil {
		s.file.Close()
		os.Remove(s.file.Name())
		s.file = nil
	}
}

// reader returns a stream of the records from the first.
func (s *spool) reader() (*spoolReader, error) {
	if s.file == nil {
		return &spoolReader{r: bufio.NewReader(bytes.NewReader(s.mem))}, nil
	}
	if err := s.w.Flush(); err != nil {
		return nil, fmt.Errorf("replay: spooling the trace's events: %w", err)
	}
	if _, err := s.file.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("replay: reading the spooled events: %w", err)
	}
	return &spoolReader{r: bufio.NewReaderSize(s.file, 1<<20)}, nil
}

// spoolReader reads a spool's records in order.
type spoolReader struct {
	r   *bufio.Reader
	buf [10]byte
}

// next decodes the next record into meas (reused); io.EOF after the last.
func (sr *spoolReader) next(meas []measurement) (int32, []measurement, error) {
	ent, err := binary.ReadUvarint(sr.r)
	if err != nil {
		return 0, meas, err
	}
	n, err := sr.r.ReadByte()
	if err != nil {
		return 0, meas, errSpool
	}
	meas = meas[:0]
	for range n {
		if _, err := io.ReadFull(sr.r, sr.buf[:]); err != nil {
			return 0, meas, errSpool
		}
		meas = append(meas, measurement{arm: sr.buf[0], src: source(sr.buf[1]),
			us: math.Float64frombits(binary.LittleEndian.Uint64(sr.buf[2:]))})
	}
	return int32(ent), meas, nil
}

var errSpool = errors.New("replay: the spooled events are cut short")
