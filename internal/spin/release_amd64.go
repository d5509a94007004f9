//go:build !race

package spin

// release stores 0 in *p with a plain MOV. Rule: on amd64 a plain store
// is a release. Reason: x86 keeps a store after every load and store
// before it (TSO), and a call to an assembly function is a point the
// compiler moves no memory access across. Under the race detector the
// portable atomic store runs instead (release_other.go), which the
// detector sees as the synchronisation it is.
//
//go:noescape
func release(p *uint32)
