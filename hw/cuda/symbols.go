package cuda

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ebitengine/purego"
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
type symbol struct {
	fn       any
	names    []string
	optional bool
}

func (l *library) symbols() []symbol {
	return []symbol{
		{&l.cuInit, []string{"cuInit"}, false},
		{&l.cuDriverGetVersion, []string{"cuDriverGetVersion"}, false},
		{&l.cuGetErrorName, []string{"cuGetErrorName"}, false},
		{&l.cuGetErrorString, []string{"cuGetErrorString"}, false},

		{&l.cuDeviceGetCount, []string{"cuDeviceGetCount"}, false},
		{&l.cuDeviceGet, []string{"cuDeviceGet"}, false},
		{&l.cuDeviceGetName, []string{"cuDeviceGetName"}, false},
		{&l.cuDeviceGetAttribute, []string{"cuDeviceGetAttribute"}, false},
		{&l.cuDeviceTotalMem, []string{"cuDeviceTotalMem_v2"}, false},
		{&l.cuDeviceGetPCIBusId, []string{"cuDeviceGetPCIBusId"}, false},
		{&l.cuDeviceCanAccessPeer, []string{"cuDeviceCanAccessPeer"}, false},
		{&l.cuDevicePrimaryCtxRetain, []string{"cuDevicePrimaryCtxRetain"}, false},
		{&l.cuDevicePrimaryCtxRelease, []string{"cuDevicePrimaryCtxRelease_v2"}, false},

		{&l.cuCtxSetCurrent, []string{"cuCtxSetCurrent"}, false},
		{&l.cuCtxSynchronize, []string{"cuCtxSynchronize"}, false},
		{&l.cuCtxEnablePeerAccess, []string{"cuCtxEnablePeerAccess"}, false},

		{&l.cuMemGetInfo, []string{"cuMemGetInfo_v2"}, false},
		{&l.cuMemAlloc, []string{"cuMemAlloc_v2"}, false},
		{&l.cuMemFree, []string{"cuMemFree_v2"}, false},
		{&l.cuMemAllocHost, []string{"cuMemAllocHost_v2"}, false},
		{&l.cuMemHostAlloc, []string{"cuMemHostAlloc"}, false},
		{&l.cuMemFreeHost, []string{"cuMemFreeHost"}, false},
		{&l.cuMemHostGetDevicePointer, []string{"cuMemHostGetDevicePointer_v2"}, false},
		{&l.cuMemHostRegister, []string{"cuMemHostRegister_v2"}, false},
		{&l.cuMemHostUnregister, []string{"cuMemHostUnregister"}, false},
		{&l.cuMemAllocManaged, []string{"cuMemAllocManaged"}, false},

		{&l.cuMemcpyHtoD, []string{"cuMemcpyHtoD_v2"}, false},
		{&l.cuMemcpyDtoH, []string{"cuMemcpyDtoH_v2"}, false},
		{&l.cuMemcpyDtoD, []string{"cuMemcpyDtoD_v2"}, false},
		{&l.cuMemcpyHtoDAsync, []string{"cuMemcpyHtoDAsync_v2"}, false},
		{&l.cuMemcpyDtoHAsync, []string{"cuMemcpyDtoHAsync_v2"}, false},
		{&l.cuMemcpyDtoDAsync, []string{"cuMemcpyDtoDAsync_v2"}, false},
		{&l.cuMemcpyPeerAsync, []string{"cuMemcpyPeerAsync"}, false},
		{&l.cuMemsetD8, []string{"cuMemsetD8_v2"}, false},
		{&l.cuMemsetD32, []string{"cuMemsetD32_v2"}, false},

		{&l.cuStreamCreate, []string{"cuStreamCreate"}, false},
		{&l.cuStreamDestroy, []string{"cuStreamDestroy_v2"}, false},
		{&l.cuStreamSynchronize, []string{"cuStreamSynchronize"}, false},
		{&l.cuStreamWaitEvent, []string{"cuStreamWaitEvent"}, false},
		{&l.cuEventCreate, []string{"cuEventCreate"}, false},
		{&l.cuEventRecord, []string{"cuEventRecord"}, false},
		{&l.cuEventSynchronize, []string{"cuEventSynchronize"}, false},
		// cuEventElapsedTime_v2 exists from CUDA 12.8; CUDA 13 headers bind
		// only it. The unversioned symbol has the same signature.
		{&l.cuEventElapsedTime, []string{"cuEventElapsedTime_v2", "cuEventElapsedTime"}, false},
		{&l.cuEventDestroy, []string{"cuEventDestroy_v2"}, false},

		{&l.cuModuleLoadDataEx, []string{"cuModuleLoadDataEx"}, false},
		{&l.cuModuleUnload, []string{"cuModuleUnload"}, false},
		{&l.cuModuleGetFunction, []string{"cuModuleGetFunction"}, false},
		{&l.cuLaunchKernel, []string{"cuLaunchKernel"}, false},

		// Optional: drivers before CUDA 12.2 lack the _v2 unified-memory
		// calls, before 11.7 the dma-buf export.
		{&l.cuMemPrefetchAsync, []string{"cuMemPrefetchAsync_v2"}, true},
		{&l.cuMemAdvise, []string{"cuMemAdvise_v2"}, true},
		{&l.cuPointerGetAttribute, []string{"cuPointerGetAttribute"}, false},
		{&l.cuMemGetHandleForAddressRange, []string{"cuMemGetHandleForAddressRange"}, true},
	}
}

var (
	loadOnce sync.Once
	loadErr  error
	loaded   atomic.Pointer[library]
)

// Load opens the driver library and binds its functions, once per process.
// Later calls return the first call's result. It does not call cuInit.
func Load() error {
	loadOnce.Do(func() {
		path := LibraryName
		if p := os.Getenv("DMALAB_LIBCUDA"); p != "" {
			path = p
		}
		l, err := openLibrary(path)
		if err != nil {
			loadErr = err
			return
		}
		loaded.Store(l)
	})
	return loadErr
}

// openLibrary dlopens path and binds the symbol table. It never panics: a
// missing library is ErrNoDriver, a missing required symbol ErrNotSupported.
func openLibrary(path string) (*library, error) {
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, fmt.Errorf("%w: dlopen %s: %v", ErrNoDriver, path, err)
	}
	l := &library{handle: h}
	var missing []string
	for _, s := range l.symbols() {
		addr := lookup(h, s.names)
		if addr == 0 {
			if !s.optional {
				missing = append(missing, s.names[0])
			}
			continue
		}
		purego.RegisterFunc(s.fn, addr)
	}
	if len(missing) > 0 {
		// The handle stays open: closing a half-bound driver library gains
		// nothing and the process will not load it again.
		return nil, fmt.Errorf("%w: %s lacks %v (driver too old for this binding?)", ErrNotSupported, path, missing)
	}
	return l, nil
}

// lookup returns the address of the first of names that the library exports.
func lookup(h uintptr, names []string) uintptr {
	for _, n := range names {
		if addr, err := purego.Dlsym(h, n); err == nil && addr != 0 {
			return addr
		}
	}
	return 0
}

// lib returns the bound library, loading it if needed.
func lib() (*library, error) {
	if err := Load(); err != nil {
		return nil, err
	}
	return loaded.Load(), nil
}

// errMissing is returned by calls whose optional symbol the driver lacks.
func errMissing(name string) error {
	return fmt.Errorf("%s: %w: symbol not exported by this driver", name, ErrNotSupported)
}

// driverErrorName asks the loaded driver for a result's name.
func driverErrorName(r Result) (string, bool) {
	l := loaded.Load()
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
