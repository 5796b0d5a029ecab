package gpu

import "errors"

// Errors, each the model of one CUDA_ERROR_* (cuda.h) that the cuda
// façade returns for it; match them with errors.Is.
var (
	// ErrOutOfMemory: no VRAM (or device VA) left for an allocation
	// (CUDA_ERROR_OUT_OF_MEMORY).
	ErrOutOfMemory = errors.New("out of memory")
	// ErrInvalidValue: a zero or overflowing size, an address that is not
	// what the call needs (not an allocation's base for a free, not known
	// to the unified address map, a range past its allocation)
	// (CUDA_ERROR_INVALID_VALUE).
	ErrInvalidValue = errors.New("invalid value")
	// ErrInvalidHandle: an event that was never recorded, or created
	// without timing, given to ElapsedTime; a destroyed stream
	// (CUDA_ERROR_INVALID_HANDLE).
	ErrInvalidHandle = errors.New("invalid resource handle")
	// ErrNotReady: ElapsedTime on an event whose work has not completed
	// (CUDA_ERROR_NOT_READY).
	ErrNotReady = errors.New("not ready")
	// ErrHostMemoryAlreadyRegistered: registering host memory that
	// overlaps a range already in the unified address map
	// (CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED).
	ErrHostMemoryAlreadyRegistered = errors.New("host memory already registered")
	// ErrHostMemoryNotRegistered: unregistering host memory that is not
	// registered (CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED).
	ErrHostMemoryNotRegistered = errors.New("host memory not registered")
	// ErrIllegalAddress: a kernel access outside every allocation the
	// GPU may reach (CUDA_ERROR_ILLEGAL_ADDRESS). CUDA reports it
	// asynchronously, as a sticky error of the context; the model
	// refuses the launch instead, which is deterministic and names the
	// access.
	ErrIllegalAddress = errors.New("illegal address")
	// ErrPeerAccessNotEnabled: a kernel access to a peer GPU's memory
	// without EnablePeerAccess (CUDA_ERROR_PEER_ACCESS_NOT_ENABLED is
	// what cuCtxDisablePeerAccess says; a kernel faults).
	ErrPeerAccessNotEnabled = errors.New("peer access is not enabled")
	// ErrPeerAccessAlreadyEnabled: enabling peer access twice
	// (CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED).
	ErrPeerAccessAlreadyEnabled = errors.New("peer access is already enabled")
	// ErrBARExhausted: no BAR1 space left for a mapping. GPUDirect's
	// nvidia_p2p_get_pages fails then (NVIDIA's "Developing a Linux
	// Kernel Module using GPUDirect RDMA", "PCI BAR sizes").
	ErrBARExhausted = errors.New("BAR1 space exhausted")
	// ErrNotSupported: an operation the model does not do (a kernel
	// access to managed memory with no ManagedHandler set, a copy of
	// managed memory) (CUDA_ERROR_NOT_SUPPORTED).
	ErrNotSupported = errors.New("operation not supported")
)
