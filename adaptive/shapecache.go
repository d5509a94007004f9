package adaptive

import (
	"hash/maphash"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/adaptsched/adaptsched/kernels"
)

// BucketID is the dense index of a bucket within one Scheduler, assigned in
// order of first sight; Scheduler.BucketName turns it back into the
// bucket's stable name.
type BucketID uint32

// maxKeyInputs is the most inputs a catalogue op takes (Attention,
// LayerNorm); shapeKey holds that many shapes inline.
const maxKeyInputs = 3

// maxOpaqueInputs is the most inputs kernels.Spec.Validate accepts of an
// Opaque op.
const maxOpaqueInputs = 16

// shapeKey is what the hot path hashes to find a bucket without computing
// Work (which allocates): the op, dtype and every dimension of a catalogue
// op, or an opaque op's name and what decides its Work (and so its size
// class). It is 72 bytes: with its entry, 104 (shapeSlot).
type shapeKey struct {
	// head packs the op, dtype, number of inputs, Params.Causal (it
	// decides whether an Attention shape is valid) and each input's rank,
	// one byte each, and in its top byte whether the dims hold an
	// Attention's Params.Keys in place of its values' length (which valid
	// specs give equal to its keys').
	head uint64
	// dims holds the dimensions of a catalogue op, two 32-bit values per
	// word (input i's dimension j at i·MaxRank+j); an opaque op's FLOPs,
	// bytes and elements.
	dims [maxKeyInputs * kernels.MaxRank / 2]uint64
	name string // Opaque ops only
}

// set makes k, zero before, the lookup key of spec, in place (returning
// the 72-byte key by value copies it twice); ok is false for a spec that
// no valid spec resembles (too many inputs, too high a rank, parameters
// Validate rejects whatever the shapes), which the slow path then rejects
// with Validate's error, and for a dimension of 2^32 or more (dimensions
// are kept in 32 bits to keep the key small), which the slow path serves
// without the cache. The other parameters (a RoPE position, a scale)
// do not change the bucket, so they stay out of the key, but a position
// Validate rejects for the shapes makes ok false (Spec.PosFits); an
// Attention's Keys, which changes its work, is in it (keyAttentionKeys).
func (k *shapeKey) set(spec *kernels.Spec) (ok bool) {
	k.head = uint64(spec.Op) | uint64(spec.DType)<<8 | uint64(b2u(spec.Params.Causal))<<24
	if p := &spec.Params; !finite32(p.Scale) || !(p.Eps >= 0) || !(p.RopeBase >= 0) ||
		math.IsInf(float64(p.Eps), 0) || math.IsInf(float64(p.RopeBase), 0) || p.Pos < 0 {
		return false
	}
	if spec.Op == kernels.Opaque {
		// An opaque op's Work is its FLOPs and bytes, or its elements as
		// f32 when the bytes are unknown: keying on those rather than on
		// the size class spares a call and a logarithm before the lookup.
		// The key holds no input count or rank: a spec Validate rejects
		// for those, or for an input over MaxElements, must not share the
		// key of a valid one, so it goes to the slow path
		// (TestShapeCacheOpaqueInvalid).
		if len(spec.In) > maxOpaqueInputs {
			return false
		}
		var elems int64
		for _, sh := range spec.In {
			if len(sh) > kernels.MaxRank {
				return false
			}
			n := int64(1)
			for _, d := range sh {
				// No division on the hot path: bit lengths summing to 63
				// or less cannot overflow, and past that the product is
				// over MaxElements anyway.
				if d <= 0 || bits.Len64(uint64(n))+bits.Len64(uint64(d)) > 63 {
					return false
				}
				if n *= int64(d); n > kernels.MaxElements {
					return false
				}
			}
			elems += n
		}
		if spec.Params.FLOPs < 0 || spec.Params.Bytes < 0 {
			return false
		}
		k.dims[0], k.dims[1], k.dims[2] = uint64(spec.Params.FLOPs), uint64(spec.Params.Bytes), uint64(elems)
		k.name = spec.Params.Name
		return true
	}
	if len(spec.In) > maxKeyInputs {
		return false
	}
	k.head |= uint64(len(spec.In)) << 16
	for i, sh := range spec.In {
		if len(sh) > kernels.MaxRank {
			return false
		}
		k.head |= uint64(len(sh)) << (32 + 8*i)
		for j, d := range sh {
			if uint64(d) > math.MaxUint32 {
				return false
			}
			x := i*kernels.MaxRank + j
			k.dims[x/2] |= uint64(d) << (32 * (x % 2))
		}
	}
	// The key leaves Pos out: an invalid one goes to the slow path, which
	// rejects it (TestShapeCachePosInvalid).
	if !spec.PosFits() {
		return false
	}
	return spec.Params.Keys == 0 || k.keyAttentionKeys(spec)
}

