package nvml

import (
	"errors"
	"fmt"

	"github.com/dmalab/dmalab/hw/internal/dl"
)

// LibraryName is NVML's soname; DMALAB_LIBNVML overrides it with a path.
const LibraryName = "libnvidia-ml.so.1"

// Sentinel errors; match with errors.Is.
var (
	// ErrNoLibrary: libnvidia-ml.so.1 cannot be opened (no NVIDIA driver).
	ErrNoLibrary = errors.New("nvml: no NVML library")
	// ErrNotSupported: a symbol is missing, or NVML answered
	// NVML_ERROR_NOT_SUPPORTED or NVML_ERROR_FUNCTION_NOT_FOUND.
	ErrNotSupported = errors.New("nvml: not supported")
	// ErrNoDevice: the kernel driver is not loaded or a device is not found.
	ErrNoDevice = errors.New("nvml: no device")
)

// Return is an nvmlReturn_t (nvml.h, enum nvmlReturn_enum) other than
// NVML_SUCCESS.
type Return uint32

// nvmlReturn_t values used by name.
const (
	Success                Return = 0
	ReturnUninitialized    Return = 1
	ReturnInvalidArgument  Return = 2
	ReturnNotSupported     Return = 3
	ReturnNoPermission     Return = 4
	ReturnNotFound         Return = 6
	ReturnDriverNotLoaded  Return = 9
	ReturnFunctionNotFound Return = 13
	ReturnGPUIsLost        Return = 15
	ReturnUnknown          Return = 999
)

var returnNames = map[Return]string{
	0: "NVML_SUCCESS", 1: "NVML_ERROR_UNINITIALIZED", 2: "NVML_ERROR_INVALID_ARGUMENT",
	3: "NVML_ERROR_NOT_SUPPORTED", 4: "NVML_ERROR_NO_PERMISSION", 5: "NVML_ERROR_ALREADY_INITIALIZED",
	6: "NVML_ERROR_NOT_FOUND", 7: "NVML_ERROR_INSUFFICIENT_SIZE", 9: "NVML_ERROR_DRIVER_NOT_LOADED",
	12: "NVML_ERROR_LIBRARY_NOT_FOUND", 13: "NVML_ERROR_FUNCTION_NOT_FOUND", 15: "NVML_ERROR_GPU_IS_LOST",
	999: "NVML_ERROR_UNKNOWN",
}

// Name returns the nvml.h name of the return code.
func (r Return) Name() string {
	if n, ok := returnNames[r]; ok {
		return n
	}
	return fmt.Sprintf("NVML_ERROR_%d", uint32(r))
}

func (r Return) Error() string {
	if l := loader.Loaded(); l != nil {
		return fmt.Sprintf("%s (%d): %s", r.Name(), uint32(r), l.nvmlErrorString(r))
	}
	return fmt.Sprintf("%s (%d)", r.Name(), uint32(r))
}

// Is matches the sentinels.
func (r Return) Is(target error) bool {
	switch target {
	case ErrNotSupported:
		return r == ReturnNotSupported || r == ReturnFunctionNotFound
	case ErrNoDevice:
		return r == ReturnDriverNotLoaded || r == ReturnNotFound || r == ReturnGPUIsLost
	}
	return false
}

func check(op string, r Return) error {
	if r == Success {
		return nil
	}
	return fmt.Errorf("%s: %w", op, r)
}

// Device is an nvmlDevice_t handle (nvml.h: typedef struct nvmlDevice_st* nvmlDevice_t).
type Device uintptr

// BAR1Memory mirrors nvmlBAR1Memory_t (nvml.h: struct nvmlBAR1Memory_st
// { unsigned long long bar1Total, bar1Free, bar1Used; }), in bytes.
type BAR1Memory struct {
	Total uint64
	Free  uint64
	Used  uint64
}

// pciInfo mirrors nvmlPciInfo_t as nvmlDeviceGetPciInfo_v3 fills it
// (nvml.h: struct nvmlPciInfo_st): 68 bytes, no padding.
type pciInfo struct {
	BusIDLegacy    [16]byte // NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE
	Domain         uint32
	Bus            uint32
	Device         uint32
	PCIDeviceID    uint32 // device id << 16 | vendor id
	PCISubSystemID uint32
	BusID          [32]byte // NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE
}

