package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mainEnv makes the test binary run main with the arguments in
// mainArgsEnv (separated by spaces), for the tests that need a process
// of infer's own to signal.
const (
	mainEnv     = "ADAPTSCHED_INFER_MAIN"
	mainArgsEnv = "ADAPTSCHED_INFER_ARGS"
)

func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) == "1" {
		os.Args = append([]string{"infer"}, strings.Fields(os.Getenv(mainArgsEnv))...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestSIGTERMUnwritableStore: with its store's directory made unwritable
// while it runs, infer exits within a second of SIGTERM, non-zero, with
// an error naming the directory (Badger alone retries its table every
// second for ever, and the process hung). Run as uid 65534 when the test
// runs as root, whom file modes do not bind.
func TestSIGTERMUnwritableStore(t *testing.T) {
	root := t.TempDir()
	for d := root; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	os.Chmod(root, 0o777)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "infer.test")
	copyExe(t, exe, bin)
	store := filepath.Join(root, "store")
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), mainEnv+"=1", mainArgsEnv+"=-backends sim:h100,sim:cpu2 -requests 0 -db "+store+" "+
		"-tokens 4 -prompt 2 -dim 64 -layers 1 -heads 4 -kv-heads 2 -ffn 64 -vocab 50 -ctx 8")
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(store, "ADAPTSCHED-STATE")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store did not appear\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if err := os.Chmod(store, 0o500); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(store, 0o700)
	time.Sleep(1500 * time.Millisecond) // a flush or two meets the directory
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	took := time.Since(start)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("exit: %v, want status 1\n%s", err, stderr.String())
	}
	if took > time.Second {
		t.Errorf("exited %v after SIGTERM, want within 1 s", took)
	}
	if !strings.Contains(stderr.String(), "store "+store+" cannot be written") {
		t.Errorf("stderr does not name the store:\n%s", stderr.String())
	}
	t.Logf("exit %v after SIGTERM; stderr:\n%s", took, stderr.String())
}

func copyExe(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