// keyAttentionKeys puts an Attention's Params.Keys in the key in place of
// its values' length (input 2's dimension 2) and says so in the head.
// It returns false for a spec that is no Attention, whose Keys no valid
// spec has, or whose values are not shaped as its keys (an invalid spec
// that the key could not tell from a valid one).
func (k *shapeKey) keyAttentionKeys(spec *kernels.Spec) bool {
	keys := spec.Params.Keys
	if spec.Op != kernels.Attention || len(spec.In) != 3 || len(spec.In[1]) != 4 || keys < 0 ||
		uint64(keys) > math.MaxUint32 || !spec.In[1].Equal(spec.In[2]) {
		return false
	}
	const x = 2*kernels.MaxRank + 2
	k.dims[x/2] = k.dims[x/2]&^(math.MaxUint32<<(32*(x%2))) | uint64(keys)<<(32*(x%2))
	k.head |= 1 << 56
	return true
}

func finite32(f float32) bool { return !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) }

// nameSeed seeds the hash of opaque ops' names (the hash only places keys
// in the shape table).
var nameSeed = maphash.MakeSeed()

// hash returns the key's hash: its low bits index a shard's table, its
// high bits pick the shard. The words are mixed by independent 64×64→128
// multiplications (wyhash's mum) rather than a chain, so that the hash
// costs a few cycles of latency before the table lookup can start.
func (k *shapeKey) hash() uint64 {
	const (
		p0 = 0xa0761d6478bd642f
		p1 = 0xe7037ed1a0b428db
		p2 = 0x8ebc6af09c88c6e3
		p3 = 0x589965cc75374cc3
	)
	h := mum(k.head^p0, k.dims[0]^p1) ^ mum(k.dims[1]^p2, k.dims[2]^p3) ^
		mum(k.dims[3]^p1, k.dims[4]^p0) ^ mum(k.dims[5]^p3, p2)
	if k.name != "" {
		h ^= maphash.String(nameSeed, k.name)
	}
	return mum(h, p1)
}

// equal reports whether k and o are the same key. The generated == calls
// memequal for the dimensions and again for the name.
func (k *shapeKey) equal(o *shapeKey) bool {
	return k.head == o.head && k.dims[0] == o.dims[0] && k.dims[1] == o.dims[1] && k.dims[2] == o.dims[2] &&
		k.dims[3] == o.dims[3] && k.dims[4] == o.dims[4] && k.dims[5] == o.dims[5] && k.name == o.name
}