// PCIInfo is a device's PCI identity.
type PCIInfo struct {
	BusID       string // "00000000:C1:00.0"
	Domain      uint32
	Bus         uint32
	Device      uint32
	PCIDeviceID uint32 // device id << 16 | vendor id (0x10de)
	SubsystemID uint32
}

// PCIeLink is the link's current and maximum generation and width.
type PCIeLink struct {
	CurrentGen   int
	CurrentWidth int
	MaxGen       int
	MaxWidth     int
}

type library struct {
	handle uintptr

	nvmlInit                       func() Return
	nvmlShutdown                   func() Return
	nvmlErrorString                func(r Return) string
	nvmlSystemGetDriverVersion     func(buf *byte, n uint32) Return
	nvmlSystemGetCudaDriverVersion func(v *int32) Return
	nvmlDeviceGetCount             func(n *uint32) Return
	nvmlDeviceGetHandleByIndex     func(i uint32, d *Device) Return
	nvmlDeviceGetHandleByPciBusId  func(id string, d *Device) Return
	nvmlDeviceGetName              func(d Device, buf *byte, n uint32) Return
	nvmlDeviceGetBAR1MemoryInfo    func(d Device, m *BAR1Memory) Return
	nvmlDeviceGetPciInfo           func(d Device, p *pciInfo) Return
	nvmlDeviceGetCurrPcieLinkGen   func(d Device, v *uint32) Return
	nvmlDeviceGetCurrPcieLinkWidth func(d Device, v *uint32) Return
	nvmlDeviceGetMaxPcieLinkGen    func(d Device, v *uint32) Return
	nvmlDeviceGetMaxPcieLinkWidth  func(d Device, v *uint32) Return
	// Optional: nil where the library lacks them.
	nvmlDeviceGetNvLinkState         func(d Device, link uint32, active *int32) Return
	nvmlDeviceGetNvLinkRemotePciInfo func(d Device, link uint32, p *pciInfo) Return
}

func (l *library) symbols() []dl.Symbol {
	return []dl.Symbol{
		{Fn: &l.nvmlInit, Names: []string{"nvmlInit_v2"}},
		{Fn: &l.nvmlShutdown, Names: []string{"nvmlShutdown"}},
		{Fn: &l.nvmlErrorString, Names: []string{"nvmlErrorString"}},
		{Fn: &l.nvmlSystemGetDriverVersion, Names: []string{"nvmlSystemGetDriverVersion"}},
		{Fn: &l.nvmlSystemGetCudaDriverVersion, Names: []string{"nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"}},
		{Fn: &l.nvmlDeviceGetCount, Names: []string{"nvmlDeviceGetCount_v2"}},
		{Fn: &l.nvmlDeviceGetHandleByIndex, Names: []string{"nvmlDeviceGetHandleByIndex_v2"}},
		{Fn: &l.nvmlDeviceGetHandleByPciBusId, Names: []string{"nvmlDeviceGetHandleByPciBusId_v2"}},
		{Fn: &l.nvmlDeviceGetName, Names: []string{"nvmlDeviceGetName"}},
		{Fn: &l.nvmlDeviceGetBAR1MemoryInfo, Names: []string{"nvmlDeviceGetBAR1MemoryInfo"}},
		{Fn: &l.nvmlDeviceGetPciInfo, Names: []string{"nvmlDeviceGetPciInfo_v3"}},
		{Fn: &l.nvmlDeviceGetCurrPcieLinkGen, Names: []string{"nvmlDeviceGetCurrPcieLinkGeneration"}},
		{Fn: &l.nvmlDeviceGetCurrPcieLinkWidth, Names: []string{"nvmlDeviceGetCurrPcieLinkWidth"}},
		{Fn: &l.nvmlDeviceGetMaxPcieLinkGen, Names: []string{"nvmlDeviceGetMaxPcieLinkGeneration"}},
		{Fn: &l.nvmlDeviceGetMaxPcieLinkWidth, Names: []string{"nvmlDeviceGetMaxPcieLinkWidth"}},
		{Fn: &l.nvmlDeviceGetNvLinkState, Names: []string{"nvmlDeviceGetNvLinkState"}, Optional: true},
		{Fn: &l.nvmlDeviceGetNvLinkRemotePciInfo, Names: []string{"nvmlDeviceGetNvLinkRemotePciInfo_v2"}, Optional: true},
	}
}

