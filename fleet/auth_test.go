package fleet

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"github.com/rs/zerolog"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/relay"
)

func serveT(t *testing.T, addr string, so ServeOptions) (*server.Server, string) {
	t.Helper()
	ns, err := ServeWith(addr, t.TempDir(), so)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns, "nats://" + ns.Addr().String()
}

// TestServeUsersPermissions: with users, the embedded server refuses
// anonymous and wrong credentials as authentication failures, and a
// node may put its own keys only, and may not delete the bucket; it reads
// the others'.
func TestServeUsersPermissions(t *testing.T) {
	_, url := serveT(t, "127.0.0.1:0", ServeOptions{Users: []Credential{{Node: "a", Password: "pa"}, {Node: "b", Password: "pb"}}})
	bogus := filepath.Join(t.TempDir(), "bogus.creds")
	if err := os.WriteFile(bogus, []byte("garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, opts := range [][]nats.Option{nil, {nats.UserInfo("a", "nope")}, {nats.UserInfo("c", "pa")}, {nats.UserCredentials(bogus)}} {
		if nc, err := Connect(url, zerolog.Nop(), opts...); !errors.Is(err, ErrAuth) {
			if nc != nil {
				nc.Close()
			}
			t.Errorf("connect %d options: %v, want ErrAuth", len(opts), err)
		}
	}
	kvOf := func(user, pw string) jetstream.KeyValue {
		nc, err := Connect(url, zerolog.Nop(), nats.UserInfo(user, pw))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: DefaultBucket, History: 1})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, DefaultBucket)
		}
		if err != nil {
			t.Fatalf("%s: bucket: %v", user, err)
		}
		return kv
	}
	a, b := kvOf("a", "pa"), kvOf("b", "pb")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := a.Put(ctx, "fp.a.s00", []byte("mine")); err != nil {
		t.Fatalf("a puts its own key: %v", err)
	}
	short, cancel2 := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel2()
	if _, err := a.Put(short, "fp.b.s00", []byte("forged")); err == nil {
		t.Error("a put a key of b's")
	}
	if e, err := b.Get(ctx, "fp.a.s00"); err != nil || string(e.Value()) != "mine" {
		t.Errorf("b reads a's key: %v", err)
	}
	if _, err := b.Get(ctx, "fp.b.s00"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("b's key after a's forgery: %v", err)
	}
	nc, _ := Connect(url, zerolog.Nop(), nats.UserInfo("a", "pa"))
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if err := js.DeleteKeyValue(short, DefaultBucket); err == nil {
		t.Error("a deleted the bucket")
	}
}

// TestServeLoopbackOnly: without users the server will not listen
// beyond loopback.
func TestServeLoopbackOnly(t *testing.T) {
	if ns, err := Serve("0.0.0.0:0", t.TempDir()); !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), "without credentials") {
		if ns != nil {
			ns.Shutdown()
		}
		t.Fatalf("Serve on 0.0.0.0: %v", err)
	}
}

