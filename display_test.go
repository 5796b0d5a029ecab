package dmalab

import (
	"errors"
	"syscall"
	"testing"

	"github.com/dmalab/dmalab/drm"
	"github.com/dmalab/dmalab/sim"
)

// TestSystemDisplay: the system makes one display controller per
// device; HookAll hears its flips; a program that flips and exits
// without turning the CRTC off still ends its run (the last close of
// the device turns it off), and the checker finds nothing wrong.
func TestSystemDisplay(t *testing.T) {
	sys, err := Boot("zynq-7000", Options{Check: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	mode, err := drm.CVTRB(1280, 720, 60)
	if err != nil {
		t.Fatal(err)
	}
	d, err := sys.Display("axidma0", drm.Config{Mode: mode})
	if err != nil {
		t.Fatal(err)
	}
	if again, err := sys.Display("axidma0", drm.Config{Mode: mode}); err != nil || again != d {
		t.Fatalf("second Display: %v, %v", again, err)
	}
	other, _ := drm.CVTRB(640, 480, 60)
	if _, err := sys.Display("axidma0", drm.Config{Mode: other}); !errors.Is(err, syscall.EEXIST) {
		t.Fatalf("another mode: %v", err)
	}
	if _, err := sys.Display("nosuch", drm.Config{Mode: mode}); !errors.Is(err, syscall.ENODEV) {
		t.Fatalf("no such device: %v", err)
	}
	flips := 0
	sys.HookAll(func(e sim.Event) {
		if x, ok := e.(*drm.Event); ok && x.Op == drm.OpFlip {
			flips++
		}
	})
	err = sys.Run("compositor", func(p *Process) error {
		f := d.Open(p.Process)
		heap, err := sys.DMABuf().Heap("reserved")
		if err != nil {
			return err
		}
		fd, err := heap.Allocate(p.Thread, p.Process, 1280*720*4, 0)
		if err != nil {
			return err
		}
		h, err := f.PrimeFDToHandle(p.Thread, fd)
		if err != nil {
			return err
		}
		fb, err := f.AddFB2(p.Thread, drm.FBCmd{Width: 1280, Height: 720, Format: drm.FormatXRGB8888, Handles: [4]uint32{h}, Pitches: [4]uint32{1280 * 4}})
		if err != nil {
			return err
		}
		if err := d.Enable(p.Thread); err != nil {
			return err
		}
		if _, err := f.AtomicCommit(p.Thread, drm.Commit{FB: fb, InFenceFD: -1, Event: true}); err != nil {
			return err
		}
		f.ReadEvent(p.Thread)
		p.Thread.Sleep(3 * mode.Period())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if flips != 1 || d.Stats().Scans < 3 {
		t.Fatalf("%d flips heard, stats %+v", flips, d.Stats())
	}
	if diags := sys.Diagnostics(); len(diags) != 0 {
		t.Fatalf("diagnostics: %v", diags)
	}
}
