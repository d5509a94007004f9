package peer

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// StarPUEnv returns the environment StarPU runs under here, as its users
// run it: the dmda policy, calibration on, one CPU worker and no
// accelerator, a fresh STARPU_HOME (home, where its performance models
// start empty), messages off.
func StarPUEnv(home string) []string {
	return append(os.Environ(),
		"STARPU_SCHED=dmda",
		"STARPU_CALIBRATE=1",
		"STARPU_HOME="+home,
		"STARPU_NCPU=1",
		"STARPU_NCUDA=0",
		"STARPU_NOPENCL=0",
		"STARPU_SILENT=1",
	)
}

// RunStarPU runs the StarPU program bin on the stream file stream, with
// the drift's delays from the file delays (WriteDelays) and a fresh
// STARPU_HOME under tmp, then empty empty tasks, and returns its result
// and its ns per empty task.
func RunStarPU(bin, stream, delays, tmp string, empty int) (Result, float64, error) {
	home, err := os.MkdirTemp(tmp, "starpu-home-")
	if err != nil {
		return Result{}, 0, err
	}
	defer os.RemoveAll(home)
	cmd := exec.Command(bin, stream, strconv.Itoa(empty), delays)
	cmd.Env = StarPUEnv(home)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return Result{}, 0, fmt.Errorf("%w: %s: %w: %s", ErrStarPU, bin, err, strings.TrimSpace(stderr.String()))
	}
	return ParseStarPU(out)
}

// ParseStarPU reads the "key value" lines that peer_starpu prints.
func ParseStarPU(out []byte) (Result, float64, error) {
	var r Result
	emptyNs := -1.0
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		bad := fmt.Errorf("%w: output line %d: %q", ErrStarPU, n, sc.Text())
		if f[0] == "chosen" {
			if len(f) != 4 {
				return Result{}, 0, bad
			}
			h, err1 := strconv.Atoi(f[1])
			impl, ok := parseImpl(f[2])
			c, err2 := strconv.Atoi(f[3])
			if err1 != nil || err2 != nil || !ok || h < 0 || h > 1 || c < 0 {
				return Result{}, 0, bad
			}
			r.Chosen[h][impl] = c
			continue
		}
		if f[0] == "shape" {
			if len(f) != 6 {
				return Result{}, 0, bad
			}
			sh, err1 := strconv.Atoi(f[1])
			h, err2 := strconv.Atoi(f[2])
			impl, ok := parseImpl(f[3])
			n, err3 := strconv.Atoi(f[4])
			ns, err4 := strconv.ParseInt(f[5], 10, 64)
			if err := errors.Join(err1, err2, err3, err4); err != nil || !ok || sh < 0 || sh >= maxShapes || h < 0 || h > 1 || n < 0 || ns < 0 {
				return Result{}, 0, bad
			}
			for len(r.PerShape) <= sh {
				r.PerShape = append(r.PerShape, [2][numImpls]Cell{})
			}
			r.PerShape[sh][h][impl] = Cell{N: n, Ns: ns}
			continue
		}
		if len(f) != 2 {
			return Result{}, 0, bad
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil || v < 0 {
			return Result{}, 0, bad
		}
		seen[f[0]] = true
		d := time.Duration(v)
		switch f[0] {
		case "tasks":
			r.Tasks = int(v)
		case "total_ns":
			r.Total = d
		case "half1_ns":
			r.Half1 = d
		case "half2_ns":
			r.Half2 = d
		case "kernel1_ns":
			r.Kernel1 = d
		case "kernel2_ns":
			r.Kernel2 = d
		case "empty_ns":
			emptyNs = v
		case "empty_async_ns":
			r.EmptyAsync = v
		default:
			return Result{}, 0, bad
		}
	}
	for _, k := range []string{"tasks", "total_ns", "half1_ns", "half2_ns", "kernel1_ns", "kernel2_ns", "empty_ns", "empty_async_ns"} {
		if !seen[k] {
			return Result{}, 0, fmt.Errorf("%w: no %s in its output", ErrStarPU, k)
		}
	}
	return r, emptyNs, nil
}
