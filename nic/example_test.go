package nic_test

import (
	"fmt"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/nic"
	"github.com/dmalab/dmalab/platform"
)

// Receive 10,000 packets of 9000 bytes on a ConnectX-7 class NIC of a
// two-socket server, the driver reading each packet whole, then only its
// first 128 bytes as a stack parsing headers does: reading at one core's
// memcpy rate (10 GB/s) caps the first far below the 400 Gb/s line, and
// packets queue in the ring and the NIC's buffer (lossless link: the
// wire waits).
func ExampleRun() {
	for _, touch := range []uint64{0, 128} {
		spec, _ := platform.Preset("2s-4gpu-pcie")
		m, _ := machine.New(spec, 1)
		memory := m.Mem
		d, _ := dma.New(m, memory)
		r, err := nic.Run(m, memory, d, nic.Options{Device: "nic0", Dir: nic.Rx, PacketSize: 9000, Packets: 10000, Touch: touch})
		m.Close()
		if err != nil {
			fmt.Println(err)
			return
		}
		rx := r.Rx
		fmt.Printf("touch %d: %.2f GB/s, latency p50 %v p99 %v, %v CPU per packet, %d interrupts\n",
			touch, rx.Throughput/1e9, rx.P50, rx.P99, rx.CPUPerPacket, rx.Interrupts)
	}
	// Output:
	// touch 0: 9.75 GB/s, latency p50 119.472127us p99 215.613439us, 909.146ns CPU per packet, 79 interrupts
	// touch 128: 49.98 GB/s, latency p50 1.969151us p99 2.983935us, 72.093ns CPU per packet, 789 interrupts
}
