// Package fleet shares what Schedulers learn across a fleet of machines
// of the same kind through NATS JetStream key-value (DESIGN.md §
// Persistence): a new server starts from what the others have learned
// instead of exploring from scratch.
//
// Posteriors are sufficient statistics. Each node publishes its own
// evidence (bandit.Stats: N, Σy, Σy² per bucket and backend) under keys
// of its own, FINGERPRINT.NODE.sNN, cumulative, and sums the other
// nodes' evidence with the same fingerprint per key (the merge ledger,
// ledger.go, pure and tested without a server). The node never calls the
// Scheduler: Exchange takes the Scheduler's changes as data and gives
// back the changed totals, which package relay folds into the priors
// (adaptive.Fold.Foreign). The network is the node's own goroutine's,
// never Select's or Observe's. Keys of departed nodes age out with the
// bucket's MaxAge (nats-server 2.9, which has no per-key TTL, is
// enough).
//
// Faults: a server down at start or lost later leaves the Scheduler on
// its own evidence while the connection retries (Connect, Backoff);
// everything is republished on reconnection. Values that do not decode,
// or come from other hardware, are skipped and counted (Stats). A node
// restarted under the same NodeID reads its values back before it
// publishes, so nothing is counted twice.
//
// # Usage
//
// With a server elsewhere, fleet.Connect("nats://HOST:4222", logger,
// nats.UserCredentials("node.creds")) gives the connection,
// fleet.Start(nc, fleet.DefaultOptions(nodeID, fingerprint)) the node,
// and relay.Start(s, relay.Options{Fleet: node}) joins it to a
// Scheduler; close the relay, then the node (it publishes one last
// time), then the connection. The embedded server (Serve) and the
// command-line flags (Flags) sit at the edge, for the commands.
// ExampleStart (example_test.go) runs two nodes through an embedded
// server.
//
// On one machine, or in a demo, the server can run inside the process:
// fleet.Serve("127.0.0.1:4222", dir) listens on loopback (other
// processes connect to it), fleet.Serve("", dir) nowhere, and
// fleet.Connect(nats.DefaultURL, logger, fleet.InProcess(ns)) reaches it
// without a socket.
package fleet
