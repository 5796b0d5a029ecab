package dmalab

import (
	"fmt"
	"syscall"

	"github.com/dmalab/dmalab/drm"
)

// Display is the display controller on the platform's device named
// device (a display engine, or any DMA master standing for one), made
// at the first call with cfg and the same device thereafter (EEXIST
// for another mode). It reads through the device's view in the DMA
// layer, behind its IOMMU domain when it has one, and imports the
// system's dma-bufs; HookAll subscribers made after this call hear
// its events. The CRTC turns off when the last process with the
// device open exits.
func (s *System) Display(device string, cfg drm.Config) (*drm.Device, error) {
	for _, d := range s.displays {
		if d.Name() == device {
			if d.Mode() != cfg.Mode {
				return nil, fmt.Errorf("display %s: already set up for %s, not %s: %w", device, d.Mode().Name, cfg.Mode.Name, syscall.EEXIST)
			}
			return d, nil
		}
	}
	d, err := drm.New(s.Machine, s.DMA, s.bufs, device, cfg)
	if err != nil {
		return nil, err
	}
	s.displays = append(s.displays, d)
	return d, nil
}