// loader binds the library once per process.
var loader = dl.Loader[library]{Default: LibraryName, Env: "DMALAB_LIBNVML", Open: openLibrary}

// Load opens the library and binds its functions, once per process.
func Load() error {
	_, err := loader.Load()
	return err
}

func openLibrary(path string) (*library, error) {
	h, err := dl.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoLibrary, err)
	}
	l := &library{handle: h}
	missing := dl.Bind(h, l.symbols())
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: %s lacks %v", ErrNotSupported, path, missing)
	}
	return l, nil
}

// Init loads the library and initialises NVML (nvmlInit_v2). Each successful
// Init must be balanced by Shutdown.
func Init() error {
	if err := Load(); err != nil {
		return err
	}
	return check("nvmlInit_v2", loader.Loaded().nvmlInit())
}

// Shutdown balances Init (nvmlShutdown).
func Shutdown() error {
	l := loader.Loaded()
	if l == nil {
		return nil
	}
	return check("nvmlShutdown", l.nvmlShutdown())
}

func lib() (*library, error) { return loader.Load() }

// DriverVersion returns the kernel driver's version, "580.159.04" style.
func DriverVersion() (string, error) {
	l, err := lib()
	if err != nil {
		return "", err
	}
	buf := make([]byte, 96)
	if err := check("nvmlSystemGetDriverVersion", l.nvmlSystemGetDriverVersion(&buf[0], uint32(len(buf)))); err != nil {
		return "", err
	}
	return cString(buf), nil
}

// CUDADriverVersion returns the CUDA version the driver supports (13000 for 13.0).
func CUDADriverVersion() (int, error) {
	l, err := lib()
	if err != nil {
		return 0, err
	}
	var v int32
	if err := check("nvmlSystemGetCudaDriverVersion_v2", l.nvmlSystemGetCudaDriverVersion(&v)); err != nil {
		return 0, err
	}
	return int(v), nil
}

