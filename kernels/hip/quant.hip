// ggml block formats: Q8_0 is an f16 scale and 32 int8 values (34 bytes);
// Q4_0 is an f16 scale and 16 bytes of nibbles (18 bytes), the low nibble
// of byte j holding value j and the high nibble value j+16, each (q-8)·d.

// q8_0_at and q4_0_at decode element e of data whose rows are whole
// blocks, so that element e lies in block e/32 wherever its row starts.
static __device__ __forceinline__ float q8_0_at(const unsigned char* in, long long e) {
    const unsigned char* blk = in + (e / 32) * 34;
    return load_f16(blk) * (float)(signed char)blk[2 + e % 32];
}

static __device__ __forceinline__ float q4_0_at(const unsigned char* in, long long e) {
    const unsigned char* blk = in + (e / 32) * 18;
    int j = (int)(e % 32);
    int q = j < 16 ? (blk[2 + j] & 0x0f) : (blk[2 + j - 16] >> 4);
    return load_f16(blk) * (float)(q - 8);
}

extern "C" __global__ void dequant_q8_0(float* out, const unsigned char* in, long long n) {
    for (long long i = gid(); i < n; i += gstride()) out[i] = q8_0_at(in, i);
}

extern "C" __global__ void dequant_q4_0(float* out, const unsigned char* in, long long n) {
    for (long long i = gid(); i < n; i += gstride()) out[i] = q4_0_at(in, i);
}

extern "C" __global__ void dequant_f16(float* out, const unsigned char* in, long long n) {
    for (long long i = gid(); i < n; i += gstride()) out[i] = load_f16(in + 2 * i);
}

// get_rows_f32, _f16, _q8_0 and _q4_0 are GetRows: output row k is row
// idx[k] of the table [V, D], decoded as the dequant kernels decode; n is
// the number of outputs (len(idx)·D), one thread each. A kernel cannot
// return an error, so an index that is not a row (not an integer in
// [0, V), NaN) writes a row of NaN instead. V <= 2^24 (Validate): every
// row's index is exact as a float.

// get_rows_at returns the table element of output i, or -1 when its index
// is not a row. NaN is tested on the bits, as in argmax_before, so that
// the test holds under any floating-point mode.
static __device__ __forceinline__ long long get_rows_at(const float* idx, int V, int D, long long i) {
    float v = idx[i / D];
    if ((__float_as_int(v) & 0x7fffffff) > 0x7f800000) return -1;
    if (!(v >= 0.0f && v < (float)V) || v != (float)(int)v) return -1;
    return (long long)(int)v * D + i % D;
}

extern "C" __global__ void get_rows_f32(float* out, const float* table, const float* idx, int V, int D, long long n) {
    for (long long i = gid(); i < n; i += gstride()) {
        long long e = get_rows_at(idx, V, D, i);
        out[i] = e < 0 ? __int_as_float(0x7fc00000) : table[e];
    }
}

extern "C" __global__ void get_rows_f16(float* out, const unsigned char* table, const float* idx, int V, int D, long long n) {
    for (long long i = gid(); i < n; i += gstride()) {
        long long e = get_rows_at(idx, V, D, i);
        out[i] = e < 0 ? __int_as_float(0x7fc00000) : load_f16(table + 2 * e);
    }
}

extern "C" __global__ void get_rows_q8_0(float* out, const unsigned char* table, const float* idx, int V, int D, long long n) {
    for (long long i = gid(); i < n; i += gstride()) {
        long long e = get_rows_at(idx, V, D, i);
        out[i] = e < 0 ? __int_as_float(0x7fc00000) : q8_0_at(table, e);
    }
}

extern "C" __global__ void get_rows_q4_0(float* out, const unsigned char* table, const float* idx, int V, int D, long long n) {
    for (long long i = gid(); i < n; i += gstride()) {
        long long e = get_rows_at(idx, V, D, i);
        out[i] = e < 0 ? __int_as_float(0x7fc00000) : q4_0_at(table, e);
    }
}

