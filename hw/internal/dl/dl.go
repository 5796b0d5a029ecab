// Package dl binds the C functions of a shared library (libcuda.so.1,
// libnvidia-ml.so.1) to Go function variables through purego, without
// cgo. Every symbol is looked up with Dlsym before it is registered:
// purego.RegisterLibFunc panics on a missing symbol, and a driver that is
// too old, or absent, must be an error value.
package dl

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/ebitengine/purego"
)

// Symbol is one function to bind: Fn points to a Go func variable of the
// C function's signature; Names are the exported names to try in order
// (a versioned name first, "cuMemAlloc_v2", then a fallback). An Optional
// symbol the library lacks leaves *Fn nil; a required one is reported.
type Symbol struct {
	Fn       any
	Names    []string
	Optional bool
}

// Open dlopens path with RTLD_NOW|RTLD_GLOBAL.
func Open(path string) (uintptr, error) {
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return 0, fmt.Errorf("dlopen %s: %v", path, err)
	}
	return h, nil
}

// Bind registers every symbol the library exports and returns the first
// name of each required one it lacks.
func Bind(h uintptr, syms []Symbol) (missing []string) {
	for _, s := range syms {
		addr := Lookup(h, s.Names)
		if addr == 0 {
			if !s.Optional {
				missing = append(missing, s.Names[0])
			}
			continue
		}
		purego.RegisterFunc(s.Fn, addr)
	}
	return missing
}

// Lookup returns the address of the first of names the library exports,
// or 0.
func Lookup(h uintptr, names []string) uintptr {
	for _, n := range names {
		if addr, err := purego.Dlsym(h, n); err == nil && addr != 0 {
			return addr
		}
	}
	return 0
}

// Loader opens and binds a library once per process: from the path in
// the environment variable Env when it is set, else Default, through
// Open. Later calls return the first call's result; the bound library is
// written once and only read afterwards, so it is safe from any thread.
type Loader[T any] struct {
	Default, Env string
	Open         func(path string) (*T, error)

	once sync.Once
	err  error
	lib  atomic.Pointer[T]
}

// Load opens the library on the first call and returns it, or the
// first call's error.
func (l *Loader[T]) Load() (*T, error) {
	l.once.Do(func() {
		path := l.Default
		if p := os.Getenv(l.Env); p != "" {
			path = p
		}
		lib, err := l.Open(path)
		if err != nil {
			l.err = err
			return
		}
		l.lib.Store(lib)
	})
	return l.lib.Load(), l.err
}

// Loaded is the library if a Load has succeeded, nil otherwise; it never
// loads.
func (l *Loader[T]) Loaded() *T { return l.lib.Load() }
