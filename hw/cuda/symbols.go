package cuda

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/dmalab/dmalab/hw/internal/dl"
)

// LibraryName is the driver library's soname; DMALAB_LIBCUDA overrides it
// (a path, for drivers installed outside the loader's search path).
const LibraryName = "libcuda.so.1"

// library holds the bound driver functions. The Go signatures mirror cuda.h:
// size_t is uintptr, unsigned int is uint32, int is int32, handles are
// uintptr-sized named types, and a CUmemLocation passed by value is one
// uint64 (MemLocation.packed).
type library struct {
	handle uintptr

	cuInit             func(flags uint32) Result
	cuDriverGetVersion func(v *int32) Result
	cuGetErrorName     func(r Result, s **byte) Result
	cuGetErrorString   func(r Result, s **byte) Result

	cuDeviceGetCount          func(n *int32) Result
	cuDeviceGet               func(d *Device, ordinal int32) Result
	cuDeviceGetName           func(name *byte, n int32, d Device) Result
	cuDeviceGetAttribute      func(v *int32, a Attribute, d Device) Result
	cuDeviceTotalMem          func(bytes *uintptr, d Device) Result
	cuDeviceGetPCIBusId       func(id *byte, n int32, d Device) Result
	cuDeviceCanAccessPeer     func(can *int32, d, peer Device) Result
	cuDevicePrimaryCtxRetain  func(c *context, d Device) Result
	cuDevicePrimaryCtxRelease func(d Device) Result

	cuCtxSetCurrent       func(c context) Result
	cuCtxSynchronize      func() Result
	cuCtxEnablePeerAccess func(peer context, flags uint32) Result

	cuMemGetInfo              func(free, total *uintptr) Result
	cuMemAlloc                func(p *DevicePtr, size uintptr) Result
	cuMemFree                 func(p DevicePtr) Result
	cuMemAllocHost            func(p *unsafe.Pointer, size uintptr) Result
	cuMemHostAlloc            func(p *unsafe.Pointer, size uintptr, flags uint32) Result
	cuMemFreeHost             func(p unsafe.Pointer) Result
	cuMemHostGetDevicePointer func(d *DevicePtr, p unsafe.Pointer, flags uint32) Result
	cuMemHostRegister         func(p unsafe.Pointer, size uintptr, flags uint32) Result
	cuMemHostUnregister       func(p unsafe.Pointer) Result
	cuMemAllocManaged         func(p *DevicePtr, size uintptr, flags uint32) Result

	cuMemcpyHtoD      func(dst DevicePtr, src unsafe.Pointer, n uintptr) Result
	cuMemcpyDtoH      func(dst unsafe.Pointer, src DevicePtr, n uintptr) Result
	cuMemcpyDtoD      func(dst, src DevicePtr, n uintptr) Result
	cuMemcpyHtoDAsync func(dst DevicePtr, src unsafe.Pointer, n uintptr, s Stream) Result
	cuMemcpyDtoHAsync func(dst unsafe.Pointer, src DevicePtr, n uintptr, s Stream) Result
	cuMemcpyDtoDAsync func(dst, src DevicePtr, n uintptr, s Stream) Result
	cuMemcpyPeerAsync func(dst DevicePtr, dctx context, src DevicePtr, sctx context, n uintptr, s Stream) Result
	cuMemsetD8        func(dst DevicePtr, v uint8, n uintptr) Result
	cuMemsetD32       func(dst DevicePtr, v uint32, n uintptr) Result

	cuStreamCreate      func(s *Stream, flags uint32) Result
	cuStreamDestroy     func(s Stream) Result
	cuStreamSynchronize func(s Stream) Result
	cuStreamWaitEvent   func(s Stream, e Event, flags uint32) Result
	cuEventCreate       func(e *Event, flags uint32) Result
	cuEventRecord       func(e Event, s Stream) Result
	cuEventSynchronize  func(e Event) Result
	cuEventElapsedTime  func(ms *float32, start, end Event) Result
	cuEventDestroy      func(e Event) Result

	cuModuleLoadDataEx  func(m *Module, image unsafe.Pointer, n uint32, opts *int32, vals *uintptr) Result
	cuModuleUnload      func(m Module) Result
	cuModuleGetFunction func(f *Function, m Module, name string) Result
	cuLaunchKernel      func(f Function, gx, gy, gz, bx, by, bz, shared uint32, s Stream, params unsafe.Pointer, extra unsafe.Pointer) Result

	cuMemPrefetchAsync            func(p DevicePtr, n uintptr, loc uint64, flags uint32, s Stream) Result
	cuMemAdvise                   func(p DevicePtr, n uintptr, advice Advice, loc uint64) Result
	cuPointerGetAttribute         func(data unsafe.Pointer, attr PointerAttribute, p DevicePtr) Result
	cuMemGetHandleForAddressRange func(handle unsafe.Pointer, p DevicePtr, size uintptr, typ RangeHandleType, flags uint64) Result
}

