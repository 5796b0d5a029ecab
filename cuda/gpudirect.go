package cuda

import (
	"github.com/dmalab/dmalab/sim"
)

// DeviceAttribute is a CUdevice_attribute; only the GPUDirect RDMA
// ones are modelled (DeviceGetAttribute).
type DeviceAttribute int

const (
	DeviceAttributeGPUDirectRDMASupported          DeviceAttribute = 116 // CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED
	DeviceAttributeGPUDirectRDMAFlushWritesOptions DeviceAttribute = 117 // ..._GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS
	DeviceAttributeGPUDirectRDMAWritesOrdering     DeviceAttribute = 118 // ..._GPU_DIRECT_RDMA_WRITES_ORDERING
)

// Values of the GPUDirect RDMA attributes and of
// cuFlushGPUDirectRDMAWrites' arguments, as cuda.h defines them.
const (
	FlushGPUDirectRDMAWritesOptionHost   = 1 << 0 // CU_FLUSH_GPU_DIRECT_RDMA_WRITES_OPTION_HOST
	FlushGPUDirectRDMAWritesOptionMemops = 1 << 1 // CU_FLUSH_GPU_DIRECT_RDMA_WRITES_OPTION_MEMOPS

	GPUDirectRDMAWritesOrderingNone       = 0   // CU_GPU_DIRECT_RDMA_WRITES_ORDERING_NONE
	GPUDirectRDMAWritesOrderingOwner      = 100 // CU_GPU_DIRECT_RDMA_WRITES_ORDERING_OWNER
	GPUDirectRDMAWritesOrderingAllDevices = 200 // CU_GPU_DIRECT_RDMA_WRITES_ORDERING_ALL_DEVICES

	FlushGPUDirectRDMAWritesTargetCurrentCtx = 0   // CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX
	FlushGPUDirectRDMAWritesToOwner          = 100 // CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER
	FlushGPUDirectRDMAWritesToAllDevices     = 200 // CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_ALL_DEVICES
)

// FlushGPUDirectRDMAWritesCost is what cuFlushGPUDirectRDMAWrites costs
// the calling thread: assumed (a driver call and a fence through the
// GPU's host interface; NVIDIA publishes no number).
var FlushGPUDirectRDMAWritesCost = 2 * sim.Microsecond

// DeviceGetAttribute is cuDeviceGetAttribute for the GPUDirect RDMA
// attributes. A discrete GPU answers what the H200 measured here
// answered (docs/measurements/2026-11-21-h200-cli-probe.txt:
// gpu_direct_rdma_supported=1, flush_writes_options=1 (host),
// writes_ordering=100 (owner)), the model taking it for every discrete
// GPU; an integrated GPU answers 0 to all three (assumed: its
// third-party access goes through the Tegra nvidia_p2p, not BAR1).
// Another attribute is CUDA_ERROR_INVALID_VALUE, another device
// CUDA_ERROR_INVALID_DEVICE.
func (d *Driver) DeviceGetAttribute(attr DeviceAttribute, dev int) (int, error) {
	const call = "cuDeviceGetAttribute"
	if dev < 0 || dev >= len(d.sys.Devices) {
		return 0, failf(call, ErrorInvalidDevice, "device %d", dev)
	}
	discrete := !d.sys.Devices[dev].Integrated()
	switch attr {
	case DeviceAttributeGPUDirectRDMASupported:
		return b2i(discrete), nil
	case DeviceAttributeGPUDirectRDMAFlushWritesOptions:
		return b2i(discrete) * FlushGPUDirectRDMAWritesOptionHost, nil
	case DeviceAttributeGPUDirectRDMAWritesOrdering:
		if discrete {
			return GPUDirectRDMAWritesOrderingOwner, nil
		}
		return GPUDirectRDMAWritesOrderingNone, nil
	}
	return 0, failf(call, ErrorInvalidValue, "attribute %d is not modelled", attr)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// FlushGPUDirectRDMAWrites is cuFlushGPUDirectRDMAWrites: make the
// GPUDirect RDMA writes that reached the context's GPU before the call
// visible to work of scope (its own: ToOwner; every device:
// ToAllDevices) launched after it. Target must be the current context.
// A GPU whose flush options lack HOST answers CUDA_ERROR_NOT_SUPPORTED;
// the model's peer writes land in VRAM when their transfer ends, so on
// GPUs whose writes ordering is OWNER (every discrete GPU here) the
// flush is only its cost, which the thread pays.
func (c *Context) FlushGPUDirectRDMAWrites(p *sim.Proc, target, scope int) error {
	const call = "cuFlushGPUDirectRDMAWrites"
	if err := c.check(call); err != nil {
		return err
	}
	switch {
	case target != FlushGPUDirectRDMAWritesTargetCurrentCtx:
		return failf(call, ErrorInvalidValue, "target %d", target)
	case scope != FlushGPUDirectRDMAWritesToOwner && scope != FlushGPUDirectRDMAWritesToAllDevices:
		return failf(call, ErrorInvalidValue, "scope %d", scope)
	}
	opts, _ := c.d.DeviceGetAttribute(DeviceAttributeGPUDirectRDMAFlushWritesOptions, c.dev.Index)
	if opts&FlushGPUDirectRDMAWritesOptionHost == 0 {
		return failf(call, ErrorNotSupported, "%s has no host flush of GPUDirect RDMA writes", c.dev.Name)
	}
	p.Sleep(FlushGPUDirectRDMAWritesCost)
	return nil
}
