package cuda

import (
	"errors"
	"fmt"
)

// Sentinel errors. Match them with errors.Is.
var (
	// ErrNoDriver: libcuda.so.1 cannot be opened (no NVIDIA driver installed),
	// or it is the toolkit's stub library (CUDA_ERROR_STUB_LIBRARY).
	ErrNoDriver = errors.New("cuda: no CUDA driver")
	// ErrNotSupported: the driver lacks a symbol this binding needs, or an
	// operation answered CUDA_ERROR_NOT_SUPPORTED.
	ErrNotSupported = errors.New("cuda: not supported")
	// ErrNoDevice: the driver is there but sees no GPU (CUDA_ERROR_NO_DEVICE),
	// or a device ordinal is out of range.
	ErrNoDevice = errors.New("cuda: no CUDA device")
)

// Result is a CUresult (cuda.h, enum cudaError_enum) other than CUDA_SUCCESS,
// as an error. Its message carries the driver's name for it (cuGetErrorName).
type Result uint32

// CUresult values used by name in this package and its callers (cuda.h,
// enum cudaError_enum).
const (
	Success                    Result = 0
	ErrorInvalidValue          Result = 1
	ErrorOutOfMemory           Result = 2
	ErrorNotInitialized        Result = 3
	ErrorStubLibrary           Result = 34
	ErrorInsufficientDriver    Result = 35
	ErrorNoDevice              Result = 100
	ErrorInvalidDevice         Result = 101
	ErrorInvalidImage          Result = 200
	ErrorInvalidContext        Result = 201
	ErrorInvalidPTX            Result = 218
	ErrorUnsupportedPTX        Result = 222
	ErrorInvalidHandle         Result = 400
	ErrorNotFound              Result = 500
	ErrorNotReady              Result = 600
	ErrorIllegalAddress        Result = 700
	ErrorLaunchFailed          Result = 719
	ErrorPeerAlreadyEnabled    Result = 704
	ErrorHostAlreadyRegistered Result = 712
	ErrorNotPermitted          Result = 800
	ErrorNotSupported          Result = 801
	ErrorUnknown               Result = 999
)

// resultNames holds the cuda.h names of the results above and of a few more,
// for messages when the driver cannot be asked (not loaded, or a fake).
var resultNames = map[Result]string{
	0:   "CUDA_SUCCESS",
	1:   "CUDA_ERROR_INVALID_VALUE",
	2:   "CUDA_ERROR_OUT_OF_MEMORY",
	3:   "CUDA_ERROR_NOT_INITIALIZED",
	4:   "CUDA_ERROR_DEINITIALIZED",
	34:  "CUDA_ERROR_STUB_LIBRARY",
	35:  "CUDA_ERROR_INSUFFICIENT_DRIVER",
	46:  "CUDA_ERROR_DEVICE_UNAVAILABLE",
	100: "CUDA_ERROR_NO_DEVICE",
	101: "CUDA_ERROR_INVALID_DEVICE",
	200: "CUDA_ERROR_INVALID_IMAGE",
	201: "CUDA_ERROR_INVALID_CONTEXT",
	209: "CUDA_ERROR_NO_BINARY_FOR_GPU",
	217: "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
	218: "CUDA_ERROR_INVALID_PTX",
	222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
	400: "CUDA_ERROR_INVALID_HANDLE",
	500: "CUDA_ERROR_NOT_FOUND",
	600: "CUDA_ERROR_NOT_READY",
	700: "CUDA_ERROR_ILLEGAL_ADDRESS",
	701: "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
	702: "CUDA_ERROR_LAUNCH_TIMEOUT",
	704: "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
	705: "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED",
	712: "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
	713: "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
	719: "CUDA_ERROR_LAUNCH_FAILED",
	800: "CUDA_ERROR_NOT_PERMITTED",
	801: "CUDA_ERROR_NOT_SUPPORTED",
	999: "CUDA_ERROR_UNKNOWN",
}

// Name returns the result's cuda.h name: the driver's answer to
// cuGetErrorName when the library is loaded, else this package's table.
func (r Result) Name() string {
	if n, ok := driverErrorName(r); ok {
		return n
	}
	if n, ok := resultNames[r]; ok {
		return n
	}
	return fmt.Sprintf("CUDA_ERROR_%d", uint32(r))
}

func (r Result) Error() string {
	return fmt.Sprintf("%s (%d)", r.Name(), uint32(r))
}

// Is lets errors.Is match a Result against the package's sentinels.
func (r Result) Is(target error) bool {
	switch target {
	case ErrNotSupported:
		return r == ErrorNotSupported
	case ErrNoDevice:
		return r == ErrorNoDevice || r == ErrorInvalidDevice
	case ErrNoDriver:
		return r == ErrorStubLibrary || r == ErrorInsufficientDriver
	}
	return false
}

// check turns a CUresult into nil or an error naming the call.
func check(op string, r Result) error {
	if r == Success {
		return nil
	}
	return fmt.Errorf("%s: %w", op, r)
}