// symbol names one function of the table: fn points to a field of library;
// names are tried in order (the versioned symbol cuda.h binds first, older
// ones as fallbacks); optional symbols may be missing.
func (l *library) symbols() []dl.Symbol {
	return []dl.Symbol{
		{Fn: &l.cuInit, Names: []string{"cuInit"}},
		{Fn: &l.cuDriverGetVersion, Names: []string{"cuDriverGetVersion"}},
		{Fn: &l.cuGetErrorName, Names: []string{"cuGetErrorName"}},
		{Fn: &l.cuGetErrorString, Names: []string{"cuGetErrorString"}},

		{Fn: &l.cuDeviceGetCount, Names: []string{"cuDeviceGetCount"}},
		{Fn: &l.cuDeviceGet, Names: []string{"cuDeviceGet"}},
		{Fn: &l.cuDeviceGetName, Names: []string{"cuDeviceGetName"}},
		{Fn: &l.cuDeviceGetAttribute, Names: []string{"cuDeviceGetAttribute"}},
		{Fn: &l.cuDeviceTotalMem, Names: []string{"cuDeviceTotalMem_v2"}},
		{Fn: &l.cuDeviceGetPCIBusId, Names: []string{"cuDeviceGetPCIBusId"}},
		{Fn: &l.cuDeviceCanAccessPeer, Names: []string{"cuDeviceCanAccessPeer"}},
		{Fn: &l.cuDevicePrimaryCtxRetain, Names: []string{"cuDevicePrimaryCtxRetain"}},
		{Fn: &l.cuDevicePrimaryCtxRelease, Names: []string{"cuDevicePrimaryCtxRelease_v2"}},

		{Fn: &l.cuCtxSetCurrent, Names: []string{"cuCtxSetCurrent"}},
		{Fn: &l.cuCtxSynchronize, Names: []string{"cuCtxSynchronize"}},
		{Fn: &l.cuCtxEnablePeerAccess, Names: []string{"cuCtxEnablePeerAccess"}},

		{Fn: &l.cuMemGetInfo, Names: []string{"cuMemGetInfo_v2"}},
		{Fn: &l.cuMemAlloc, Names: []string{"cuMemAlloc_v2"}},
		{Fn: &l.cuMemFree, Names: []string{"cuMemFree_v2"}},
		{Fn: &l.cuMemAllocHost, Names: []string{"cuMemAllocHost_v2"}},
		{Fn: &l.cuMemHostAlloc, Names: []string{"cuMemHostAlloc"}},
		{Fn: &l.cuMemFreeHost, Names: []string{"cuMemFreeHost"}},
		{Fn: &l.cuMemHostGetDevicePointer, Names: []string{"cuMemHostGetDevicePointer_v2"}},
		{Fn: &l.cuMemHostRegister, Names: []string{"cuMemHostRegister_v2"}},
		{Fn: &l.cuMemHostUnregister, Names: []string{"cuMemHostUnregister"}},
		{Fn: &l.cuMemAllocManaged, Names: []string{"cuMemAllocManaged"}},

		{Fn: &l.cuMemcpyHtoD, Names: []string{"cuMemcpyHtoD_v2"}},
		{Fn: &l.cuMemcpyDtoH, Names: []string{"cuMemcpyDtoH_v2"}},
		{Fn: &l.cuMemcpyDtoD, Names: []string{"cuMemcpyDtoD_v2"}},
		{Fn: &l.cuMemcpyHtoDAsync, Names: []string{"cuMemcpyHtoDAsync_v2"}},
		{Fn: &l.cuMemcpyDtoHAsync, Names: []string{"cuMemcpyDtoHAsync_v2"}},
		{Fn: &l.cuMemcpyDtoDAsync, Names: []string{"cuMemcpyDtoDAsync_v2"}},
		{Fn: &l.cuMemcpyPeerAsync, Names: []string{"cuMemcpyPeerAsync"}},
		{Fn: &l.cuMemsetD8, Names: []string{"cuMemsetD8_v2"}},
		{Fn: &l.cuMemsetD32, Names: []string{"cuMemsetD32_v2"}},

		{Fn: &l.cuStreamCreate, Names: []string{"cuStreamCreate"}},
		{Fn: &l.cuStreamDestroy, Names: []string{"cuStreamDestroy_v2"}},
		{Fn: &l.cuStreamSynchronize, Names: []string{"cuStreamSynchronize"}},
		{Fn: &l.cuStreamWaitEvent, Names: []string{"cuStreamWaitEvent"}},
		{Fn: &l.cuEventCreate, Names: []string{"cuEventCreate"}},
		{Fn: &l.cuEventRecord, Names: []string{"cuEventRecord"}},
		{Fn: &l.cuEventSynchronize, Names: []string{"cuEventSynchronize"}},
		// cuEventElapsedTime_v2 exists from CUDA 12.8; CUDA 13 headers bind
		// only it. The unversioned symbol has the same signature.
		{Fn: &l.cuEventElapsedTime, Names: []string{"cuEventElapsedTime_v2", "cuEventElapsedTime"}},
		{Fn: &l.cuEventDestroy, Names: []string{"cuEventDestroy_v2"}},

		{Fn: &l.cuModuleLoadDataEx, Names: []string{"cuModuleLoadDataEx"}},
		{Fn: &l.cuModuleUnload, Names: []string{"cuModuleUnload"}},
		{Fn: &l.cuModuleGetFunction, Names: []string{"cuModuleGetFunction"}},
		{Fn: &l.cuLaunchKernel, Names: []string{"cuLaunchKernel"}},

		// Optional: drivers before CUDA 12.2 lack the _v2 unified-memory
		// calls, before 11.7 the dma-buf export.
		{Fn: &l.cuMemPrefetchAsync, Names: []string{"cuMemPrefetchAsync_v2"}, Optional: true},
		{Fn: &l.cuMemAdvise, Names: []string{"cuMemAdvise_v2"}, Optional: true},
		{Fn: &l.cuPointerGetAttribute, Names: []string{"cuPointerGetAttribute"}},
		{Fn: &l.cuMemGetHandleForAddressRange, Names: []string{"cuMemGetHandleForAddressRange"}, Optional: true},
	}
}

