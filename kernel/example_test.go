package kernel_test

import (
	"fmt"

	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/sim"
)

// buffer is a file a driver exports (a dma-buf, say): it says when the
// kernel releases it.
type buffer struct{ name string }

func (b *buffer) FileName() string { return b.name }
func (b *buffer) Release(t *sim.Proc) error {
	fmt.Printf("%v: %s released by %s\n", t.Now(), b.name, t.Name())
	return nil
}

// A descriptor passed to another process (SCM_RIGHTS) keeps the file open
// past its sender's exit; the receiver's close releases it.
func Example() {
	eng := sim.New(1)
	k := kernel.New(eng, 1)
	camera, _ := k.NewProcess("camera", 0)
	display, _ := k.NewProcess("display", 0)
	camera.OnExit("driver", func(*sim.Proc) error {
		fmt.Println("camera's driver state reclaimed")
		return nil
	})

	camera.Spawn("", func(t *sim.Proc) {
		fd, _ := camera.Install(&buffer{name: "dmabuf:1"})
		dfd, _ := camera.SendFD(display, fd)
		fmt.Printf("camera fd %d, display fd %d, %d references\n", fd, dfd, camera.Refs(fd))
		camera.Exit(t)
	})
	display.Spawn("", func(t *sim.Proc) {
		t.Sleep(sim.Microsecond)
		fmt.Println("display holds", display.FDs())
		display.Close(t, 3)
	})
	eng.Run()
	// Output:
	// camera fd 3, display fd 3, 2 references
	// camera's driver state reclaimed
	// display holds [3]
	// 1us: dmabuf:1 released by display
}
