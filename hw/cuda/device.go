package cuda

import (
	"fmt"
)

// DriverVersion returns the CUDA version the driver supports, as cuda.h
// encodes it: 1000*major + 10*minor (13000 for CUDA 13.0).
func DriverVersion() (int, error) {
	l, err := lib()
	if err != nil {
		return 0, err
	}
	var v int32
	if err := check("cuDriverGetVersion", l.cuDriverGetVersion(&v)); err != nil {
		return 0, err
	}
	return int(v), nil
}

// DeviceCount returns the number of CUDA devices. It calls Init first.
func DeviceCount() (int, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	l := loader.Loaded()
	var n int32
	if err := check("cuDeviceGetCount", l.cuDeviceGetCount(&n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// DeviceGet returns the device of an ordinal (cuDeviceGet).
func DeviceGet(ordinal int) (Device, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	l := loader.Loaded()
	var d Device
	if err := check(fmt.Sprintf("cuDeviceGet(%d)", ordinal), l.cuDeviceGet(&d, int32(ordinal))); err != nil {
		return 0, err
	}
	return d, nil
}

// Name returns the device's marketing name (cuDeviceGetName).
func (d Device) Name() (string, error) {
	l, err := initialized()
	if err != nil {
		return "", err
	}
	buf := make([]byte, 256)
	if err := check("cuDeviceGetName", l.cuDeviceGetName(&buf[0], int32(len(buf)), d)); err != nil {
		return "", err
	}
	return cString(buf), nil
}

// Attribute returns one device attribute (cuDeviceGetAttribute).
func (d Device) Attribute(a Attribute) (int, error) {
	l, err := initialized()
	if err != nil {
		return 0, err
	}
	var v int32
	if err := check(fmt.Sprintf("cuDeviceGetAttribute(%v)", a), l.cuDeviceGetAttribute(&v, a, d)); err != nil {
		return 0, err
	}
	return int(v), nil
}

// TotalMem returns the device memory in bytes (cuDeviceTotalMem_v2).
func (d Device) TotalMem() (int64, error) {
	l, err := initialized()
	if err != nil {
		return 0, err
	}
	var n uintptr
	if err := check("cuDeviceTotalMem_v2", l.cuDeviceTotalMem(&n, d)); err != nil {
		return 0, err
	}
	return int64(n), nil
}

// PCIBusID returns the device's PCI address, "0000:c1:00.0" style
// (cuDeviceGetPCIBusId).
func (d Device) PCIBusID() (string, error) {
	l, err := initialized()
	if err != nil {
		return "", err
	}
	buf := make([]byte, 64)
	if err := check("cuDeviceGetPCIBusId", l.cuDeviceGetPCIBusId(&buf[0], int32(len(buf)), d)); err != nil {
		return "", err
	}
	return cString(buf), nil
}

// CanAccessPeer reports whether d can map peer's memory (cuDeviceCanAccessPeer).
func (d Device) CanAccessPeer(peer Device) (bool, error) {
	l, err := initialized()
	if err != nil {
		return false, err
	}
	var v int32
	if err := check("cuDeviceCanAccessPeer", l.cuDeviceCanAccessPeer(&v, d, peer)); err != nil {
		return false, err
	}
	return v != 0, nil
}

// initialized returns the library after a successful Init.
func initialized() (*library, error) {
	if err := Init(); err != nil {
		return nil, err
	}
	return loader.Loaded(), nil
}
