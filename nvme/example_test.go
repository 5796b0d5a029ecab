package nvme_test

import (
	"fmt"
	"strings"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/nvme"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// A driver brings the controller up as nvme.ko does: it programs the
// admin queue (AQA, ASQ, ACQ), sets CC.EN, waits for CSTS.RDY, then
// submits Identify by writing a 64-byte entry into the queue and ringing
// the tail doorbell, and polls the completion queue for an entry whose
// phase tag is set.
func ExampleController() {
	spec, _ := platform.Preset("2s-4gpu-pcie")
	m, _ := machine.NewWithOptions(spec, 1, machine.Options{Payload: true})
	defer m.Close()
	x, _ := dma.New(m, m.Mem)
	c, _ := nvme.New(m, m.Mem, x, "nvme0", nvme.Options{Model: "example drive"})
	regs := c.BARs()[0].Regs
	node := c.Node()

	m.Engine.Spawn("driver", func(p *sim.Proc) {
		sqVA, sq, _ := c.DMA().AllocCoherent(p, 32*nvme.SQESize)
		cqVA, cq, _ := c.DMA().AllocCoherent(p, 32*nvme.CQESize)
		idVA, id, _ := c.DMA().AllocCoherent(p, nvme.IdentifyDataBytes)
		regs.WriteReg(p, nvme.RegAQA, 4, 31|31<<16)
		regs.WriteReg(p, nvme.RegASQ, 8, uint64(sq))
		regs.WriteReg(p, nvme.RegACQ, 8, uint64(cq))
		regs.WriteReg(p, nvme.RegCC, 4, nvme.CCEnable|nvme.CCIOSQES64|nvme.CCIOCQES16)
		for {
			if csts, _ := regs.ReadReg(p, nvme.RegCSTS, 4); csts&nvme.CSTSReady != 0 {
				break
			}
			p.Sleep(100 * sim.Microsecond)
		}
		fmt.Println("ready after", p.Now())

		b := make([]byte, nvme.SQESize)
		cmd := nvme.Command{Opcode: nvme.AdminIdentify, CID: 1, PRP1: uint64(id), CDW10: nvme.CNSController}
		cmd.Marshal(b)
		m.Mem.WriteBytes(p, node, sqVA, b)
		regs.WriteReg(p, nvme.DoorbellOffset(0, false, 0), 4, 1)
		e := make([]byte, nvme.CQESize)
		for !nvme.ParseCompletion(e).Phase {
			p.Sleep(sim.Microsecond)
			m.Mem.ReadBytes(p, node, cqVA, e)
		}
		regs.WriteReg(p, nvme.DoorbellOffset(0, true, 0), 4, 1)
		done := nvme.ParseCompletion(e)
		data := make([]byte, nvme.IdentifyDataBytes)
		m.Mem.ReadBytes(p, node, idVA, data)
		fmt.Println("CID", done.CID, done.Status)
		fmt.Printf("model %q, %d namespace, %d I/O queues\n", strings.TrimSpace(string(data[24:64])), data[516], c.Queues())
	})
	m.Engine.Run()
	// Output:
	// ready after 1.0071288ms
	// CID 1 Successful Completion (SCT 0 SC 0x00)
	// model "example drive", 1 namespace, 32 I/O queues
}
