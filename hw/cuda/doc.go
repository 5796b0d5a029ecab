// Package cuda binds the CUDA driver API (libcuda.so.1, cuda.h) without cgo.
//
// The library is opened with dlopen through github.com/ebitengine/purego, once
// per process (Load). Every function is looked up by its exact exported name
// from a table (symbols.go): where cuda.h maps a name to a versioned symbol
// (cuMemAlloc → cuMemAlloc_v2, cuMemPrefetchAsync → cuMemPrefetchAsync_v2 in
// CUDA 13) the versioned one is bound. A symbol is checked with Dlsym before it
// is registered, so a missing library or symbol is an error value, never a
// panic:
//
//   - no libcuda.so.1 at all: Load returns an error matching ErrNoDriver;
//   - a required symbol missing (a driver too old for this binding): Load
//     returns an error matching ErrNotSupported that names the symbol;
//   - an optional symbol missing (for example cuMemGetHandleForAddressRange on
//     an old driver): Load succeeds and that one call returns ErrNotSupported.
//
// Every CUresult other than CUDA_SUCCESS is returned as a Result, an error that
// prints the name the driver gives it (cuGetErrorName) and matches the
// package's sentinels with errors.Is (CUDA_ERROR_NOT_SUPPORTED matches
// ErrNotSupported, CUDA_ERROR_NO_DEVICE matches ErrNoDevice).
//
// # Threads and contexts
//
// A CUDA context is current per OS thread. A Context owns one goroutine locked
// to one OS thread (runtime.LockOSThread) on which the device's primary context
// (cuDevicePrimaryCtxRetain, the context the CUDA runtime uses) is made
// current once. Work runs there: Context.Do hands a closure to that goroutine
// and waits for it, so callers on any goroutine are safe. The closure receives
// a *Thread, the only value that carries the context-bound operations
// (allocation, copies, streams, events, modules, launches); a Thread is valid
// only during the Do call that produced it. Device queries that need no
// context (DeviceCount, DeviceName, DeviceAttribute, ...) are package
// functions.
//
// Invariants: the library table is written once, inside the loader, and only read
// afterwards. A Context's primary context is retained from NewContext until
// Close and is current only on the Context's own thread.
//
// # Memory
//
// Host memory that the driver allocates (cuMemAllocHost, cuMemHostAlloc) is C
// memory, outside the Go heap; HostMem exposes it as a []byte without copying.
// Memory passed to cuMemHostRegister must not move and must outlive the
// registration: use memory from syscall.Mmap, never a Go heap slice. The unsafe
// conversions live in *_unsafe.go files.
//
// Real counterpart: the CUDA Driver API reference (cuda.h of CUDA 12/13).
package cuda