// TestFlagsAuth runs Flags.Start as the commands do: a node with its
// password file joins a -fleet-serve node that has users and both share
// evidence; a wrong password stops the run with ErrAuth, or with
// -fleet-optional lets it go on alone; the password never reaches the
// log; the serving node says when it has no authentication.
func TestFlagsAuth(t *testing.T) {
	dir := t.TempDir()
	users := filepath.Join(dir, "users")
	pwA, pwBad := filepath.Join(dir, "pw-a"), filepath.Join(dir, "pw-bad")
	for p, s := range map[string]string{users: "# nodes\na s3cret-a\nserver x\n", pwA: "s3cret-a\n", pwBad: "wrong\n"} {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	port := strconv.Itoa(freePort(t))
	var serveLog syncBuf
	srv := Flags{serve: "127.0.0.1:" + port, dir: t.TempDir(), node: "server", serveUsers: users, interval: 20 * time.Millisecond}
	sched := newScheduler(t, 1)
	n0, stop0, err := srv.Start(context.Background(), testFP, zerolog.New(&serveLog))
	if err != nil {
		t.Fatal(err)
	}
	defer stop0()
	r0 := relayT(t, sched, n0)
	feed(t, sched, observations(200, 3, 1))
	if err := r0.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	url := "nats://127.0.0.1:" + port
	var log syncBuf
	cl := Flags{url: url, node: "a", passwordFile: pwA, interval: 20 * time.Millisecond}
	n1, stop1, err := cl.Start(context.Background(), testFP, zerolog.New(&log))
	if err != nil {
		t.Fatalf("node a: %v", err)
	}
	defer stop1()
	relayT(t, newScheduler(t, 1), n1)
	eventually(t, 10*time.Second, func() error {
		if st := n1.Stats(); !st.Synced || st.Received == 0 {
			return fmt.Errorf("node a: %+v, want the server node's evidence", st)
		}
		return nil
	})

	bad := Flags{url: "nats://a:s3cret-pw@127.0.0.1:" + port, node: "a", interval: time.Second}
	_, _, err = bad.Start(context.Background(), testFP, zerolog.New(&log))
	if !errors.Is(err, ErrAuth) || strings.Contains(err.Error(), "s3cret-pw") {
		t.Errorf("wrong password: %v, want ErrAuth without the password", err)
	}
	bad.optional = true
	if n, stop, err := bad.Start(context.Background(), testFP, zerolog.New(&log)); err != nil || n != nil {
		t.Errorf("-fleet-optional: node %v, %v; want none and no error", n, err)
	} else {
		stop()
	}
	if !strings.Contains(log.String(), "refused") || strings.Contains(log.String(), "s3cret") {
		t.Errorf("log: %s", log.String())
	}

	down := Flags{url: "nats://a:s3cret-pw@127.0.0.1:" + strconv.Itoa(freePort(t)), node: "a", interval: time.Second}
	n, stop, err := down.Start(context.Background(), testFP, zerolog.New(&log))
	if err != nil || n == nil {
		t.Fatalf("server down: %v", err)
	}
	stop()
	if !strings.Contains(log.String(), "unreachable") || strings.Contains(log.String(), "s3cret") {
		t.Errorf("log of an unreachable server shows the password or no warning: %s", log.String())
	}

	open := Flags{serve: "127.0.0.1:0", dir: t.TempDir(), node: "solo", interval: time.Second}
	var openLog syncBuf
	_, stop, err = open.Start(context.Background(), testFP, zerolog.New(&openLog))
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if !strings.Contains(openLog.String(), "without authentication, on loopback only") {
		t.Errorf("no word of the missing authentication: %s", openLog.String())
	}
}

// TestFlagsNoJetStream: a server without JetStream stops the run at once
// with ErrNoJetStream, and Ctrl-C (ctx) is honoured.
func TestFlagsNoJetStream(t *testing.T) {
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("server did not start")
	}
	defer ns.Shutdown()
	f := Flags{url: "nats://" + ns.Addr().String(), node: "a", interval: time.Second}
	start := time.Now()
	_, _, err = f.Start(context.Background(), testFP, zerolog.Nop())
	if !errors.Is(err, ErrNoJetStream) || time.Since(start) > 3*time.Second {
		t.Errorf("no JetStream: %v after %v", err, time.Since(start))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start = time.Now()
	if _, _, err := f.Start(ctx, testFP, zerolog.Nop()); err == nil || time.Since(start) > time.Second {
		t.Errorf("cancelled: %v after %v", err, time.Since(start))
	}
}

// TestTLSFailures: a certificate that does not verify, and TLS asked of
// a server without it, are ErrTLS; the right CA connects.
func TestTLSFailures(t *testing.T) {
	dir := t.TempDir()
	ca1, cert, key := writeCerts(t, dir, "one")
	ca2, _, _ := writeCerts(t, dir, "two")
	tlsCfg, err := ServerTLS(cert, key, "")
	if err != nil {
		t.Fatal(err)
	}
	_, tlsURL := serveT(t, "127.0.0.1:0", ServeOptions{TLS: tlsCfg})
	_, plainURL := serveT(t, "127.0.0.1:0", ServeOptions{})
	for _, c := range []struct {
		name string
		url  string
		opts []nats.Option
	}{
		{"other CA", tlsURL, []nats.Option{nats.RootCAs(ca2)}},
		{"no CA", tlsURL, nil},
		{"CA against plain", plainURL, []nats.Option{nats.RootCAs(ca1)}},
	} {
		nc, err := Connect(c.url, zerolog.Nop(), c.opts...)
		if !errors.Is(err, ErrTLS) {
			if nc != nil {
				nc.Close()
			}
			t.Errorf("%s: %v, want ErrTLS", c.name, err)
		}
	}
	nc, err := Connect(tlsURL, zerolog.Nop(), nats.RootCAs(ca1))
	if err != nil || !nc.IsConnected() {
		t.Fatalf("right CA: %v", err)
	}
	nc.Close()
}

// writeCerts writes a CA and a server certificate it signs for
// 127.0.0.1, and returns their paths and the key's.
func writeCerts(t *testing.T, dir, name string) (ca, cert, key string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca " + name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	srvKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "server"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	caCert, _ := x509.ParseCertificate(caDER)
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(srvKey)
	write := func(file, typ string, der []byte) string {
		p := filepath.Join(dir, name+"-"+file)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("cert.pem", "CERTIFICATE", srvDER), write("key.pem", "EC PRIVATE KEY", keyDER)
}

// relayT relays between s and n every 10 ms until the test ends (before
// the node stops).
func relayT(t *testing.T, s *adaptive.Scheduler, n *Node) *relay.Relay {
	t.Helper()
	r, err := relay.Start(s, relay.Options{Fleet: n, Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// syncBuf is a log sink safe for concurrent writes.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestServeNKeys: a node listed by its public nkey signs in with its
// seed (-fleet-nkey), and only with it.
func TestServeNKeys(t *testing.T) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	dir := t.TempDir()
	users, seedFile := filepath.Join(dir, "users"), filepath.Join(dir, "seed")
	os.WriteFile(users, []byte("a "+pub+"\n"), 0o600)
	os.WriteFile(seedFile, seed, 0o600)
	us, err := ReadUsers(users)
	if err != nil || len(us) != 1 || us[0].NKey != pub {
		t.Fatalf("users %+v, %v", us, err)
	}
	_, url := serveT(t, "127.0.0.1:0", ServeOptions{Users: us})
	f := Flags{url: url, node: "a", nkeySeed: seedFile, interval: time.Second}
	n, stop, err := f.Start(context.Background(), testFP, zerolog.Nop())
	if err != nil || n == nil {
		t.Fatalf("with the seed: %v", err)
	}
	stop()

	// a's key, but publishing as node b: every put is refused, and the
	// refusal is the run's error.
	f2 := Flags{url: url, node: "b", nkeySeed: seedFile, interval: 10 * time.Millisecond}
	n2, stop2, err := f2.Start(context.Background(), testFP, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer stop2()
	sched := newScheduler(t, 1)
	r := relayT(t, sched, n2)
	feed(t, sched, observations(50, 2, 3))
	eventually(t, 10*time.Second, func() error {
		r.Flush(context.Background())
		if err := f2.Err(); !errors.Is(err, ErrAuth) {
			return fmt.Errorf("Err: %v, want ErrAuth", err)
		}
		return nil
	})
	if nc, err := Connect(url, zerolog.Nop(), nats.UserInfo("a", "guess")); !errors.Is(err, ErrAuth) {
		if nc != nil {
			nc.Close()
		}
		t.Errorf("without the seed: %v", err)
	}
}

// TestServeCannotStart: a server that cannot listen says why.
func TestServeCannotStart(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if ns, err := Serve(l.Addr().String(), t.TempDir()); err == nil || !strings.Contains(err.Error(), "address already in use") {
		if ns != nil {
			ns.Shutdown()
		}
		t.Errorf("Serve on a taken port: %v", err)
	}
}

// nodeOf starts node id, signed in with password pw, on the server at
// url, and waits until it has synced (the bucket is set up).
func nodeOf(t *testing.T, url, id, pw string, log zerolog.Logger) (*nats.Conn, *Node) {
	t.Helper()
	nc, err := Connect(url, zerolog.Nop(), nats.UserInfo(id, pw))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	n, err := Start(nc, DefaultOptions(id, testFP).WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	return nc, n
}

// TestBucketRefusesRollups: the bucket a node makes refuses a rollup
// header, which a node may send with a put of its own key: "all" purged
// every other node's values (the key-value client's buckets allow
// rollups, for its Purge).
func TestBucketRefusesRollups(t *testing.T) {
	_, url := serveT(t, "127.0.0.1:0", ServeOptions{Users: []Credential{{Node: "a", Password: "pa"}, {Node: "b", Password: "pb"}}})
	ncb, _ := nodeOf(t, url, "b", "pb", zerolog.Nop())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	jsb, _ := jetstream.New(ncb)
	kvb, err := jsb.KeyValue(ctx, DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	key := testFP.Hash + ".b.s00"
	if _, err := kvb.Put(ctx, key, []byte("b's")); err != nil {
		t.Fatal(err)
	}
	nca, err := Connect(url, zerolog.Nop(), nats.UserInfo("a", "pa"))
	if err != nil {
		t.Fatal(err)
	}
	defer nca.Close()
	jsa, _ := jetstream.New(nca)
	m := nats.NewMsg("$KV." + DefaultBucket + "." + testFP.Hash + ".a.s00")
	m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupAll)
	if _, err := jsa.PublishMsg(ctx, m); err == nil {
		t.Error("a's put of its own key with a rollup of all was taken")
	}
	if _, err := kvb.Get(ctx, key); err != nil {
		t.Errorf("b's key after a's rollup: %v", err)
	}
}

// TestUnsafeBucketWarned: a bucket that someone else made (a node may
// make the bucket) allowing rollups, or transforming subjects (a's puts
// stored under b's keys), lets one node purge or forge the others'
// values: the node says so, once, naming the bucket.
func TestUnsafeBucketWarned(t *testing.T) {
	for name, cfg := range map[string]jetstream.StreamConfig{
		"rollups": {AllowRollup: true},
		"transform": {SubjectTransform: &jetstream.SubjectTransformConfig{
			Source: "$KV." + DefaultBucket + ".*.a.*", Destination: "$KV." + DefaultBucket + ".{{wildcard(1)}}.b.{{wildcard(2)}}"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, url := serveT(t, "127.0.0.1:0", ServeOptions{Users: []Credential{{Node: "a", Password: "pa"}, {Node: "b", Password: "pb"}}})
			nca, err := Connect(url, zerolog.Nop(), nats.UserInfo("a", "pa"))
			if err != nil {
				t.Fatal(err)
			}
			defer nca.Close()
			jsa, _ := jetstream.New(nca)
			cfg.Name, cfg.Subjects, cfg.MaxMsgsPerSubject = "KV_"+DefaultBucket, []string{"$KV." + DefaultBucket + ".>"}, 1
			cfg.AllowDirect, cfg.DenyDelete, cfg.Discard = true, true, jetstream.DiscardNew
			if _, err := jsa.CreateStream(context.Background(), cfg); err != nil {
				t.Fatal(err)
			}
			var log syncBuf
			nodeOf(t, url, "b", "pb", zerolog.New(&log).Level(zerolog.WarnLevel))
			if got := strings.Count(log.String(), `lets a node purge or forge the others' values`); got != 1 || !strings.Contains(log.String(), `"bucket":"`+DefaultBucket+`"`) {
				t.Errorf("%d warnings of the bucket, want 1 naming it:\n%s", got, log.String())
			}
		})
	}
}