// qmatmul_q8_0 and qmatmul_q4_0 compute out[m,n] = Σ_k a[m,k]·W[n,k] with
// W [N,K] quantized by rows. A block takes QROWS weight rows and QM
// activation rows. Each group of QLANES threads walks one weight row,
// QSUB quantized blocks at a time, thread j of a sub-group taking value j
// of its block, so that a group's loads of the weights and of the
// activations are contiguous; each value, dequantized once, is applied to
// the QM activation rows, and the group sums its threads' partial sums in
// shared memory at the end. On an H100 the former kernel (a block of 256
// threads per output, 24 of them busy at K = 768, the weights re-read for
// every activation row) ran the 32000×768 LM head at batch 16 in 2.3 ms;
// one sub-group per row fixed that but left a 768-row matvec with 24
// dependent steps per group. The groups are logical ones, reduced through
// shared memory, so the kernel does not depend on the hardware's warp or
// wavefront size.
#define QSUB 4
#define QLANES (32 * QSUB)
#define QROWS (BLOCK / QLANES)
#define QM 8

// qmatmul_apply adds value q (dequantized) at column k to the tile's
// activation rows.
static __device__ __forceinline__ void qmatmul_apply(float* acc, float q, const float* a, int m0, int M, int K, int k) {
    for (int i = 0; i < QM; i++) {
        if (m0 + i >= M) break;
        acc[i] += q * a[(long long)(m0 + i) * K + k];
    }
}

// qmatmul_store sums each group's partial sums (red: QM × BLOCK floats of
// shared memory, by halving) and writes the tile's outputs for weight row n.
static __device__ __forceinline__ void qmatmul_store(float* out, float* acc, float (*red)[BLOCK], int m0, int M, int n, int N) {
    int lane = threadIdx.x % QLANES;
    for (int i = 0; i < QM; i++) red[i][threadIdx.x] = acc[i];
    __syncthreads();
    for (int s = QLANES / 2; s > 0; s >>= 1) {
        if (lane < s) {
            for (int i = 0; i < QM; i++) red[i][threadIdx.x] += red[i][threadIdx.x + s];
        }
        __syncthreads();
    }
    if (lane < QM && n < N && m0 + lane < M) out[(long long)(m0 + lane) * N + n] = red[lane][threadIdx.x - lane];
    __syncthreads();
}

extern "C" __global__ void qmatmul_q8_0(float* out, const float* a, const unsigned char* w, int M, int N, int K) {
    __shared__ float red[QM][BLOCK];
    int nb = K / 32, lane = threadIdx.x % QLANES, grp = threadIdx.x / QLANES;
    int sub = lane / 32, j = lane % 32;
    for (int m0 = blockIdx.y * QM; m0 < M; m0 += gridDim.y * QM) {
        for (int n0 = blockIdx.x * QROWS; n0 < N; n0 += gridDim.x * QROWS) {
            int n = n0 + grp;
            float acc[QM];
            for (int i = 0; i < QM; i++) acc[i] = 0.0f;
            if (n < N) {
                const unsigned char* row = w + (long long)n * nb * 34;
                for (int b = sub; b < nb; b += QSUB) {
                    const unsigned char* blk = row + (long long)b * 34;
                    qmatmul_apply(acc, load_f16(blk) * (float)(signed char)blk[2 + j], a, m0, M, K, b * 32 + j);
                }
            }
            qmatmul_store(out, acc, red, m0, M, n, N);
        }
    }
}

extern "C" __global__ void qmatmul_q4_0(float* out, const float* a, const unsigned char* w, int M, int N, int K) {
    __shared__ float red[QM][BLOCK];
    int nb = K / 32, lane = threadIdx.x % QLANES, grp = threadIdx.x / QLANES;
    int sub = lane / 32, j = lane % 32;
    for (int m0 = blockIdx.y * QM; m0 < M; m0 += gridDim.y * QM) {
        for (int n0 = blockIdx.x * QROWS; n0 < N; n0 += gridDim.x * QROWS) {
            int n = n0 + grp;
            float acc[QM];
            for (int i = 0; i < QM; i++) acc[i] = 0.0f;
            if (n < N) {
                const unsigned char* row = w + (long long)n * nb * 18;
                for (int b = sub; b < nb; b += QSUB) {
                    const unsigned char* blk = row + (long long)b * 18;
                    int v = blk[2 + (j & 15)];
                    int q = j < 16 ? (v & 0x0f) : (v >> 4);
                    qmatmul_apply(acc, load_f16(blk) * (float)(q - 8), a, m0, M, K, b * 32 + j);
                }
            }
            qmatmul_store(out, acc, red, m0, M, n, N);
        }
    }
}
