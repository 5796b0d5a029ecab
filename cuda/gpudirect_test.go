package cuda

import (
	"errors"
	"testing"

	"github.com/dmalab/dmalab/sim"
)

func TestGPUDirectAttributesAndFlush(t *testing.T) {
	tests := []struct {
		preset                 string
		supported, opts, order int
	}{
		{"h200-pcie", 1, FlushGPUDirectRDMAWritesOptionHost, GPUDirectRDMAWritesOrderingOwner},
		{"jetson-orin", 0, 0, GPUDirectRDMAWritesOrderingNone},
	}
	for _, tc := range tests {
		t.Run(tc.preset, func(t *testing.T) {
			r := newRig(t, tc.preset, rigOpt{})
			for attr, want := range map[DeviceAttribute]int{
				DeviceAttributeGPUDirectRDMASupported:          tc.supported,
				DeviceAttributeGPUDirectRDMAFlushWritesOptions: tc.opts,
				DeviceAttributeGPUDirectRDMAWritesOrdering:     tc.order,
			} {
				if got, err := r.d.DeviceGetAttribute(attr, 0); err != nil || got != want {
					t.Errorf("attribute %d = %d, %v; want %d", attr, got, err, want)
				}
			}
			if _, err := r.d.DeviceGetAttribute(DeviceAttributeGPUDirectRDMASupported, 9); !errors.Is(err, ErrorInvalidDevice) {
				t.Errorf("device 9: %v", err)
			}
			r.run(func(p *sim.Proc) {
				t0 := p.Now()
				err := r.ctx.FlushGPUDirectRDMAWrites(p, FlushGPUDirectRDMAWritesTargetCurrentCtx, FlushGPUDirectRDMAWritesToOwner)
				if tc.supported == 0 {
					if !errors.Is(err, ErrorNotSupported) {
						t.Errorf("flush on %s: %v, want NOT_SUPPORTED", tc.preset, err)
					}
					return
				}
				if err != nil || p.Now()-t0 != FlushGPUDirectRDMAWritesCost {
					t.Errorf("flush: %v after %v", err, p.Now()-t0)
				}
				if err := r.ctx.FlushGPUDirectRDMAWrites(p, 1, FlushGPUDirectRDMAWritesToOwner); !errors.Is(err, ErrorInvalidValue) {
					t.Errorf("target 1: %v", err)
				}
				if err := r.ctx.FlushGPUDirectRDMAWrites(p, 0, 7); !errors.Is(err, ErrorInvalidValue) {
					t.Errorf("scope 7: %v", err)
				}
			})
		})
	}
}
