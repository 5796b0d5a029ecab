package cuda

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"
)

func TestOpenMissingLibraryIsErrNoDriver(t *testing.T) {
	start := time.Now()
	_, err := openLibrary("/nonexistent/dmalab/libcuda.so.1")
	if !errors.Is(err, ErrNoDriver) {
		t.Fatalf("openLibrary(missing) = %v, want ErrNoDriver", err)
	}
	if !IsUnavailable(err) {
		t.Errorf("IsUnavailable(%v) = false", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("missing library took %v to report", d)
	}
}

func TestOpenLibraryWithoutSymbolsIsErrNotSupported(t *testing.T) {
	// libc is loaded in every purego process; it exports none of cuda.h.
	_, err := openLibrary("libc.so.6")
	if errors.Is(err, ErrNoDriver) {
		t.Skipf("libc.so.6 cannot be opened here: %v", err)
	}
	if !errors.Is(err, ErrNotSupported) {
		t.Fatalf("openLibrary(libc) = %v, want ErrNotSupported", err)
	}
	if !strings.Contains(err.Error(), "cuInit") || !strings.Contains(err.Error(), "cuMemAlloc_v2") {
		t.Errorf("error %q does not name the missing symbols", err)
	}
}

func TestSymbolTable(t *testing.T) {
	var l library
	seen := map[string]bool{}
	fields := map[uintptr]bool{}
	for _, s := range l.symbols() {
		v := reflect.ValueOf(s.Fn)
		if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Func {
			t.Errorf("%v: fn is %T, want pointer to func", s.Names, s.Fn)
			continue
		}
		if fields[v.Pointer()] {
			t.Errorf("%v: field bound twice", s.Names)
		}
		fields[v.Pointer()] = true
		for _, n := range s.Names {
			if seen[n] {
				t.Errorf("symbol %s listed twice", n)
			}
			seen[n] = true
		}
	}
	// Every func field of library is in the table.
	typ := reflect.TypeOf(l)
	nfunc := 0
	for i := range typ.NumField() {
		if typ.Field(i).Type.Kind() == reflect.Func {
			nfunc++
		}
	}
	if nfunc != len(fields) {
		t.Errorf("library has %d func fields, table binds %d", nfunc, len(fields))
	}
	// The versioned names CUDA 13's cuda.h binds these calls to (its
	// "#define cuMemAlloc cuMemAlloc_v2" and the like): a binding that
	// loads symbols by name must load these.
	for _, n := range []string{
		"cuMemAlloc_v2", "cuMemFree_v2", "cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2", "cuMemcpyHtoDAsync_v2",
		"cuMemHostRegister_v2", "cuMemPrefetchAsync_v2", "cuMemAdvise_v2", "cuEventElapsedTime_v2",
		"cuMemAllocHost_v2", "cuMemHostGetDevicePointer_v2", "cuDeviceTotalMem_v2", "cuMemGetInfo_v2",
		"cuStreamDestroy_v2", "cuEventDestroy_v2", "cuDevicePrimaryCtxRelease_v2",
	} {
		if !seen[n] {
			t.Errorf("table lacks %s", n)
		}
	}
	for _, n := range []string{"cuMemAlloc", "cuMemcpyHtoD", "cuMemPrefetchAsync", "cuMemAdvise"} {
		if seen[n] {
			t.Errorf("table binds unversioned %s", n)
		}
	}
}

func TestResultError(t *testing.T) {
	tests := []struct {
		r        Result
		name     string
		sentinel error
	}{
		{ErrorNotSupported, "CUDA_ERROR_NOT_SUPPORTED", ErrNotSupported},
		{ErrorNoDevice, "CUDA_ERROR_NO_DEVICE", ErrNoDevice},
		{ErrorStubLibrary, "CUDA_ERROR_STUB_LIBRARY", ErrNoDriver},
		{ErrorOutOfMemory, "CUDA_ERROR_OUT_OF_MEMORY", nil},
		{Result(12345), "CUDA_ERROR_12345", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := check("cuThing", tt.r)
			if err == nil {
				t.Fatal("check returned nil")
			}
			if want := fmt.Sprintf("cuThing: %s (%d)", tt.name, uint32(tt.r)); err.Error() != want {
				t.Errorf("message %q, want %q", err, want)
			}
			var r Result
			if !errors.As(err, &r) || r != tt.r {
				t.Errorf("errors.As gives %v, want %v", r, tt.r)
			}
			for _, s := range []error{ErrNotSupported, ErrNoDevice, ErrNoDriver} {
				if got := errors.Is(err, s); got != (s == tt.sentinel) {
					t.Errorf("errors.Is(%v, %v) = %v", err, s, got)
				}
			}
		})
	}
	if check("cuOK", Success) != nil {
		t.Error("check(Success) != nil")
	}
}

func TestMemLocationPackedMatchesCLayout(t *testing.T) {
	// CUmemLocation is { CUmemLocationType type; int id; }: 8 bytes, passed
	// by value in one integer register, so the packed integer must equal the
	// struct's bytes read as a little-endian uint64.
	if unsafe.Sizeof(MemLocation{}) != 8 {
		t.Fatalf("sizeof(MemLocation) = %d, want 8", unsafe.Sizeof(MemLocation{}))
	}
	for _, loc := range []MemLocation{DeviceLocation(0), DeviceLocation(7), HostLocation(), {MemLocationHostNUMA, -1}} {
		raw := *(*uint64)(unsafe.Pointer(&loc))
		if loc.packed() != raw {
			t.Errorf("%+v: packed %#x, memory %#x", loc, loc.packed(), raw)
		}
	}
	if got := DeviceLocation(3).packed(); got != 0x0000000300000001 {
		t.Errorf("DeviceLocation(3).packed() = %#x", got)
	}
}

