package dma

import (
	"fmt"

	"github.com/dmalab/dmalab/mem"
)

// The device side. Read, Write, ReadBytes and WriteBytes are what the
// device's DMA engine does at bus addresses: translate them (the
// physical address under direct mapping, which for a bounced mapping is
// the swiotlb slot, not the caller's buffer), then read or write memory
// with the device's coherency (mem.DeviceRead / DeviceWrite). Each
// access is reported (OpDeviceAccess) before it happens; whether the
// range was mapped, and for which direction, is the checker's to decide.
// These calls cost no time: moving the bytes over PCIe and the memory
// bus is the DMA engine's job (flows on the fabric), which calls them
// for the content once the transfer lands.

// Read is the device reading [addr, addr+size). An address beyond the
// device's mask or that is not RAM is an error wrapping mem.ErrBadAddr
// (on real hardware an unsupported request or a master abort).
func (d *Device) Read(addr mem.DMAAddr, size uint64) (mem.Access, error) {
	pa, err := d.access(addr, size, false)
	if err != nil {
		return mem.Access{}, err
	}
	return d.dma.mem.DeviceRead(d.name, d.coherent, pa, size), nil
}

// Write is the device writing [addr, addr+size).
func (d *Device) Write(addr mem.DMAAddr, size uint64) (mem.Version, error) {
	pa, err := d.access(addr, size, true)
	if err != nil {
		return 0, err
	}
	return d.dma.mem.DeviceWrite(d.name, d.coherent, pa, size), nil
}

// ReadBytes is Read into buf (payload mode).
func (d *Device) ReadBytes(addr mem.DMAAddr, buf []byte) (mem.Access, error) {
	pa, err := d.access(addr, uint64(len(buf)), false)
	if err != nil {
		return mem.Access{}, err
	}
	return d.dma.mem.DeviceReadBytes(d.name, d.coherent, pa, buf), nil
}

// WriteBytes is Write of data (payload mode).
func (d *Device) WriteBytes(addr mem.DMAAddr, data []byte) (mem.Version, error) {
	pa, err := d.access(addr, uint64(len(data)), true)
	if err != nil {
		return 0, err
	}
	return d.dma.mem.DeviceWriteBytes(d.name, d.coherent, pa, data), nil
}

// access reports the access and translates it.
func (d *Device) access(addr mem.DMAAddr, size uint64, write bool) (mem.PhysAddr, error) {
	pa := d.mapper.toPhys(addr)
	var err error
	switch {
	case !d.capable(addr, size):
		err = fmt.Errorf("%s: DMA %s of %v+%d: beyond the device's mask %#x: %w", d.name, rw(write), addr, size, d.mask, mem.ErrBadAddr)
	case !d.dma.isRAM(pa, size):
		err = fmt.Errorf("%s: DMA %s of %v+%d: %v is not RAM: %w", d.name, rw(write), addr, size, pa, mem.ErrBadAddr)
	}
	if d.dma.observed() {
		c := d.dma.call.begin("device_"+rw(write), d.name).hex("dma:", uint64(addr)).dec(size)
		e := &Event{
			Op: OpDeviceAccess, Time: d.dma.eng.Now(), Device: d.name,
			Addr: addr, Size: size, Phys: pa, Write: write, Failed: err != nil,
			Bounced: d.dma.tlb.contains(pa), Call: c.end(),
		}
		if err != nil {
			e.Warn = err.Error()
		}
		d.dma.emit(e)
	}
	return pa, err
}

func rw(write bool) string {
	if write {
		return "write"
	}
	return "read"
}
