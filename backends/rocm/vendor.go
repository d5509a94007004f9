//go:build cgo

package rocm

import (
	"fmt"
	"slices"
	"strings"
)

// libRole says which library of a vendor a symbol lives in.
type libRole uint8

const (
	roleRuntime libRole = iota // libamdhip64 / libcudart
	roleDriver                 // libcuda (module load and launch on NVIDIA)
	roleRTC                    // hiprtc / nvrtc
	roleBLAS                   // rocBLAS / cuBLAS
	numRoles
)

var roleNames = [numRoles]string{"runtime", "driver", "compiler", "blas"}

// symbol is one entry of the function table: the names to try, in order,
// in the library of its role. Optional entries may stay unresolved.
type symbol struct {
	f        fn
	role     libRole
	names    []string
	optional bool
}

// vendor is what differs between HIP on AMD and HIP's other platform,
// CUDA on NVIDIA: library names, symbol names and the constants that the
// two APIs number differently. Signatures are the same on both sides.
type vendor struct {
	platform Platform
	libs     [numRoles][]string
	// rtcInRuntime: ROCm 5 ships the hiprtc symbols inside libamdhip64,
	// tried when no separate compiler library loads.
	rtcInRuntime bool
	syms         []symbol
	// GEMM transpose codes: rocblas_operation_none/transpose = 111/112,
	// CUBLAS_OP_N/T = 0/1.
	opN, opT int
	// BLAS allocation-failure status: rocblas_status_memory_error = 5,
	// CUBLAS_STATUS_ALLOC_FAILED = 3. Success is 0 on both.
	blasAllocFailed int
	// Status codes of the runtime: no device at all (hipErrorNoDevice,
	// hipErrorInvalidDevice; CUDA adds cudaErrorInsufficientDriver),
	// allocation failure, and the class that leaves the device unusable.
	noDevice   []int
	oom        int
	deviceLost []int
}

// notReady is the status of a query on work not yet complete:
// hipErrorNotReady and cudaErrorNotReady are both 600.
const notReady = 600

// lostCodes are the sticky errors, numbered alike in HIP, the CUDA runtime
// and the CUDA driver: ECC uncorrectable (214), illegal address (700),
// launch timeout (702), hardware stack error through launch failure
// (714–719).
var lostCodes = []int{214, 700, 702, 714, 715, 716, 717, 718, 719}

