package fleet

import (
	"net"
	"testing"
)

// TestServeFreePort: two servers asked for port 0 at once both start, on
// ports of their own; nats-server takes 0 for its default port, 4222,
// where the second could not listen (the parallel tests of cmd/replay and
// cmd/infer collided there).
func TestServeFreePort(t *testing.T) {
	var ports []int
	for range 2 {
		ns, err := Serve("127.0.0.1:0", t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
		addr, ok := ns.Addr().(*net.TCPAddr)
		if !ok {
			t.Fatalf("address %v", ns.Addr())
		}
		ports = append(ports, addr.Port)
	}
	if ports[0] == ports[1] || ports[0] == 4222 || ports[1] == 4222 {
		t.Errorf("ports %v: want two free ports, not the default 4222", ports)
	}
}
