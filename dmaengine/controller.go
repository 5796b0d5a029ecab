package dmaengine

import (
	"fmt"
	"math"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// Controller is one device's DMA engine hardware with the paths its
// transfers take: Linux's struct dma_device, whose channels (Chan) are
// the engine's independent queues.
//
// Every transfer is between the device and the host memory of the
// device's own NUMA node (drivers allocate buffers and rings there, as
// dev_to_node placement does): the routes are computed once.
type Controller struct {
	m    *machine.Machine
	mem  *mem.Memory
	dev  *dma.Device
	hw   *machine.Device
	node int

	// toDev is host memory → device (DMA reads: descriptor fetches, tx
	// data), fromDev device → host memory (DMA writes: rx data, status),
	// copy both in turn (a memory-to-memory copy through the engine).
	toDev, fromDev, copy fabric.Route
	// oneWay is the latency of a TLP between the CPU side of the root
	// complex and the device, without touching DRAM: a doorbell write
	// going down, a read request going up.
	oneWay sim.Time

	chans int
}

// New returns the DMA engine of the machine's device named device. d is
// the machine's DMA layer over memory: the engine accesses memory
// through the device's view in d, the driver's CPU through memory.
func New(m *machine.Machine, memory *mem.Memory, d *dma.DMA, device string) (*Controller, error) {
	var hw *machine.Device
	for _, x := range m.Devices {
		if x.Name == device {
			hw = x
		}
	}
	if hw == nil {
		return nil, fmt.Errorf("dmaengine %s: %w", device, errNoDevice(m))
	}
	dev, err := d.Device(device)
	if err != nil {
		return nil, fmt.Errorf("dmaengine %s: %w", device, err)
	}
	host, err := m.HostMemory(hw.Node)
	if err != nil {
		return nil, fmt.Errorf("dmaengine %s: %w", device, err)
	}
	c := &Controller{m: m, mem: memory, dev: dev, hw: hw, node: hw.Node}
	if c.toDev, err = m.DMARoute(host, hw.Side(), hw.DMA()); err != nil {
		return nil, fmt.Errorf("dmaengine %s: %w", device, err)
	}
	if c.fromDev, err = m.DMARoute(hw.Side(), host, hw.DMA()); err != nil {
		return nil, fmt.Errorf("dmaengine %s: %w", device, err)
	}
	c.copy = fabric.Route{Hops: append(append([]fabric.Hop(nil), c.toDev.Hops...), c.fromDev.Hops...)}
	dram := m.Nodes[hw.Node].DRAM
	var lat sim.Time
	for _, h := range c.toDev.Hops {
		if h.Link != dram && !h.Load {
			lat += h.Link.Latency()
		}
	}
	c.oneWay = sim.Time(math.Round(float64(lat) * m.Fabric.Factors().Latency))
	return c, nil
}

func errNoDevice(m *machine.Machine) error {
	var names []string
	for _, d := range m.Devices {
		names = append(names, d.Name)
	}
	return fmt.Errorf("platform %s has no such device (devices: %v)", m.Spec.Name, names)
}

// Device is the DMA API handle the engine accesses memory through.
func (c *Controller) Device() *dma.Device { return c.dev }

// Hardware is the machine's device.
func (c *Controller) Hardware() *machine.Device { return c.hw }

// Machine is the machine the engine belongs to.
func (c *Controller) Machine() *machine.Machine { return c.m }

// Memory is the memory the driver's CPU accesses go through.
func (c *Controller) Memory() *mem.Memory { return c.mem }

// Node is the NUMA node of the device, where its driver runs and its
// rings and buffers live.
func (c *Controller) Node() int { return c.node }

// OneWay is the latency of a TLP between the CPU and the device (a
// doorbell write, a DMA read request), the route's links without DRAM,
// times the fabric's latency factor.
func (c *Controller) OneWay() sim.Time { return c.oneWay }

// Routes are the fabric routes the engine's flows take: host memory to
// device (DMA reads), device to host memory (DMA writes), and both in
// turn (memory-to-memory copies).
func (c *Controller) Routes() (toDevice, fromDevice, copy fabric.Route) {
	return c.toDev, c.fromDev, c.copy
}
