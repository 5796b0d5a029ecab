// Package nvml binds the parts of the NVIDIA Management Library
// (libnvidia-ml.so.1, nvml.h) that dmalab reads: driver version, device
// handles, BAR1 memory and PCIe link state. It is bound without cgo, through
// github.com/ebitengine/purego, in the same way as package cuda: a table of
// exact symbol names (symbols.go) loaded once, each symbol checked with Dlsym
// before it is registered, so that a missing library is ErrNoLibrary and a
// missing symbol ErrNotSupported, never a panic. Every nvmlReturn_t other than
// NVML_SUCCESS is returned as a Return, an error carrying nvmlErrorString's
// text.
//
// Init must succeed before the device calls; Shutdown balances it. NVML calls
// are thread-safe and need no locked thread.
//
// Real counterpart: nvml.h of the NVIDIA driver (R535 and later).
package nvml
