// sgemm_tiled is the MatMul fallback when no vendor BLAS is loaded:
// row-major C[M,N] = A[M,K]·B[K,N] per batch (blockIdx.z), strides in
// elements (0 for a B shared by every batch). 16x16 tiles through shared
// memory. Grid: (ceil(N/16), ceil(M/16), batch), block 16x16.
#define TILE 16

extern "C" __global__ void sgemm_tiled(float* C, const float* A, const float* B, int M, int N, int K,
                                       long long strideA, long long strideB, long long strideC) {
    __shared__ float as[TILE][TILE];
    __shared__ float bs[TILE][TILE + 1];
    A += blockIdx.z * strideA;
    B += blockIdx.z * strideB;
    C += blockIdx.z * strideC;
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        int ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
        as[threadIdx.y][threadIdx.x] = (row < M && ka < K) ? A[(long long)row * K + ka] : 0.0f;
        bs[threadIdx.y][threadIdx.x] = (kb < K && col < N) ? B[(long long)kb * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; k++) acc += as[threadIdx.y][k] * bs[k][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) C[(long long)row * N + col] = acc;
}
