// Element-wise ops over n f32 values, grid-stride loops. Add and Mul
// broadcast b over the trailing nb elements of a (nb divides n).

extern "C" __global__ void add_f32(float* out, const float* a, const float* b, long long n, long long nb) {
    for (long long i = gid(); i < n; i += gstride()) out[i] = a[i] + b[i % nb];
}

extern "C" __global__ void mul_f32(float* out, const float* a, const float* b, long long n, long long nb) {
    for (long long i = gid(); i < n; i += gstride()) out[i] = a[i] * b[i % nb];
}

extern "C" __global__ void scale_f32(float* out, const float* a, float s, long long n) {
    for (long long i = gid(); i < n; i += gstride()) out[i] = a[i] * s;
}

extern "C" __global__ void silu_f32(float* out, const float* a, long long n) {
    for (long long i = gid(); i < n; i += gstride()) {
        float x = a[i];
        out[i] = x / (1.0f + expf(-x));
    }
}

// gelu_f32 is the tanh approximation.
extern "C" __global__ void gelu_f32(float* out, const float* a, long long n) {
    for (long long i = gid(); i < n; i += gstride()) {
        float x = a[i];
        out[i] = 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    }
}

extern "C" __global__ void swiglu_f32(float* out, const float* gate, const float* up, long long n) {
    for (long long i = gid(); i < n; i += gstride()) {
        float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

extern "C" __global__ void copy_u8(unsigned char* out, const unsigned char* in, long long n) {
    for (long long i = gid(); i < n; i += gstride()) out[i] = in[i];
}

// kv_append_f32 writes rows [B,S,H,D] into the KV cache [B,H,C,D] at
// positions pos to pos+S-1 (KVAppend). out is the cache itself when the
// op runs in place; otherwise the cache's other positions are copied
// first, the new rows' skipped so that no thread overwrites one.
extern "C" __global__ void kv_append_f32(float* out, const float* cache, const float* rows, int S, int H, int C,
                                         int D, int pos, long long nCache, long long nRows) {
    if (out != cache) {
        for (long long i = gid(); i < nCache; i += gstride()) {
            int c = (int)((i / D) % C);
            if (c < pos || c >= pos + S) out[i] = cache[i];
        }
    }
    for (long long i = gid(); i < nRows; i += gstride()) {
        long long r = i / D;
        int h = (int)(r % H);
        int s = (int)((r / H) % S);
        long long b = r / H / S;
        out[((b * H + h) * C + pos + s) * D + i % D] = rows[i];
    }
}

// transpose_f32 swaps the last two axes of batch matrices rows x cols in
// 32x32 tiles through shared memory (the extra column avoids bank
// conflicts). Grid: (ceil(cols/32), ceil(rows/32), batch), block 32x8.
extern "C" __global__ void transpose_f32(float* out, const float* in, int rows, int cols) {
    __shared__ float tile[32][33];
    long long base = (long long)blockIdx.z * rows * cols;
    int c0 = blockIdx.x * 32, r0 = blockIdx.y * 32;
    for (int dy = threadIdx.y; dy < 32; dy += 8) {
        int r = r0 + dy, c = c0 + threadIdx.x;
        if (r < rows && c < cols) tile[dy][threadIdx.x] = in[base + (long long)r * cols + c];
    }
    __syncthreads();
    for (int dy = threadIdx.y; dy < 32; dy += 8) {
        int c = c0 + dy, r = r0 + threadIdx.x;
        if (r < rows && c < cols) out[base + (long long)c * rows + r] = tile[threadIdx.x][dy];
    }
}