var amdVendor = vendor{
	platform: AMD,
	libs: [numRoles][]string{
		roleRuntime: {"libamdhip64.so.6", "libamdhip64.so.5"},
		roleRTC:     {"libhiprtc.so", "libhiprtc.so.6", "libhiprtc.so.5"},
		roleBLAS:    {"librocblas.so.5", "librocblas.so.4", "librocblas.so.3", "librocblas.so.0"},
	},
	rtcInRuntime: true,
	syms: []symbol{
		{fDeviceCount, roleRuntime, []string{"hipGetDeviceCount"}, false},
		{fSetDevice, roleRuntime, []string{"hipSetDevice"}, false},
		{fMalloc, roleRuntime, []string{"hipMalloc"}, false},
		{fFree, roleRuntime, []string{"hipFree"}, false},
		{fHostMalloc, roleRuntime, []string{"hipHostMalloc"}, false},
		{fHostFree, roleRuntime, []string{"hipHostFree"}, false},
		{fMemcpyAsync, roleRuntime, []string{"hipMemcpyAsync"}, false},
		{fStreamCreate, roleRuntime, []string{"hipStreamCreate"}, false},
		{fStreamDestroy, roleRuntime, []string{"hipStreamDestroy"}, false},
		{fStreamSync, roleRuntime, []string{"hipStreamSynchronize"}, false},
		{fEventCreate, roleRuntime, []string{"hipEventCreate"}, false},
		{fEventDestroy, roleRuntime, []string{"hipEventDestroy"}, false},
		{fEventRecord, roleRuntime, []string{"hipEventRecord"}, false},
		{fEventSync, roleRuntime, []string{"hipEventSynchronize"}, false},
		{fEventElapsed, roleRuntime, []string{"hipEventElapsedTime"}, false},
		{fEventQuery, roleRuntime, []string{"hipEventQuery"}, false},
		{fStreamWait, roleRuntime, []string{"hipStreamWaitEvent"}, false},
		{fMemGetInfo, roleRuntime, []string{"hipMemGetInfo"}, false},
		{fRuntimeVersion, roleRuntime, []string{"hipRuntimeGetVersion"}, false},
		{fErrorString, roleRuntime, []string{"hipGetErrorString"}, true},
		// ROCm 6 keeps the old layout under the old name; the arch scan
		// does not depend on the layout.
		{fDeviceProps, roleRuntime, []string{"hipGetDevicePropertiesR0600", "hipGetDeviceProperties"}, false},
		{fDeviceName, roleRuntime, []string{"hipDeviceGetName"}, false},
		{fModuleLoad, roleRuntime, []string{"hipModuleLoadData"}, false},
		{fModuleUnload, roleRuntime, []string{"hipModuleUnload"}, false},
		{fModuleFunction, roleRuntime, []string{"hipModuleGetFunction"}, false},
		{fLaunch, roleRuntime, []string{"hipModuleLaunchKernel"}, false},
		{fRTCCreate, roleRTC, []string{"hiprtcCreateProgram"}, false},
		{fRTCCompile, roleRTC, []string{"hiprtcCompileProgram"}, false},
		{fRTCLogSize, roleRTC, []string{"hiprtcGetProgramLogSize"}, false},
		{fRTCLog, roleRTC, []string{"hiprtcGetProgramLog"}, false},
		{fRTCCodeSize, roleRTC, []string{"hiprtcGetCodeSize"}, false},
		{fRTCCode, roleRTC, []string{"hiprtcGetCode"}, false},
		{fRTCDestroy, roleRTC, []string{"hiprtcDestroyProgram"}, false},
		{fBLASCreate, roleBLAS, []string{"rocblas_create_handle"}, false},
		{fBLASDestroy, roleBLAS, []string{"rocblas_destroy_handle"}, false},
		{fBLASSetStream, roleBLAS, []string{"rocblas_set_stream"}, false},
		{fBLASSgemm, roleBLAS, []string{"rocblas_sgemm"}, false},
		// Graphs are optional: without them a recorded step's kernels are
		// launched one by one (graph.go).
		{fGraphCreate, roleRuntime, []string{"hipGraphCreate"}, true},
		{fGraphDestroy, roleRuntime, []string{"hipGraphDestroy"}, true},
		{fGraphAddKernel, roleRuntime, []string{"hipGraphAddKernelNode"}, true},
		{fGraphInstance, roleRuntime, []string{"hipGraphInstantiateWithFlags"}, true},
		{fGraphExecFree, roleRuntime, []string{"hipGraphExecDestroy"}, true},
		{fGraphLaunch, roleRuntime, []string{"hipGraphLaunch"}, true},
		{fGraphSetKernel, roleRuntime, []string{"hipGraphExecKernelNodeSetParams"}, true},
	},
	opN: 111, opT: 112, blasAllocFailed: 5,
	noDevice: []int{100, 101}, oom: 2, deviceLost: lostCodes,
}

