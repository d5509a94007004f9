// Package kernels is adaptsched's op vocabulary and its host kernels.
//
// An op is data: a [Spec] names the [Op], the [DType] of its weights, the
// input shapes and the [Params]. [Spec.Validate] rejects malformed specs
// with a [*SpecError] naming the op, input and dimension; [Spec.Work]
// counts FLOPs and bytes for the cost model. Tensors are passed as []byte
// in their storage format (row-major, host byte order; [AsF32] views f32
// bytes), and [CheckBuffers] checks their sizes against a spec.
//
// Three layers run ops on the host:
//
//   - [Reference] is plain Go with float64 sums: the correctness oracle
//     that every backend and fast kernel is tested against.
//   - [CPU] runs the same ops fast: parallel over rows, heads or blocks on
//     a [Pool] of long-lived workers, matrix products through the [Gemm]
//     its caller supplies (the CPU backend's OpenBLAS or gonum; the package
//     has no matrix product of its own), Q8_0 products through AVX2/FMA where
//     the CPU has it, scratch from sync.Pools so a call allocates nothing.
//   - [Quantize], [QuantizeInto] and [DequantizeInto] encode and decode
//     ggml's Q8_0 and Q4_0 blocks bit for bit, and IEEE binary16
//     ([F16FromFloat32], [F16ToFloat32]).
//
// Semantics of note: QuantizedMatMul computes A·Wᵀ with W [N,K] stored as
// N rows of K quantized values (ggml's layout); Attention is grouped-query
// (query head h reads KV head h/(Hq/Hkv)) and, when causal, query i of S
// sees keys j ≤ T−S+i; RoPE rotates halves (i, i+D/2) as HF Llama does.
//
// # Concurrency
//
// Reference, CheckBuffers and the quantizers are pure functions. A Pool is
// safe for concurrent use, and Parallel may nest: the calling goroutine
// works through the chunks itself, so a call never waits on busy workers.
// A CPU is safe for concurrent use provided its Gemm is: a Gemm passed to
// [NewCPU] must be safe for concurrent calls, since concurrent Run calls
// and batched products call it from several goroutines at once.
//
// # Usage
//
// ExampleReference (example_test.go) validates a Spec, computes it with
// the reference kernel (the oracle) and checks the fast CPU kernel, on a
// Pool, against it; ExampleQuantize encodes and decodes a Q8_0 block.
package kernels
