package cuda

import (
	"errors"
	"fmt"

	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/uvm"
)

// Result is a CUresult (cuda.h, enum cudaError_enum) as an error: every
// call of the façade that fails returns an error that wraps exactly one
// Result, first in its chain, so errors.Is(err, ErrorInvalidValue) and
// ResultOf(err) tell what the real driver would have returned. The
// model's own cause (a gpu or uvm sentinel) is wrapped after it.
type Result uint32

// The CUresult values the façade returns, with cuda.h's numbers.
const (
	Success                          Result = 0   // CUDA_SUCCESS
	ErrorInvalidValue                Result = 1   // CUDA_ERROR_INVALID_VALUE
	ErrorOutOfMemory                 Result = 2   // CUDA_ERROR_OUT_OF_MEMORY
	ErrorNotInitialized              Result = 3   // CUDA_ERROR_NOT_INITIALIZED
	ErrorDeinitialized               Result = 4   // CUDA_ERROR_DEINITIALIZED
	ErrorNoDevice                    Result = 100 // CUDA_ERROR_NO_DEVICE
	ErrorInvalidDevice               Result = 101 // CUDA_ERROR_INVALID_DEVICE
	ErrorInvalidContext              Result = 201 // CUDA_ERROR_INVALID_CONTEXT
	ErrorOperatingSystem             Result = 304 // CUDA_ERROR_OPERATING_SYSTEM
	ErrorInvalidHandle               Result = 400 // CUDA_ERROR_INVALID_HANDLE
	ErrorNotFound                    Result = 500 // CUDA_ERROR_NOT_FOUND
	ErrorNotReady                    Result = 600 // CUDA_ERROR_NOT_READY
	ErrorIllegalAddress              Result = 700 // CUDA_ERROR_ILLEGAL_ADDRESS
	ErrorPeerAccessAlreadyEnabled    Result = 704 // CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
	ErrorPeerAccessNotEnabled        Result = 705 // CUDA_ERROR_PEER_ACCESS_NOT_ENABLED
	ErrorContextIsDestroyed          Result = 709 // CUDA_ERROR_CONTEXT_IS_DESTROYED
	ErrorHostMemoryAlreadyRegistered Result = 712 // CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
	ErrorHostMemoryNotRegistered     Result = 713 // CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED
	ErrorLaunchFailed                Result = 719 // CUDA_ERROR_LAUNCH_FAILED
	ErrorNotPermitted                Result = 800 // CUDA_ERROR_NOT_PERMITTED
	ErrorNotSupported                Result = 801 // CUDA_ERROR_NOT_SUPPORTED
	ErrorUnknown                     Result = 999 // CUDA_ERROR_UNKNOWN
)

var resultNames = map[Result]string{
	Success:                          "CUDA_SUCCESS",
	ErrorInvalidValue:                "CUDA_ERROR_INVALID_VALUE",
	ErrorOutOfMemory:                 "CUDA_ERROR_OUT_OF_MEMORY",
	ErrorNotInitialized:              "CUDA_ERROR_NOT_INITIALIZED",
	ErrorDeinitialized:               "CUDA_ERROR_DEINITIALIZED",
	ErrorNoDevice:                    "CUDA_ERROR_NO_DEVICE",
	ErrorInvalidDevice:               "CUDA_ERROR_INVALID_DEVICE",
	ErrorInvalidContext:              "CUDA_ERROR_INVALID_CONTEXT",
	ErrorOperatingSystem:             "CUDA_ERROR_OPERATING_SYSTEM",
	ErrorInvalidHandle:               "CUDA_ERROR_INVALID_HANDLE",
	ErrorNotFound:                    "CUDA_ERROR_NOT_FOUND",
	ErrorNotReady:                    "CUDA_ERROR_NOT_READY",
	ErrorIllegalAddress:              "CUDA_ERROR_ILLEGAL_ADDRESS",
	ErrorPeerAccessAlreadyEnabled:    "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
	ErrorPeerAccessNotEnabled:        "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED",
	ErrorContextIsDestroyed:          "CUDA_ERROR_CONTEXT_IS_DESTROYED",
	ErrorHostMemoryAlreadyRegistered: "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
	ErrorHostMemoryNotRegistered:     "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
	ErrorLaunchFailed:                "CUDA_ERROR_LAUNCH_FAILED",
	ErrorNotPermitted:                "CUDA_ERROR_NOT_PERMITTED",
	ErrorNotSupported:                "CUDA_ERROR_NOT_SUPPORTED",
	ErrorUnknown:                     "CUDA_ERROR_UNKNOWN",
}

