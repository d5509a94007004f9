// common.hip is prepended to every other kernel source before compiling:
// device helpers only, no kernels. Plain C++ that hiprtc and nvrtc both
// accept without any header: the runtimes' built-ins provide blockIdx,
// threadIdx, __shared__, __syncthreads and the float math functions.

#define BLOCK 256

static __device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

// f16_to_f32 converts IEEE binary16 bits, subnormals and NaN included.
static __device__ __forceinline__ float f16_to_f32(unsigned short h) {
    unsigned int sign = (unsigned int)(h >> 15) << 31;
    unsigned int exp = (h >> 10) & 0x1f;
    unsigned int mant = h & 0x3ff;
    if (exp == 0) {
        float v = (float)mant * 5.9604644775390625e-8f; // 2^-24
        return sign ? -v : v;
    }
    if (exp == 31) return __int_as_float(sign | 0x7f800000 | (mant << 13));
    return __int_as_float(sign | ((exp + 112) << 23) | (mant << 13));
}

// load_f16 reads a little-endian f16 at any 1-byte alignment (quantized
// blocks are 34 and 18 bytes long).
static __device__ __forceinline__ float load_f16(const unsigned char* p) {
    return f16_to_f32((unsigned short)(p[0] | (p[1] << 8)));
}

// block_sum and block_max reduce v over a block of BLOCK threads; every
// thread gets the result. red is BLOCK floats of shared memory.
static __device__ __forceinline__ float block_sum(float v, float* red) {
    red[threadIdx.x] = v;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    float r = red[0];
    __syncthreads();
    return r;
}

static __device__ __forceinline__ float block_max(float v, float* red) {
    red[threadIdx.x] = v;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
        __syncthreads();
    }
    float r = red[0];
    __syncthreads();
    return r;
}

static __device__ __forceinline__ long long gid() {
    return (long long)blockIdx.x * blockDim.x + threadIdx.x;
}

static __device__ __forceinline__ long long gstride() {
    return (long long)gridDim.x * blockDim.x;
}
