package v4l2_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/dmalab/dmalab"
	"github.com/dmalab/dmalab/v4l2"
)

// stream boots jetson-orin, captures frames 1080p RAW10 at 30 fps into
// three MMAP buffers and returns what DQBUF gave.
func stream(frames int) ([]v4l2.Buffer, v4l2.Format, error) {
	sys, err := dmalab.Boot("jetson-orin", dmalab.Options{})
	if err != nil {
		return nil, v4l2.Format{}, err
	}
	defer sys.Close()
	cam, err := sys.V4L2().NewCapture(v4l2.CaptureConfig{Device: "vi0", FrameRate: 30})
	if err != nil {
		return nil, v4l2.Format{}, err
	}
	var got []v4l2.Buffer
	var f v4l2.Format
	err = sys.Run("camera-app", func(p *dmalab.Process) error {
		t, proc := p.Thread, p.Process
		fd, err := cam.Open(t, proc)
		if err != nil {
			return err
		}
		if f, err = cam.GFmt(proc, fd, v4l2.BufTypeVideoCapture); err != nil {
			return err
		}
		if _, err := cam.ReqBufs(t, proc, fd, v4l2.RequestBuffers{Count: 3, Type: v4l2.BufTypeVideoCapture, Memory: v4l2.MemoryMMAP}); err != nil {
			return err
		}
		for i := range uint32(3) {
			if _, err := cam.QBuf(t, proc, fd, v4l2.Buffer{Index: i, Type: v4l2.BufTypeVideoCapture, Memory: v4l2.MemoryMMAP}); err != nil {
				return err
			}
		}
		if err := cam.StreamOn(t, proc, fd, v4l2.BufTypeVideoCapture); err != nil {
			return err
		}
		for range frames {
			b, err := cam.DQBuf(t, proc, fd, v4l2.BufTypeVideoCapture)
			if err != nil {
				return err
			}
			got = append(got, b)
			if _, err := cam.QBuf(t, proc, fd, v4l2.Buffer{Index: b.Index, Type: v4l2.BufTypeVideoCapture, Memory: v4l2.MemoryMMAP}); err != nil {
				return err
			}
		}
		return cam.StreamOff(t, proc, fd, v4l2.BufTypeVideoCapture)
	})
	return got, f, err
}

// A program captures 1080p RAW10 at 30 fps from Jetson Orin's VI into
// MMAP buffers; each frame is read out over a period and written by
// DMA as its lines arrive, so it lands just after its readout ends.
func Example() {
	frames, f, err := stream(3)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(f)
	for _, b := range frames {
		tm := b.Times
		fmt.Printf("frame %d in buffer %d: readout %v..%v, written %v\n", b.Sequence, b.Index, tm.ReadoutStart, tm.ReadoutEnd, tm.Written)
	}
	// Output:
	// 1920x1080 pRAA (bytesperline 2432, sizeimage 2626560)
	// frame 0 in buffer 0: readout 0s..33.333333333ms, written 33.334729333ms
	// frame 1 in buffer 1: readout 33.333333333ms..66.666666666ms, written 66.668062666ms
	// frame 2 in buffer 2: readout 66.666666666ms..99.999999999ms, written 100.001395999ms
}

// TestDeterministic: two runs give the same frames at the same times.
func TestDeterministic(t *testing.T) {
	a, _, err := stream(4)
	if err != nil {
		t.Fatal(err)
	}
	b, _, _ := stream(4)
	if len(a) != 4 || !reflect.DeepEqual(a, b) {
		t.Errorf("runs differ:\n%+v\n%+v", a, b)
	}
}