// Name is the result's cuda.h name (what cuGetErrorName returns).
func (r Result) Name() string {
	if n, ok := resultNames[r]; ok {
		return n
	}
	return fmt.Sprintf("CUDA_ERROR_%d", uint32(r))
}

func (r Result) Error() string { return fmt.Sprintf("%s (%d)", r.Name(), uint32(r)) }

// ResultOf is the CUresult an error of the façade carries: Success for
// nil, ErrorUnknown for an error that carries none (ErrSegmentationFault
// is not a CUresult: a real program gets SIGSEGV, not an error code).
func ResultOf(err error) Result {
	if err == nil {
		return Success
	}
	var r Result
	if errors.As(err, &r) {
		return r
	}
	return ErrorUnknown
}

// ErrSegmentationFault is what a CPU access through Context.CPUAccess
// returns where a real program would be killed by SIGSEGV: a device
// pointer dereferenced on the CPU, freed memory, managed memory touched
// while a GPU without concurrent managed access is active (NVIDIA's "How
// does NVIDIA implement unified memory on PCIe GPUs and Tegra
// platforms?").
var ErrSegmentationFault = errors.New("segmentation fault")

// fail is the error of call: r first, then the model's cause.
func fail(call string, r Result, cause error) error {
	if cause == nil {
		return fmt.Errorf("cuda: %s: %w", call, r)
	}
	return fmt.Errorf("cuda: %s: %w: %w", call, r, cause)
}

// failf is fail with a message instead of a cause.
func failf(call string, r Result, format string, args ...any) error {
	return fmt.Errorf("cuda: %s: %w: %s", call, r, fmt.Sprintf(format, args...))
}

// resultOf maps the model's errors (package gpu's and uvm's sentinels)
// to the CUresult the real driver returns for them.
func resultOf(err error) Result {
	switch {
	case err == nil:
		return Success
	case errors.Is(err, gpu.ErrOutOfMemory), errors.Is(err, uvm.ErrOutOfMemory), errors.Is(err, gpu.ErrBARExhausted):
		return ErrorOutOfMemory
	case errors.Is(err, gpu.ErrInvalidHandle):
		return ErrorInvalidHandle
	case errors.Is(err, gpu.ErrNotReady):
		return ErrorNotReady
	case errors.Is(err, gpu.ErrHostMemoryAlreadyRegistered):
		return ErrorHostMemoryAlreadyRegistered
	case errors.Is(err, gpu.ErrHostMemoryNotRegistered):
		return ErrorHostMemoryNotRegistered
	case errors.Is(err, gpu.ErrIllegalAddress):
		return ErrorIllegalAddress
	case errors.Is(err, gpu.ErrPeerAccessNotEnabled):
		return ErrorPeerAccessNotEnabled
	case errors.Is(err, gpu.ErrPeerAccessAlreadyEnabled):
		return ErrorPeerAccessAlreadyEnabled
	case errors.Is(err, gpu.ErrNotSupported):
		return ErrorNotSupported
	case errors.Is(err, uvm.ErrNotSupported):
		// cuMemPrefetchAsync on a device without
		// CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS.
		return ErrorInvalidDevice
	case errors.Is(err, gpu.ErrInvalidValue), errors.Is(err, uvm.ErrInvalidValue), errors.Is(err, uvm.ErrInvalidAddress):
		return ErrorInvalidValue
	}
	return ErrorUnknown
}

// wrap is fail with the CUresult the model's error maps to.
func wrap(call string, err error) error {
	if err == nil {
		return nil
	}
	return fail(call, resultOf(err), err)
}
