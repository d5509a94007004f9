// ggml block formats: Q8_0 is an f16 scale and 32 int8 values (34 bytes);
// Q4_0 is an f16 scale and 16 bytes of nibbles (18 bytes), the low nibble
// of byte j holding value j and the high nibble value j+16, each (q-8)·d.

extern "C" __global__ void dequant_q8_0(float* out, const unsigned char* in, long long n) {
    for (long long i = gid(); i < n; i += gstride()) {
        const unsigned char* blk = in + (i / 32) * 34;
        out[i] = load_f16(blk) * (float)(signed char)blk[2 + i % 32];
    }
}

extern "C" __global__ void dequant_q4_0(float* out, const unsigned char* in, long long n) {
    for (long long i = gid(); i < n; i += gstride()) {
        const unsigned char* blk = in + (i / 32) * 18;
        int j = (int)(i % 32);
        int q = j < 16 ? (blk[2 + j] & 0x0f) : (blk[2 + j - 16] >> 4);
        out[i] = load_f16(blk) * (float)(q - 8);
    }
}

extern "C" __global__ void dequant_f16(float* out, const unsigned char* in, long long n) {
    for (long long i = gid(); i < n; i += gstride()) out[i] = load_f16(in + 2 * i);
}

// qmatmul_q8_0 and qmatmul_q4_0 compute out[m,n] = Σ_k a[m,k]·W[n,k] with
// W [N,K] quantized by rows. One block per (n, m): its threads stride over
// the K/32 blocks of the row and reduce.
extern "C" __global__ void qmatmul_q8_0(float* out, const float* a, const unsigned char* w, int M, int N, int K) {
    __shared__ float red[BLOCK];
    int nb = K / 32;
    for (int m = blockIdx.y; m < M; m += gridDim.y) {
        for (int n = blockIdx.x; n < N; n += gridDim.x) {
            const unsigned char* row = w + (long long)n * nb * 34;
            const float* x = a + (long long)m * K;
            float s = 0.0f;
            for (int b = threadIdx.x; b < nb; b += BLOCK) {
                const unsigned char* blk = row + (long long)b * 34;
                const float* xb = x + b * 32;
                float acc = 0.0f;
                for (int j = 0; j < 32; j++) acc += xb[j] * (float)(signed char)blk[2 + j];
                s += acc * load_f16(blk);
            }
            s = block_sum(s, red);
            if (threadIdx.x == 0) out[(long long)m * N + n] = s;
        }
    }
}

extern "C" __global__ void qmatmul_q4_0(float* out, const float* a, const unsigned char* w, int M, int N, int K) {
    __shared__ float red[BLOCK];
    int nb = K / 32;
    for (int m = blockIdx.y; m < M; m += gridDim.y) {
        for (int n = blockIdx.x; n < N; n += gridDim.x) {
            const unsigned char* row = w + (long long)n * nb * 18;
            const float* x = a + (long long)m * K;
            float s = 0.0f;
            for (int b = threadIdx.x; b < nb; b += BLOCK) {
                const unsigned char* blk = row + (long long)b * 18;
                const float* xb = x + b * 32;
                float acc = 0.0f;
                for (int j = 0; j < 16; j++) {
                    int q = blk[2 + j];
                    acc += xb[j] * (float)((q & 0x0f) - 8) + xb[j + 16] * (float)((q >> 4) - 8);
                }
                s += acc * load_f16(blk);
            }
            s = block_sum(s, red);
            if (threadIdx.x == 0) out[(long long)m * N + n] = s;
        }
    }
}
