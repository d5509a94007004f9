// attention_f32: out = softmax(scale·Q·Kᵀ [causal mask])·V for Q [B,Hq,S,D]
// and K, V [B,Hkv,T,D], query head h reading KV head h/(Hq/Hkv), of
// which the first N positions are in use (a KV cache of T). Causal:
// query i sees keys j <= N-S+i. One block per (query, head, batch); keys
// in chunks of BLOCK with an online softmax, so T is unbounded. Each
// thread accumulates output dims tid, tid+BLOCK, ... (D <= 4·BLOCK).
#define MAXD (4 * BLOCK)

extern "C" __global__ void attention_f32(float* out, const float* q, const float* k, const float* v,
                                         int Hq, int Hkv, int S, int T, int N, int D, float scale,
                                         int causal) {
    __shared__ float qs[MAXD];
    __shared__ float p[BLOCK];
    __shared__ float red[BLOCK];
    int i = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    int hk = h / (Hq / Hkv);
    const float* qrow = q + (((long long)b * Hq + h) * S + i) * D;
    const float* kb = k + ((long long)b * Hkv + hk) * (long long)T * D;
    const float* vb = v + ((long long)b * Hkv + hk) * (long long)T * D;
    float* orow = out + (((long long)b * Hq + h) * S + i) * D;
    for (int d = threadIdx.x; d < D; d += BLOCK) qs[d] = qrow[d];
    __syncthreads();
    int keys = causal ? N - S + i + 1 : N;
    float m = neg_inf(), l = 0.0f;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int j0 = 0; j0 < keys; j0 += BLOCK) {
        int j = j0 + threadIdx.x;
        float s = neg_inf();
        if (j < keys) {
            const float* kr = kb + (long long)j * D;
            float dot = 0.0f;
            for (int d = 0; d < D; d++) dot += qs[d] * kr[d];
            s = dot * scale;
        }
        float mnew = fmaxf(m, block_max(s, red));
        float e = j < keys ? expf(s - mnew) : 0.0f;
        p[threadIdx.x] = e;
        float corr = expf(m - mnew);
        l = l * corr + block_sum(e, red);
        int n = keys - j0 < BLOCK ? keys - j0 : BLOCK;
        for (int c = 0; c < 4; c++) {
            int d = threadIdx.x + c * BLOCK;
            if (d < D) {
                float a = acc[c] * corr;
                for (int jj = 0; jj < n; jj++) a += p[jj] * vb[(long long)(j0 + jj) * D + d];
                acc[c] = a;
            }
        }
        m = mnew;
        __syncthreads();
    }
    for (int c = 0; c < 4; c++) {
        int d = threadIdx.x + c * BLOCK;
        if (d < D) orow[d] = acc[c] / l;
    }
}