// DeviceCount returns the number of GPUs NVML sees (nvmlDeviceGetCount_v2).
func DeviceCount() (int, error) {
	l, err := lib()
	if err != nil {
		return 0, err
	}
	var n uint32
	if err := check("nvmlDeviceGetCount_v2", l.nvmlDeviceGetCount(&n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// DeviceByIndex returns a handle by NVML index. NVML's order is by PCI bus
// id and may differ from CUDA's; prefer DeviceByPCIBusID.
func DeviceByIndex(i int) (Device, error) {
	l, err := lib()
	if err != nil {
		return 0, err
	}
	var d Device
	if err := check(fmt.Sprintf("nvmlDeviceGetHandleByIndex_v2(%d)", i), l.nvmlDeviceGetHandleByIndex(uint32(i), &d)); err != nil {
		return 0, err
	}
	return d, nil
}

// DeviceByPCIBusID returns the handle of the GPU at a PCI address; CUDA's
// "0000:c1:00.0" form is accepted.
func DeviceByPCIBusID(busID string) (Device, error) {
	l, err := lib()
	if err != nil {
		return 0, err
	}
	var d Device
	if err := check(fmt.Sprintf("nvmlDeviceGetHandleByPciBusId_v2(%s)", busID), l.nvmlDeviceGetHandleByPciBusId(busID, &d)); err != nil {
		return 0, err
	}
	return d, nil
}

// Name returns the device's name (nvmlDeviceGetName).
func (d Device) Name() (string, error) {
	l, err := lib()
	if err != nil {
		return "", err
	}
	buf := make([]byte, 96)
	if err := check("nvmlDeviceGetName", l.nvmlDeviceGetName(d, &buf[0], uint32(len(buf)))); err != nil {
		return "", err
	}
	return cString(buf), nil
}

// BAR1 returns the BAR1 aperture's total, free and used bytes
// (nvmlDeviceGetBAR1MemoryInfo).
func (d Device) BAR1() (BAR1Memory, error) {
	l, err := lib()
	if err != nil {
		return BAR1Memory{}, err
	}
	var m BAR1Memory
	err = check("nvmlDeviceGetBAR1MemoryInfo", l.nvmlDeviceGetBAR1MemoryInfo(d, &m))
	return m, err
}

// PCIInfo returns the device's PCI identity (nvmlDeviceGetPciInfo_v3).
func (d Device) PCIInfo() (PCIInfo, error) {
	l, err := lib()
	if err != nil {
		return PCIInfo{}, err
	}
	var p pciInfo
	if err := check("nvmlDeviceGetPciInfo_v3", l.nvmlDeviceGetPciInfo(d, &p)); err != nil {
		return PCIInfo{}, err
	}
	return PCIInfo{
		BusID: cString(p.BusID[:]), Domain: p.Domain, Bus: p.Bus, Device: p.Device,
		PCIDeviceID: p.PCIDeviceID, SubsystemID: p.PCISubSystemID,
	}, nil
}

// PCIeLink returns the current and maximum PCIe generation and width. The
// current values drop when the GPU idles (link power management), so read
// them under load for the negotiated link.
func (d Device) PCIeLink() (PCIeLink, error) {
	l, err := lib()
	if err != nil {
		return PCIeLink{}, err
	}
	var cg, cw, mg, mw uint32
	for _, c := range []struct {
		op string
		r  Return
	}{
		{"nvmlDeviceGetCurrPcieLinkGeneration", l.nvmlDeviceGetCurrPcieLinkGen(d, &cg)},
		{"nvmlDeviceGetCurrPcieLinkWidth", l.nvmlDeviceGetCurrPcieLinkWidth(d, &cw)},
		{"nvmlDeviceGetMaxPcieLinkGeneration", l.nvmlDeviceGetMaxPcieLinkGen(d, &mg)},
		{"nvmlDeviceGetMaxPcieLinkWidth", l.nvmlDeviceGetMaxPcieLinkWidth(d, &mw)},
	} {
		if err := check(c.op, c.r); err != nil {
			return PCIeLink{}, err
		}
	}
	return PCIeLink{CurrentGen: int(cg), CurrentWidth: int(cw), MaxGen: int(mg), MaxWidth: int(mw)}, nil
}

// IsUnavailable reports whether err means NVML cannot be used here at all.
func IsUnavailable(err error) bool {
	return errors.Is(err, ErrNoLibrary) || errors.Is(err, ErrNotSupported) || errors.Is(err, ErrNoDevice)
}

func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// MaxNVLinks is NVML_NVLINK_MAX_LINKS (nvml.h): 18 since Hopper.
const MaxNVLinks = 18

// NVLink is one active NVLink of a device and the PCI bus ID of the device
// at its far end (a peer GPU, or an NVSwitch).
type NVLink struct {
	Link        int
	RemoteBusID string
}

// NVLinks lists the device's active NVLinks (nvmlDeviceGetNvLinkState,
// nvmlDeviceGetNvLinkRemotePciInfo_v2). A GPU without NVLink has none:
// NVML answers NOT_SUPPORTED or INVALID_ARGUMENT for its links, and that
// is an empty list, not an error.
func (d Device) NVLinks() ([]NVLink, error) {
	l, err := lib()
	if err != nil {
		return nil, err
	}
	if l.nvmlDeviceGetNvLinkState == nil || l.nvmlDeviceGetNvLinkRemotePciInfo == nil {
		return nil, fmt.Errorf("%w: this NVML lacks the NVLink queries", ErrNotSupported)
	}
	var out []NVLink
	for link := range uint32(MaxNVLinks) {
		var active int32 // nvmlEnableState_t: 0 disabled, 1 enabled
		switch r := l.nvmlDeviceGetNvLinkState(d, link, &active); r {
		case 0:
		case 2, 3: // NVML_ERROR_INVALID_ARGUMENT, NVML_ERROR_NOT_SUPPORTED: no such link
			continue
		default:
			return out, check(fmt.Sprintf("nvmlDeviceGetNvLinkState(link %d)", link), r)
		}
		if active != 1 {
			continue
		}
		var p pciInfo
		if err := check(fmt.Sprintf("nvmlDeviceGetNvLinkRemotePciInfo_v2(link %d)", link),
			l.nvmlDeviceGetNvLinkRemotePciInfo(d, link, &p)); err != nil {
			return out, err
		}
		out = append(out, NVLink{Link: int(link), RemoteBusID: cString(p.BusID[:])})
	}
	return out, nil
}