var nvidiaVendor = vendor{
	platform: NVIDIA,
	libs: [numRoles][]string{
		roleRuntime: {"libcudart.so.13", "libcudart.so.12"},
		roleDriver:  {"libcuda.so.1"},
		roleRTC:     {"libnvrtc.so.13", "libnvrtc.so.12"},
		roleBLAS:    {"libcublas.so.13", "libcublas.so.12"},
	},
	syms: []symbol{
		{fDeviceCount, roleRuntime, []string{"cudaGetDeviceCount"}, false},
		{fSetDevice, roleRuntime, []string{"cudaSetDevice"}, false},
		{fMalloc, roleRuntime, []string{"cudaMalloc"}, false},
		{fFree, roleRuntime, []string{"cudaFree"}, false},
		{fHostMalloc, roleRuntime, []string{"cudaHostAlloc"}, false},
		{fHostFree, roleRuntime, []string{"cudaFreeHost"}, false},
		{fMemcpyAsync, roleRuntime, []string{"cudaMemcpyAsync"}, false},
		{fStreamCreate, roleRuntime, []string{"cudaStreamCreate"}, false},
		{fStreamDestroy, roleRuntime, []string{"cudaStreamDestroy"}, false},
		{fStreamSync, roleRuntime, []string{"cudaStreamSynchronize"}, false},
		{fEventCreate, roleRuntime, []string{"cudaEventCreate"}, false},
		{fEventDestroy, roleRuntime, []string{"cudaEventDestroy"}, false},
		{fEventRecord, roleRuntime, []string{"cudaEventRecord"}, false},
		{fEventSync, roleRuntime, []string{"cudaEventSynchronize"}, false},
		{fEventElapsed, roleRuntime, []string{"cudaEventElapsedTime"}, false},
		{fEventQuery, roleRuntime, []string{"cudaEventQuery"}, false},
		{fStreamWait, roleRuntime, []string{"cudaStreamWaitEvent"}, false},
		{fMemGetInfo, roleRuntime, []string{"cudaMemGetInfo"}, false},
		{fRuntimeVersion, roleRuntime, []string{"cudaRuntimeGetVersion"}, false},
		{fErrorString, roleRuntime, []string{"cudaGetErrorString"}, true},
		{fDeviceName, roleDriver, []string{"cuDeviceGetName"}, false},
		{fDeviceAttr, roleDriver, []string{"cuDeviceGetAttribute"}, false},
		{fInit, roleDriver, []string{"cuInit"}, false},
		{fDeviceGet, roleDriver, []string{"cuDeviceGet"}, false},
		{fCtxRetain, roleDriver, []string{"cuDevicePrimaryCtxRetain"}, false},
		{fCtxSetCurrent, roleDriver, []string{"cuCtxSetCurrent"}, false},
		{fModuleLoad, roleDriver, []string{"cuModuleLoadData"}, false},
		{fModuleUnload, roleDriver, []string{"cuModuleUnload"}, false},
		{fModuleFunction, roleDriver, []string{"cuModuleGetFunction"}, false},
		{fLaunch, roleDriver, []string{"cuLaunchKernel"}, false},
		{fRTCCreate, roleRTC, []string{"nvrtcCreateProgram"}, false},
		{fRTCCompile, roleRTC, []string{"nvrtcCompileProgram"}, false},
		{fRTCLogSize, roleRTC, []string{"nvrtcGetProgramLogSize"}, false},
		{fRTCLog, roleRTC, []string{"nvrtcGetProgramLog"}, false},
		{fRTCCodeSize, roleRTC, []string{"nvrtcGetCUBINSize"}, false},
		{fRTCCode, roleRTC, []string{"nvrtcGetCUBIN"}, false},
		{fRTCDestroy, roleRTC, []string{"nvrtcDestroyProgram"}, false},
		{fBLASCreate, roleBLAS, []string{"cublasCreate_v2"}, false},
		{fBLASDestroy, roleBLAS, []string{"cublasDestroy_v2"}, false},
		{fBLASSetStream, roleBLAS, []string{"cublasSetStream_v2"}, false},
		{fBLASSgemm, roleBLAS, []string{"cublasSgemm_v2"}, false},
		// The driver API's graphs, as kernels are its functions; the _v2
		// node calls take CUDA_KERNEL_NODE_PARAMS_v2 (CUDA 12 and later).
		{fGraphCreate, roleDriver, []string{"cuGraphCreate"}, true},
		{fGraphDestroy, roleDriver, []string{"cuGraphDestroy"}, true},
		{fGraphAddKernel, roleDriver, []string{"cuGraphAddKernelNode_v2"}, true},
		{fGraphInstance, roleDriver, []string{"cuGraphInstantiateWithFlags"}, true},
		{fGraphExecFree, roleDriver, []string{"cuGraphExecDestroy"}, true},
		{fGraphLaunch, roleDriver, []string{"cuGraphLaunch"}, true},
		{fGraphSetKernel, roleDriver, []string{"cuGraphExecKernelNodeSetParams_v2"}, true},
	},
	opN: 0, opT: 1, blasAllocFailed: 3,
	noDevice: []int{100, 101, 35}, oom: 2, deviceLost: lostCodes,
}

// CUDA driver attributes (CUdevice_attribute) read on NVIDIA.
const (
	cuAttrCCMajor          = 75
	cuAttrCCMinor          = 76
	cuAttrAsyncEngineCount = 40 // copy engines that overlap copies with kernels
)

func vendorFor(p Platform) *vendor {
	if p == NVIDIA {
		return &nvidiaVendor
	}
	return &amdVendor
}

// candidates returns the paths to try for a library role: each name in
// each of dirs, or the bare names (the system loader's search).
func (v *vendor) candidates(r libRole, dirs []string) []string {
	names := v.libs[r]
	if len(dirs) == 0 {
		return slices.Clone(names)
	}
	var out []string
	for _, d := range dirs {
		for _, n := range names {
			out = append(out, strings.TrimRight(d, "/")+"/"+n)
		}
	}
	return out
}

// runtimeName is the runtime's name in Info.Runtime.
func (v *vendor) runtimeName(version int) string {
	if v.platform == NVIDIA {
		return fmt.Sprintf("cuda %d.%d", version/1000, version%1000/10)
	}
	// HIP_VERSION = major·10^7 + minor·10^5 + patch.
	return fmt.Sprintf("hip %d.%d.%d", version/10000000, version/100000%100, version%100000)
}
