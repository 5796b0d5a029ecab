package cuda

import (
	"errors"
	"fmt"
	"testing"

	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/uvm"
)

// TestResultValues pins the CUresult numbers and names to cuda.h.
func TestResultValues(t *testing.T) {
	for _, c := range []struct {
		r    Result
		n    uint32
		name string
	}{
		{Success, 0, "CUDA_SUCCESS"},
		{ErrorInvalidValue, 1, "CUDA_ERROR_INVALID_VALUE"},
		{ErrorOutOfMemory, 2, "CUDA_ERROR_OUT_OF_MEMORY"},
		{ErrorNotInitialized, 3, "CUDA_ERROR_NOT_INITIALIZED"},
		{ErrorInvalidDevice, 101, "CUDA_ERROR_INVALID_DEVICE"},
		{ErrorInvalidContext, 201, "CUDA_ERROR_INVALID_CONTEXT"},
		{ErrorOperatingSystem, 304, "CUDA_ERROR_OPERATING_SYSTEM"},
		{ErrorDeinitialized, 4, "CUDA_ERROR_DEINITIALIZED"},
		{ErrorInvalidHandle, 400, "CUDA_ERROR_INVALID_HANDLE"},
		{ErrorNotReady, 600, "CUDA_ERROR_NOT_READY"},
		{ErrorIllegalAddress, 700, "CUDA_ERROR_ILLEGAL_ADDRESS"},
		{ErrorPeerAccessNotEnabled, 705, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED"},
		{ErrorHostMemoryAlreadyRegistered, 712, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED"},
		{ErrorHostMemoryNotRegistered, 713, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED"},
		{ErrorNotSupported, 801, "CUDA_ERROR_NOT_SUPPORTED"},
		{ErrorUnknown, 999, "CUDA_ERROR_UNKNOWN"},
	} {
		if uint32(c.r) != c.n || c.r.Name() != c.name {
			t.Errorf("%v: %d %s, want %d %s", c.r, uint32(c.r), c.r.Name(), c.n, c.name)
		}
	}
	if Result(12345).Name() != "CUDA_ERROR_12345" {
		t.Errorf("unknown result named %s", Result(12345).Name())
	}
}

// TestResultMapping: the model's errors become the CUresult the driver
// returns, and both stay matchable.
func TestResultMapping(t *testing.T) {
	for _, c := range []struct {
		err  error
		want Result
	}{
		{gpu.ErrOutOfMemory, ErrorOutOfMemory},
		{gpu.ErrInvalidValue, ErrorInvalidValue},
		{gpu.ErrInvalidHandle, ErrorInvalidHandle},
		{gpu.ErrNotReady, ErrorNotReady},
		{gpu.ErrHostMemoryAlreadyRegistered, ErrorHostMemoryAlreadyRegistered},
		{gpu.ErrHostMemoryNotRegistered, ErrorHostMemoryNotRegistered},
		{gpu.ErrIllegalAddress, ErrorIllegalAddress},
		{gpu.ErrPeerAccessNotEnabled, ErrorPeerAccessNotEnabled},
		{gpu.ErrPeerAccessAlreadyEnabled, ErrorPeerAccessAlreadyEnabled},
		{gpu.ErrNotSupported, ErrorNotSupported},
		{uvm.ErrNotSupported, ErrorInvalidDevice},
		{uvm.ErrInvalidAddress, ErrorInvalidValue},
		{errors.New("other"), ErrorUnknown},
	} {
		err := wrap("cuX", fmt.Errorf("gpu: x: %w", c.err))
		if ResultOf(err) != c.want || !errors.Is(err, c.want) || !errors.Is(err, c.err) {
			t.Errorf("%v → %v (%v), want %v", c.err, ResultOf(err), err, c.want)
		}
	}
	if ResultOf(nil) != Success || ResultOf(ErrSegmentationFault) != ErrorUnknown {
		t.Error("ResultOf of nil or a non-CUDA error")
	}
}