// mum folds the 128-bit product of a and b to 64 bits.
func mum(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// The shape cache: every shape seen, its entry kept in shapeEntries in
// first-sight order, and found through its shard's shapeTable, an
// open-addressing index of 32-bit words (a tag of the hash and the
// entry's position), at most half full, with linear probing. It grows
// with the shapes seen and never starts over. Rule: no bound on the
// shapes cached short of maxShapes. Reason: a bound that restarts the
// cache makes every Select past it a miss, a validation and an
// allocation (1,091 ns and one allocation per op at 200,000 shapes); a
// decode loop whose KV length grows pays about 220 bytes per new shape
// instead (BenchmarkSelectObserve's 1M case reports B/bucket).
//
// Rule: the entries are in one first-sight order for the whole cache,
// not one per shard. Reason: that is the order an inference loop replays
// its ops in, so consecutive lookups read consecutive entries, which the
// hardware prefetches; an order per shard interleaved as many streams as
// shards (8), and made a decision over a million shapes 1.15-1.20 times
// as costly (BenchmarkSelectObserve's 1M case). The random probes land
// in an index of 4 bytes a slot (10,000 shapes: 128 KiB of index, where
// a table of the entries themselves at most half full would be MiBs,
// each probe a memory latency). Rule: index words
// are 32 bits, the tag taking the bits the position leaves. Reason: at a
// million shapes the probe is a memory latency, and an index of 64-bit
// words twice the bytes that a decision's other lines evict from the
// caches (0.95-0.96 times the decision with 64-bit words).
//
// Lookups take no lock: an entry is written before its index word is
// stored (atomically), entries never move (segments), and an index that
// has been outgrown is replaced, never changed otherwise.

// shapeEntries holds the cached shapes' entries in first-sight order, in
// segments that never move: segment 0 and 1 hold 16 entries, each later
// one twice the one before, made as the entries reach it. Adds take mu;
// lookups read the segments without it.
type shapeEntries struct {
	mu   sync.Mutex
	n    uint32 // entries in use
	segs [entrySegs]atomic.Pointer[entrySegment]
}

// entrySegment is one segment of shapeEntries.
type entrySegment struct{ slots []shapeSlot }

const (
	firstSegBits = 4 // segments 0 and 1 hold 1<<firstSegBits entries
	// maxShapes is the most shapes the cache holds: position+1 fits an
	// index word. A shape past it is served uncached, as one the cache
	// cannot key is (Scheduler.miss): 2^31 shapes are 220 GB of entries.
	maxShapes = 1 << 31
	entrySegs = 32 - firstSegBits // segments that hold maxShapes
)

// segOf returns the segment of position p and p's place in it.
func segOf(p uint32) (seg int, i uint32) {
	seg = bits.Len32(p >> firstSegBits)
	if seg == 0 {
		return 0, p
	}
	return seg, p - 1<<(seg+firstSegBits-1)
}

// at returns the entry at position p (one in use).
func (c *shapeEntries) at(p uint32) *shapeSlot {
	seg, i := segOf(p)
	return &c.segs[seg].Load().slots[i]
}

// add appends k's entry e and returns its position; ok is false, and
// nothing added, past maxShapes.
func (c *shapeEntries) add(k *shapeKey, e entry) (p uint32, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p = c.n; p >= maxShapes {
		return 0, false
	}
	seg, i := segOf(p)
	sg := c.segs[seg].Load()
	if sg == nil {
		sg = &entrySegment{slots: make([]shapeSlot, max(1<<firstSegBits, p))}
		c.segs[seg].Store(sg)
	}
	sl := &sg.slots[i]
	sl.key, sl.b, sl.node, sl.out, sl.id, sl.capable = *k, e.b, e.node, e.out, e.id, e.capable
	c.n++
	return p, true
}

// shapeTable is one shard's index of the entries (see above).
type shapeTable struct {
	index   []atomic.Uint32 // a power of two; 0: empty, else tag | position+1
	n       int             // words in use
	posMask uint32          // the bits of an index word that hold position+1
	entries *shapeEntries
}

// shapeSlot is one cached shape: 104 bytes.
type shapeSlot struct {
	key     shapeKey
	b       *bucket
	node    *shapeNode
	out     int64
	id      BucketID
	capable Mask
}

// tag returns the tag of hash h in an index word: the hash's high 32
// bits less the position's. The hash's low bits place the word, so the
// tag is independent of where it lies; a probe that meets another key's
// word rarely reads that key's entry.
func (t *shapeTable) tag(h uint64) uint32 { return uint32(h>>32) &^ t.posMask }

// find returns the entry cached for k, whose hash is h.
func (t *shapeTable) find(k *shapeKey, h uint64) (entry, bool) {
	if t == nil {
		return entry{}, false
	}
	mask := uint64(len(t.index) - 1)
	tg := t.tag(h)
	for i := h & mask; ; i = (i + 1) & mask {
		w := t.index[i].Load()
		if w == 0 {
			return entry{}, false
		}
		if w&^t.posMask != tg {
			continue
		}
		if sl := t.entries.at(w&t.posMask - 1); sl.key.equal(k) {
			return entry{b: sl.b, node: sl.node, id: sl.id, capable: sl.capable, out: sl.out}, true
		}
	}
}

// link stores the index word of the entry at position pos−1, hash h.
func (t *shapeTable) link(h uint64, pos uint32) {
	mask := uint64(len(t.index) - 1)
	i := h & mask
	for t.index[i].Load() != 0 {
		i = (i + 1) & mask
	}
	t.index[i].Store(t.tag(h) | pos)
	t.n++
}

// grown returns an index of c's entries holding t's words (t nil: none),
// with room for one more word and for positions+1 up to pos: twice t's
// size where t would be more than half full, its position bits twice pos
// where pos does not fit them.
func (t *shapeTable) grown(c *shapeEntries, pos uint32) *shapeTable {
	size, n := 16, 0
	if t != nil {
		size, n = len(t.index), t.n
	}
	for 2*(n+1) > size {
		size *= 2
	}
	g := &shapeTable{index: make([]atomic.Uint32, size), entries: c,
		posMask: uint32(uint64(1)<<min(bits.Len32(pos)+1, 32) - 1)}
	if t != nil {
		for i := range t.index {
			if w := t.index[i].Load(); w != 0 {
				p := w & t.posMask
				g.link(c.at(p-1).key.hash(), p)
			}
		}
	}
	return g
}

// add caches e under k (hash h) in c and sh's index and returns the entry
// cached, e or one another goroutine added first. An index too full or
// too narrow for the entry's position is replaced by a grown one; past
// maxShapes e is served uncached.
func (sh *shard) add(c *shapeEntries, k *shapeKey, h uint64, e entry) entry {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	t := sh.tab.Load()
	if got, ok := t.find(k, h); ok {
		return got
	}
	p, ok := c.add(k, e)
	if !ok {
		return e
	}
	if pos := p + 1; t == nil || 2*(t.n+1) > len(t.index) || pos > t.posMask {
		t = t.grown(c, pos)
		t.link(h, pos)
		sh.tab.Store(t)
	} else { // a published index: the entry is written before its word
		t.link(h, pos)
	}
	e.b.shapes.Add(1)
	return e
}

// shapeNode is what one cached shape learns on its own: how often it was
// selected while its bucket held other shapes, its own bucket once it was
// selected Config.ShapeHits times (Scheduler.shapeBucket), and its model.
type shapeNode struct {
	hits  atomic.Int32
	child atomic.Pointer[bucket]
	// lnModel is ln of each arm's model estimate of this shape, µs: what a
	// bucket of several shapes measures of an arm is taken against its
	// shape's model (engine.observe), so that a ratio it learns and
	// publishes is the model's error, not the spread of its shapes' sizes.
	// In 32 bits (a relative error of 1e-7 in a ratio that noise moves
	// by percents), as a node is kept per shape (B/bucket, 1M case).
	lnModel [MaxBackends]float32
}

// lookup returns spec's cache entry, making its bucket on first sight.
func (s *Scheduler) lookup(spec *kernels.Spec) (entry, error) {
	var k shapeKey
	if !k.set(spec) {
		return s.miss(*spec, nil, nil, 0)
	}
	h := k.hash()
	sh := &s.shards[h>>32&s.shardMask]
	if ent, ok := sh.tab.Load().find(&k, h); ok {
		return ent, nil
	}
	return s.miss(*spec, sh, &k, h)
}