// loader binds the library once per process.
var loader = dl.Loader[library]{Default: LibraryName, Env: "DMALAB_LIBCUDA", Open: openLibrary}

// Load opens the driver library and binds its functions, once per process.
// Later calls return the first call's result. It does not call cuInit.
func Load() error {
	_, err := loader.Load()
	return err
}

// openLibrary dlopens path and binds the symbol table. It never panics: a
// missing library is ErrNoDriver, a missing required symbol ErrNotSupported.
func openLibrary(path string) (*library, error) {
	h, err := dl.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoDriver, err)
	}
	l := &library{handle: h}
	missing := dl.Bind(h, l.symbols())
	if len(missing) > 0 {
		// The handle stays open: closing a half-bound driver library gains
		// nothing and the process will not load it again.
		return nil, fmt.Errorf("%w: %s lacks %v (driver too old for this binding?)", ErrNotSupported, path, missing)
	}
	return l, nil
}

// lib returns the bound library, loading it if needed.
func lib() (*library, error) { return loader.Load() }

// errMissing is returned by calls whose optional symbol the driver lacks.
func errMissing(name string) error {
	return fmt.Errorf("%s: %w: symbol not exported by this driver", name, ErrNotSupported)
}

// driverErrorName asks the loaded driver for a result's name.
func driverErrorName(r Result) (string, bool) {
	l := loader.Loaded()
	if l == nil {
		return "", false
	}
	var p *byte
	if l.cuGetErrorName(r, &p) != Success || p == nil {
		return "", false
	}
	return goString(p), true
}

var (
	initOnce sync.Once
	initErr  error
)

// Init loads the library and calls cuInit(0), once per process. Without a
// driver it returns ErrNoDriver; with a driver but no GPU, an error matching
// ErrNoDevice.
func Init() error {
	initOnce.Do(func() {
		l, err := lib()
		if err != nil {
			initErr = err
			return
		}
		initErr = check("cuInit", l.cuInit(0))
	})
	return initErr
}

// IsUnavailable reports whether err says that CUDA cannot be used on this
// machine at all (no driver library, a driver too old, or no GPU), as opposed
// to a driver that is there and misbehaves. Tests skip on it and fail
// otherwise.
func IsUnavailable(err error) bool {
	return errors.Is(err, ErrNoDriver) || errors.Is(err, ErrNotSupported) || errors.Is(err, ErrNoDevice)
}
