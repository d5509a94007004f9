// Row reductions: one block of BLOCK threads per row of cols values.

extern "C" __global__ void softmax_f32(float* out, const float* in, int rows, int cols) {
    __shared__ float red[BLOCK];
    for (int row = blockIdx.x; row < rows; row += gridDim.x) {
        const float* x = in + (long long)row * cols;
        float* y = out + (long long)row * cols;
        float m = neg_inf();
        for (int i = threadIdx.x; i < cols; i += BLOCK) m = fmaxf(m, x[i]);
        m = block_max(m, red);
        float s = 0.0f;
        for (int i = threadIdx.x; i < cols; i += BLOCK) {
            float e = expf(x[i] - m);
            y[i] = e;
            s += e;
        }
        s = block_sum(s, red);
        float inv = 1.0f / s;
        for (int i = threadIdx.x; i < cols; i += BLOCK) y[i] *= inv;
    }
}

extern "C" __global__ void rmsnorm_f32(float* out, const float* in, const float* w, int rows, int cols, float eps) {
    __shared__ float red[BLOCK];
    for (int row = blockIdx.x; row < rows; row += gridDim.x) {
        const float* x = in + (long long)row * cols;
        float* y = out + (long long)row * cols;
        float ss = 0.0f;
        for (int i = threadIdx.x; i < cols; i += BLOCK) ss += x[i] * x[i];
        ss = block_sum(ss, red);
        float r = 1.0f / sqrtf(ss / cols + eps);
        for (int i = threadIdx.x; i < cols; i += BLOCK) y[i] = x[i] * r * w[i];
    }
}

extern "C" __global__ void layernorm_f32(float* out, const float* in, const float* w, const float* b, int rows, int cols, float eps) {
    __shared__ float red[BLOCK];
    for (int row = blockIdx.x; row < rows; row += gridDim.x) {
        const float* x = in + (long long)row * cols;
        float* y = out + (long long)row * cols;
        float s = 0.0f;
        for (int i = threadIdx.x; i < cols; i += BLOCK) s += x[i];
        float mean = block_sum(s, red) / cols;
        float v = 0.0f;
        for (int i = threadIdx.x; i < cols; i += BLOCK) {
            float d = x[i] - mean;
            v += d * d;
        }
        float r = 1.0f / sqrtf(block_sum(v, red) / cols + eps);
        for (int i = threadIdx.x; i < cols; i += BLOCK) y[i] = (x[i] - mean) * r * w[i] + b[i];
    }
}

// rope_f32 rotates the halves of each head vector of [B,]T,H,D: element j
// and j+D/2 of the head at time t turn by (pos+t)·base^(-2j/D). One thread
// per pair; n is the number of pairs (B·T·H·D/2).
extern "C" __global__ void rope_f32(float* out, const float* in, int T, int H, int D, int pos, float base, long long n) {
    int half = D / 2;
    for (long long i = gid(); i < n; i += gstride()) {
        int j = (int)(i % half);
        long long head = i / half;
        int t = (int)((head / H) % T);
        float freq = powf(base, -2.0f * (float)j / (float)D);
        float angle = (float)(pos + t) * freq;
        float c = cosf(angle), s = sinf(angle);
        long long o = head * D;
        float x1 = in[o + j], x2 = in[o + j + half];
        out[o + j] = x1 * c - x2 * s;
        out[o + j + half] = x2 * c + x1 * s;
    }
}

// argmax_before reports whether value v at index i comes before bv at bi
// in argmax's order: larger values first, equal ones by lower index, NaN
// after every number (by index among NaN). A total order, so the
// reduction's result does not depend on how it pairs values. The NaN
// test reads the bits: it holds under any floating-point mode.
static __device__ __forceinline__ bool argmax_before(float v, int i, float bv, int bi) {
    bool vnan = (__float_as_int(v) & 0x7fffffff) > 0x7f800000;
    bool bnan = (__float_as_int(bv) & 0x7fffffff) > 0x7f800000;
    if (vnan || bnan) return vnan ? (bnan && i < bi) : true;
    return v > bv || (v == bv && i < bi);
}

// argmax_f32 writes, for each row of cols values, the index of its
// largest value as a float (the lowest index among equal ones; a row of
// NaN gives 0): each thread scans a strided share of the row, then the
// block reduces (value, index) pairs in shared memory.
extern "C" __global__ void argmax_f32(float* out, const float* in, int rows, int cols) {
    __shared__ float rv[BLOCK];
    __shared__ int ri[BLOCK];
    for (int row = blockIdx.x; row < rows; row += gridDim.x) {
        const float* x = in + (long long)row * cols;
        float bv = __int_as_float(0x7fc00000);
        int bi = cols;
        for (int i = threadIdx.x; i < cols; i += BLOCK) {
            if (argmax_before(x[i], i, bv, bi)) {
                bv = x[i];
                bi = i;
            }
        }
        rv[threadIdx.x] = bv;
        ri[threadIdx.x] = bi;
        __syncthreads();
        for (int s = BLOCK / 2; s > 0; s >>= 1) {
            int t = threadIdx.x;
            if (t < s && argmax_before(rv[t + s], ri[t + s], rv[t], ri[t])) {
                rv[t] = rv[t + s];
                ri[t] = ri[t + s];
            }
            __syncthreads();
        }
        if (threadIdx.x == 0) out[row] = (float)ri[0];
        __syncthreads();
    }
}
