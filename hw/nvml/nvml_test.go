package nvml

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"unsafe"
)

func TestOpenMissingLibrary(t *testing.T) {
	_, err := openLibrary("/nonexistent/libnvidia-ml.so.1")
	if !errors.Is(err, ErrNoLibrary) || !IsUnavailable(err) {
		t.Fatalf("openLibrary(missing) = %v, want ErrNoLibrary", err)
	}
}

func TestOpenLibraryWithoutSymbols(t *testing.T) {
	_, err := openLibrary("libc.so.6")
	if errors.Is(err, ErrNoLibrary) {
		t.Skipf("libc.so.6 cannot be opened here: %v", err)
	}
	if !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "nvmlInit_v2") {
		t.Fatalf("openLibrary(libc) = %v, want ErrNotSupported naming nvmlInit_v2", err)
	}
}

func TestStructLayouts(t *testing.T) {
	// nvml.h: nvmlBAR1Memory_t is three unsigned long long; nvmlPciInfo_t
	// is char[16], five unsigned int, char[32].
	if s := unsafe.Sizeof(BAR1Memory{}); s != 24 {
		t.Errorf("sizeof(BAR1Memory) = %d, want 24", s)
	}
	if s := unsafe.Sizeof(pciInfo{}); s != 68 {
		t.Errorf("sizeof(pciInfo) = %d, want 68", s)
	}
	if o := unsafe.Offsetof(pciInfo{}.BusID); o != 36 {
		t.Errorf("offsetof(busId) = %d, want 36", o)
	}
}

func TestSymbolTableComplete(t *testing.T) {
	var l library
	n := 0
	typ := reflect.TypeOf(l)
	for i := range typ.NumField() {
		if typ.Field(i).Type.Kind() == reflect.Func {
			n++
		}
	}
	if len(l.symbols()) != n {
		t.Errorf("table binds %d of %d functions", len(l.symbols()), n)
	}
}

func TestReturnError(t *testing.T) {
	err := check("nvmlDeviceGetBAR1MemoryInfo", ReturnNotSupported)
	if !errors.Is(err, ErrNotSupported) || errors.Is(err, ErrNoDevice) {
		t.Errorf("sentinel matching wrong for %v", err)
	}
	if !strings.Contains(err.Error(), "NVML_ERROR_NOT_SUPPORTED (3)") {
		t.Errorf("message %q", err)
	}
	if !errors.Is(check("x", ReturnDriverNotLoaded), ErrNoDevice) {
		t.Error("driver not loaded should match ErrNoDevice")
	}
}

func TestRealNVML(t *testing.T) {
	if err := Init(); err != nil {
		if IsUnavailable(err) {
			t.Skipf("no NVML here: %v", err)
		}
		t.Fatalf("nvmlInit: %v", err)
	}
	defer Shutdown()
	v, err := DriverVersion()
	if err != nil || !strings.Contains(v, ".") {
		t.Fatalf("DriverVersion = %q, %v", v, err)
	}
	n, err := DeviceCount()
	if err != nil || n < 1 {
		t.Fatalf("DeviceCount = %d, %v", n, err)
	}
	d, err := DeviceByIndex(0)
	if err != nil {
		t.Fatal(err)
	}
	pci, err := d.PCIInfo()
	if err != nil || pci.PCIDeviceID&0xffff != 0x10de {
		t.Fatalf("PCIInfo = %+v, %v", pci, err)
	}
	d2, err := DeviceByPCIBusID(pci.BusID)
	if err != nil || d2 != d {
		t.Fatalf("DeviceByPCIBusID(%s) = %v, %v", pci.BusID, d2, err)
	}
	bar, err := d.BAR1()
	if err != nil || bar.Total == 0 || bar.Used > bar.Total {
		t.Fatalf("BAR1 = %+v, %v", bar, err)
	}
	link, err := d.PCIeLink()
	if err != nil || link.MaxGen < 1 || link.MaxWidth < 1 {
		t.Fatalf("PCIeLink = %+v, %v", link, err)
	}
	name, _ := d.Name()
	t.Logf("driver %s: %s %s BAR1 %d MiB (used %d MiB), PCIe gen %d x%d (max gen %d x%d)",
		v, name, pci.BusID, bar.Total>>20, bar.Used>>20, link.CurrentGen, link.CurrentWidth, link.MaxGen, link.MaxWidth)
}