func TestAttributeNames(t *testing.T) {
	if AttrDMABufSupported.String() != "dma_buf_supported" {
		t.Errorf("AttrDMABufSupported = %q", AttrDMABufSupported)
	}
	if Attribute(9999).String() != "attribute_9999" {
		t.Errorf("unknown attribute = %q", Attribute(9999))
	}
	names := map[string]bool{}
	for a, n := range attributeNames {
		if names[n] {
			t.Errorf("name %q used twice (attribute %d)", n, a)
		}
		names[n] = true
	}
}

func TestCString(t *testing.T) {
	if got := cString([]byte("NVIDIA H200\x00\x00junk")); got != "NVIDIA H200" {
		t.Errorf("cString = %q", got)
	}
	b := []byte("abc\x00")
	if got := goString(&b[0]); got != "abc" {
		t.Errorf("goString = %q", got)
	}
	if goString(nil) != "" || !bytes.Equal(hostBytes(nil, 4), nil) {
		t.Error("nil handling")
	}
}

// requireGPU initialises the driver, skipping the test only when this
// machine has no driver or no GPU.
func requireGPU(t *testing.T) {
	t.Helper()
	if err := Init(); err != nil {
		if IsUnavailable(err) {
			t.Skipf("no CUDA here: %v", err)
		}
		t.Fatalf("cuInit: %v", err)
	}
}

func TestRealDevice(t *testing.T) {
	requireGPU(t)
	n, err := DeviceCount()
	if err != nil || n < 1 {
		t.Fatalf("DeviceCount = %d, %v", n, err)
	}
	v, err := DriverVersion()
	if err != nil || v < 11000 {
		t.Fatalf("DriverVersion = %d, %v", v, err)
	}
	d, err := DeviceGet(0)
	if err != nil {
		t.Fatal(err)
	}
	name, err := d.Name()
	if err != nil || name == "" {
		t.Fatalf("Name = %q, %v", name, err)
	}
	bus, err := d.PCIBusID()
	if err != nil || !strings.Contains(bus, ":") {
		t.Fatalf("PCIBusID = %q, %v", bus, err)
	}
	sms, err := d.Attribute(AttrMultiprocessorCount)
	if err != nil || sms < 1 {
		t.Fatalf("SM count = %d, %v", sms, err)
	}
	mem, err := d.TotalMem()
	if err != nil || mem < 1<<30 {
		t.Fatalf("TotalMem = %d, %v", mem, err)
	}
	if _, err := DeviceGet(n + 100); !errors.Is(err, ErrNoDevice) {
		t.Errorf("DeviceGet(out of range) = %v, want ErrNoDevice", err)
	}
	t.Logf("driver %d, %s at %s, %d SMs, %d MiB", v, name, bus, sms, mem>>20)
}

func TestRealContextRoundTrip(t *testing.T) {
	requireGPU(t)
	d, err := DeviceGet(0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewContext(d)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var escaped *Thread
	err = c.Do(func(th *Thread) error {
		escaped = th
		const n = 1 << 20
		p, err := th.MemAlloc(n)
		if err != nil {
			return err
		}
		defer th.MemFree(p)
		h, err := th.MemHostAlloc(n, HostAllocPortable)
		if err != nil {
			return err
		}
		defer th.FreeHost(h)
		src := h.Bytes()
		for i := range src {
			src[i] = byte(i * 7)
		}
		s, err := th.StreamCreate(StreamNonBlocking)
		if err != nil {
			return err
		}
		defer th.StreamDestroy(s)
		e0, _ := th.EventCreate(EventDefault)
		e1, _ := th.EventCreate(EventDefault)
		defer th.EventDestroy(e0)
		defer th.EventDestroy(e1)
		if err := th.EventRecord(e0, s); err != nil {
			return err
		}
		if err := th.MemcpyHtoDAsync(p, src, s); err != nil {
			return err
		}
		if err := th.EventRecord(e1, s); err != nil {
			return err
		}
		if err := th.StreamSynchronize(s); err != nil {
			return err
		}
		if el, err := th.EventElapsed(e0, e1); err != nil || el <= 0 {
			return fmt.Errorf("elapsed %v, %v", el, err)
		}
		back := make([]byte, n)
		if err := th.MemcpyDtoH(back, p); err != nil {
			return err
		}
		if !bytes.Equal(back, src) {
			return errors.New("round trip differs")
		}
		id, err := th.PointerBufferID(p)
		if err != nil || id == 0 {
			return fmt.Errorf("buffer id %d, %v", id, err)
		}
		var r Result
		if _, err := th.MemAlloc(1 << 62); !errors.As(err, &r) {
			return fmt.Errorf("huge alloc: %v, want a CUresult", err)
		}
		t.Logf("cuMemAlloc(2^62) = %v", r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if recover() == nil {
			t.Error("escaped Thread did not panic")
		}
	}()
	_, _ = escaped.MemAlloc(16)
}
