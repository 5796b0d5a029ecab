package scenario

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"

	"github.com/dmalab/dmalab"
	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/nvp2p/peermem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/rdma"
	"github.com/dmalab/dmalab/report"
)

func init() {
	register(&Scenario{
		Name:     "gpudirect",
		Summary:  "a NIC writing into GPU memory by RDMA (GPUDirect) against the bounce through pinned host memory, per placement of NIC and GPU",
		Platform: gdDefaultPlatforms[0],
		Doc: `Host B's RDMA NIC sends one message per size to host A, where it must end
in GPU memory. Two paths:

  gpudirect  the message is an RDMA WRITE straight into cuMemAlloc memory
             that host A registered with ibv_reg_mr through nvidia-peermem
             (nvidia_p2p pins it in BAR1): the NIC writes the GPU's BAR1
             peer to peer;
  bounce     the RDMA WRITE lands in pinned host memory (cuMemAllocHost,
             registered with ibv_reg_mr), then cuMemcpyHtoD copies it
             into the GPU.

Per placement of the NIC and the GPU (the machine's PeerPath, as the
GPUDirect RDMA guide's "Supported Systems" classifies it): same-switch
(both below one PCIe switch: the traffic never reaches the root
complex), through-root-complex (below one root complex, no common
switch: capped at the root complex's p2p_efficiency; only where the
platform has such a pair, as dgx-h100 does) and cross-socket (nvidia_p2p
refuses the mapping, ENOTSUPP: the row says so, the bounce row beside it
still runs).

Host B is a second instance of the platform on the same engine, the two
NICs joined by a direct-attach cable (rdma.Connect). The NIC is the
platform's fastest; pinned host memory lies on the NIC's node.

Per row: the time of one message (post to the data in GPU memory:
for bounce, the write's completion then the copy), GB/s over it, CPU
time of the threads on the way (the post, the copy call), and the
bytes each link of host A carried (the GPU's PCIe link, its switch's
uplink, the root complexes, the socket link, DRAM): "bytes per link"
under the table, "links" in JSON. The first lines say where GPUDirect
wins and by how much, and what to try next.`,
		Params: []Param{
			{Name: "sizes", Kind: dmalab.ParamSizes, Default: "4KiB,64KiB,1MiB,16MiB,256MiB,1GiB", Help: "message sizes, comma-separated, with units (B, KiB, MiB, GiB)"},
			{Name: "platforms", Default: "", Help: "comma-separated platforms (default: 2s-4gpu-pcie and dgx-h100 when the run's platform is 2s-4gpu-pcie, else the run's)"},
			{Name: "placements", Kind: dmalab.ParamList, Values: gdPlacements, Item: "placement", Default: strings.Join(gdPlacements, ","), Help: "where the GPU sits from the NIC, in order (a placement the platform lacks is skipped)"},
		},
		Run: runGPUDirect,
	})
}

var (
	gdDefaultPlatforms = []string{"2s-4gpu-pcie", "dgx-h100"}
	gdPlacements       = []string{"same-switch", "through-root-complex", "cross-socket"}
	gdKinds            = map[string]machine.PeerKind{
		"same-switch":          machine.PeerSwitch,
		"through-root-complex": machine.PeerRootComplex,
		"cross-socket":         machine.PeerCrossSocket,
	}
)

// gdENOTSUPP is the kernel's ENOTSUPP (524, include/linux/errno.h),
// what nvidia_p2p_dma_map_pages returns for a peer across sockets.
const gdENOTSUPP = syscall.Errno(524)

// gdMaxSize bounds a message: both hosts pin it (RLIMIT_MEMLOCK is
// raised to it, as RDMA deployments set "ulimit -l unlimited").
const gdMaxSize = 16 << 30

func runGPUDirect(c *Context) error {
	sizes := c.Sizes("sizes")
	for _, n := range sizes {
		if n <= 0 || n > gdMaxSize {
			return usagef("--set sizes: %s: a message is 1 B to %s", report.FormatBytes(n), report.FormatBytes(gdMaxSize))
		}
	}
	specs, err := platformsParam(c, gdDefaultPlatforms)
	if err != nil {
		return err
	}
	opt := c.Options()
	opt.Progress, opt.Trace = nil, false
	// Each platform's system draws into the run's trace.
	opt.TraceInto = c.Trace
	var missing []string
	for _, spec := range specs {
		rows, miss, err := gdPlatform(c, spec, opt, sizes, c.List("placements"))
		if err != nil {
			return err
		}
		c.Result.Results = append(c.Result.Results, rows...)
		missing = append(missing, miss...)
	}
	c.Result.Summary = gdSummary(c.Result.Results, missing)
	return nil
}

// gdNIC is the platform's fastest NIC (first of equals), the one that
// speaks RDMA here.
func gdNIC(spec *platform.Spec) string {
	best, rate := "", 0.0
	for _, d := range spec.Devices {
		if d.Kind == platform.DeviceNIC && float64(d.LineRate.V) > rate {
			best, rate = d.Name, float64(d.LineRate.V)
		}
	}
	return best
}

// gdPlace is a placement the platform has: the first discrete GPU at
// that peer path from the NIC.
type gdPlace struct {
	name string
	gpu  int
	path machine.PeerPath
}

func gdPlaces(m *machine.Machine, nic string, want []string) ([]gdPlace, error) {
	var side machine.Endpoint
	for _, d := range m.Devices {
		if d.Name == nic {
			side = d.Side()
		}
	}
	var out []gdPlace
	for _, w := range want {
		for i, g := range m.GPUs {
			if g.Spec.Integrated {
				continue
			}
			pp, err := m.PeerPath(side, g.Memory())
			if err != nil {
				return nil, err
			}
			if pp.Kind == gdKinds[w] {
				out = append(out, gdPlace{name: w, gpu: i, path: pp})
				break
			}
		}
	}
	return out, nil
}

// gdLinks snapshots the bytes of every link of a machine, both
// directions.
func gdLinks(m *machine.Machine) []float64 {
	ls := m.Fabric.Links()
	out := make([]float64, len(ls))
	for i, l := range ls {
		st := l.Stats()
		for _, b := range st.Bytes {
			out[i] += b
		}
	}
	return out
}

// gdPlatform runs every placement the platform has on two instances of
// it; it returns the rows and a sentence per placement it lacks.
func gdPlatform(c *Context, spec *platform.Spec, opt dmalab.Options, sizes []int64, want []string) ([]report.Row, []string, error) {
	nic := gdNIC(spec)
	if nic == "" {
		return nil, nil, usagef("platform %s has no NIC: gpudirect needs one", spec.Name)
	}
	opt.TraceName = spec.Name + " host a"
	a, err := dmalab.BootSpec(spec, opt)
	if err != nil {
		return nil, nil, err
	}
	defer a.Close()
	bopt := opt
	bopt.Engine = a.Engine
	bopt.TraceName = spec.Name + " host b"
	b, err := dmalab.BootSpec(spec, bopt)
	if err != nil {
		return nil, nil, err
	}
	defer b.Close()
	places, err := gdPlaces(a.Machine, nic, want)
	if err != nil {
		return nil, nil, err
	}
	if len(places) == 0 {
		return nil, nil, usagef("platform %s has no discrete GPU at a placement of %s from %s", spec.Name, strings.Join(want, ", "), nic)
	}
	env := func(s *dmalab.System) rdma.Env {
		return rdma.Env{Machine: s.Machine, Mem: s.Mem, DMA: s.DMA, Kernel: s.Kernel}
	}
	ha, err := rdma.Open(env(a), nic, rdma.Params{})
	if err != nil {
		return nil, nil, err
	}
	hb, err := rdma.Open(env(b), nic, rdma.Params{})
	if err != nil {
		return nil, nil, err
	}
	if _, err := rdma.Connect(ha, hb, rdma.DefaultCable); err != nil {
		return nil, nil, err
	}
	p2p, err := a.NVP2P()
	if err != nil {
		return nil, nil, usagef("platform %s: %v", spec.Name, err)
	}
	peermem.New(p2p, nil).Register(ha)
	cu, err := a.CUDA()
	if err != nil {
		return nil, nil, usagef("platform %s: %v", spec.Name, err)
	}
	maxN := uint64(slices.Max(sizes))
	pinned := (maxN + mem.PageSize - 1) &^ (mem.PageSize - 1)
	devAlloc := (maxN + 2<<20 - 1) &^ (2<<20 - 1)
	var rows []report.Row
	links := a.Machine.Fabric.Links()
	err = a.Run("gpudirect", func(p *dmalab.Process) error {
		t := p.Thread
		pb, err := b.Kernel.NewProcess("sender", p.Process.Node())
		if err != nil {
			return err
		}
		for _, pr := range []*kernel.Process{p.Process, pb} {
			if err := pr.SetMemlockLimit(2 * pinned); err != nil {
				return err
			}
		}
		pr, err := cu.Attach(p.Process)
		if err != nil {
			return err
		}
		// The sender's message, registered once.
		bufB, err := b.Mem.Vmalloc(pb.Node(), pinned)
		if err != nil {
			return err
		}
		if err := pb.MM.Map(kernel.VMA{Start: bufB, Size: pinned, Name: "anon"}); err != nil {
			return err
		}
		pdA, _ := ha.AllocPD(p.Process)
		pdB, _ := hb.AllocPD(pb)
		mrB, err := pdB.RegMR(t, uint64(bufB), maxN, 0)
		if err != nil {
			return err
		}
		// The bounce buffer: pinned by CUDA on the NIC's node, in the
		// process's address space, registered for the NIC.
		ctx0, err := pr.PrimaryContext(places[0].gpu)
		if err != nil {
			return err
		}
		hbuf, err := ctx0.MemAllocHost(t, maxN)
		if err != nil {
			return err
		}
		if err := p.Process.MM.Map(kernel.VMA{Start: hbuf, Size: pinned, Name: "cuMemAllocHost"}); err != nil {
			return err
		}
		access := rdma.AccessLocalWrite | rdma.AccessRemoteWrite
		mrH, err := pdA.RegMR(t, uint64(hbuf), maxN, access)
		if err != nil {
			return err
		}
		cqA, _ := ha.CreateCQ(t, 4)
		cqB, _ := hb.CreateCQ(t, 4)
		ia := rdma.QPInitAttr{SendCQ: cqA, RecvCQ: cqA, Type: rdma.QPTypeRC, Cap: rdma.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}
		qa, err := pdA.CreateQP(t, ia)
		if err != nil {
			return err
		}
		ia.SendCQ, ia.RecvCQ = cqB, cqB
		qb, err := pdB.CreateQP(t, ia)
		if err != nil {
			return err
		}
		for _, q := range []struct {
			qp   *rdma.QP
			dest uint32
		}{{qa, qb.Num}, {qb, qa.Num}} {
			err := errors.Join(
				q.qp.Modify(rdma.QPAttr{State: rdma.QPSInit, PortNum: 1, AccessFlags: rdma.AccessRemoteWrite},
					rdma.AttrState|rdma.AttrPKeyIndex|rdma.AttrPort|rdma.AttrAccessFlags),
				q.qp.Modify(rdma.QPAttr{State: rdma.QPSRTR, PathMTU: rdma.MTU4096, DestQPN: q.dest},
					rdma.AttrState|rdma.AttrAV|rdma.AttrPathMTU|rdma.AttrDestQPN|rdma.AttrRQPSN|rdma.AttrMaxDestRdAtomic|rdma.AttrMinRNRTimer),
				q.qp.Modify(rdma.QPAttr{State: rdma.QPSRTS, Timeout: 14, RetryCnt: 7},
					rdma.AttrState|rdma.AttrSQPSN|rdma.AttrMaxQPRdAtomic|rdma.AttrRetryCnt|rdma.AttrRNRRetry|rdma.AttrTimeout))
			if err != nil {
				return err
			}
		}
		var wrid uint64
		// write is one RDMA WRITE of n bytes to remote address to
		// under rkey, waited for at the sender.
		write := func(to uint64, rkey uint32, n uint64) error {
			wrid++
			if err := qb.PostSend(t, rdma.SendWR{WRID: wrid, Opcode: rdma.WRRDMAWrite, Signaled: true,
				SGList: []rdma.SGE{{Addr: uint64(bufB), Length: n, LKey: mrB.LKey}}, RemoteAddr: to, RKey: rkey}); err != nil {
				return err
			}
			if wc := cqB.Wait(t, 0, 1)[0]; wc.Status != rdma.WCSuccess {
				return fmt.Errorf("RDMA WRITE of %s: %v (%s)", report.FormatBytes(int64(n)), wc.Status, wc.Detail)
			}
			return nil
		}
		for _, pl := range places {
			ctx, err := pr.PrimaryContext(pl.gpu)
			if err != nil {
				return err
			}
			gname := a.Machine.GPUs[pl.gpu].Name
			gbuf, err := ctx.MemAlloc(t, devAlloc)
			if err != nil {
				return err
			}
			mrG, regErr := pdA.RegMR(t, uint64(gbuf), maxN, access)
			for _, n := range sizes {
				for _, path := range []string{"gpudirect", "bounce"} {
					row := report.Row{Name: spec.Name + " " + path + " " + pl.name, Path: path, Direction: pl.name,
						Mode: nic + "→" + gname, Bytes: n, Platform: spec.Name}
					if path == "gpudirect" && regErr != nil {
						why := "refused"
						if errors.Is(regErr, gdENOTSUPP) {
							why = "refused with ENOTSUPP"
						}
						row.Note = fmt.Sprintf("%s: %s (%v); the bounce row beside it runs", spec.Name, why, regErr)
						rows = append(rows, row)
						continue
					}
					before, cpu0, t0 := gdLinks(a.Machine), t.CPUTime(), t.Now()
					if path == "gpudirect" {
						err = write(uint64(gbuf), mrG.RKey, uint64(n))
					} else if err = write(uint64(hbuf), mrH.RKey, uint64(n)); err == nil {
						err = ctx.Memcpy(t, gbuf, mem.GPUAddr(hbuf), uint64(n))
					}
					if err != nil {
						return err
					}
					row.Seconds = (t.Now() - t0).Seconds()
					row.GBps = float64(n) / row.Seconds / 1e9
					row.CPUSeconds = (t.CPUTime() - cpu0).Seconds()
					row.Links = gdRowLinks(a, links, before, pl, nic)
					if path == "gpudirect" && n == sizes[0] {
						row.Note = fmt.Sprintf("%s: %s → %s turns at %s (%s)", spec.Name, nic, gname, pl.path.At, pl.path.Kind)
					}
					rows = append(rows, row)
				}
			}
			if regErr == nil {
				if err := mrG.Dereg(t); err != nil {
					return err
				}
			}
			if err := ctx.MemFree(t, gbuf); err != nil {
				return err
			}
		}
		if err := errors.Join(mrH.Dereg(t), mrB.Dereg(t)); err != nil {
			return err
		}
		return ctx0.MemFreeHost(t, hbuf)
	})
	forward(c, a, spec.Name+" host A")
	forward(c, b, spec.Name+" host B")
	if err != nil {
		return nil, nil, fmt.Errorf("gpudirect: %s: %w", spec.Name, err)
	}
	var missing []string
	for _, w := range want {
		if !slices.ContainsFunc(places, func(p gdPlace) bool { return p.name == w }) {
			missing = append(missing, fmt.Sprintf("%s %s: no discrete GPU at that place from %s; skipped", spec.Name, w, nic))
		}
	}
	return rows, missing, nil
}

// gdRowLinks are the bytes the row moved over host A's links that
// matter: the GPU's PCIe link, its switch's uplink, the root complexes
// and the socket links always (zero says the traffic stayed off them),
// and every other link that carried bytes, in the fabric's order.
func gdRowLinks(a *dmalab.System, links []*fabric.Link, before []float64, pl gdPlace, nic string) []report.LinkBytes {
	after := gdLinks(a.Machine)
	key := map[string]bool{a.Machine.GPUs[pl.gpu].Name + ".pcie": true}
	gs := a.Machine.GPUs[pl.gpu].Spec
	if sw := gs.Parent; sw != "" {
		for _, s := range a.Spec.Switches {
			if s.Name == sw {
				key[sw+".pcie"] = true
			}
		}
	}
	for _, rc := range a.Spec.RootComplexes {
		key[rc.Name] = true
	}
	for _, sl := range a.Spec.SocketLinks {
		key[sl.Name] = true
	}
	var out []report.LinkBytes
	for i, l := range links {
		d := int64(after[i] - before[i])
		if d != 0 || key[l.Name()] {
			out = append(out, report.LinkBytes{Link: l.Name(), Bytes: d})
		}
	}
	return out
}

// gdSummary says per platform where GPUDirect wins and by how much,
// what the refused placements fall back to, and what to try next.
func gdSummary(rows []report.Row, missing []string) []string {
	type key struct{ plat, place string }
	by := map[key]map[string][]report.Row{}
	var order []key
	for _, r := range rows {
		k := key{r.Platform, r.Direction}
		if by[k] == nil {
			by[k] = map[string][]report.Row{}
			order = append(order, k)
		}
		by[k][r.Path] = append(by[k][r.Path], r)
	}
	var out []string
	for _, k := range order {
		g, bn := by[k]["gpudirect"], by[k]["bounce"]
		if len(g) == 0 || len(g) != len(bn) {
			continue
		}
		if g[0].Seconds == 0 {
			last := bn[len(bn)-1]
			why := "refused"
			if strings.Contains(g[0].Note, "ENOTSUPP") {
				why = "refused (ENOTSUPP)"
			}
			out = append(out, fmt.Sprintf("%s %s (%s): GPUDirect %s; the bounce path delivers %s GB/s at %s",
				k.plat, k.place, g[0].Mode, why, report.FormatGBps(last.GBps), report.FormatBytes(last.Bytes)))
			continue
		}
		small, large := 0, len(g)-1
		if small == large {
			out = append(out, fmt.Sprintf("%s %s (%s): GPUDirect %.2f× faster at %s (%s vs %s)",
				k.plat, k.place, g[0].Mode, bn[0].Seconds/g[0].Seconds, report.FormatBytes(g[0].Bytes), report.FormatSeconds(g[0].Seconds), report.FormatSeconds(bn[0].Seconds)))
			continue
		}
		out = append(out, fmt.Sprintf("%s %s (%s): GPUDirect %.2f× faster at %s (%s vs %s), %.2f× at %s (%s vs %s GB/s)",
			k.plat, k.place, g[0].Mode,
			bn[small].Seconds/g[small].Seconds, report.FormatBytes(g[small].Bytes), report.FormatSeconds(g[small].Seconds), report.FormatSeconds(bn[small].Seconds),
			bn[large].Seconds/g[large].Seconds, report.FormatBytes(g[large].Bytes), report.FormatGBps(g[large].GBps), report.FormatGBps(bn[large].GBps)))
	}
	out = append(out, missing...)
	out = append(out, "next: put the NIC and the GPU below one PCIe switch (nvidia-smi topo -m: PIX or PXB); the bounce rows copy after the whole message has landed: a chunked, double-buffered bounce would overlap the two; set a measured platform.root_complexes.<rc>.p2p_efficiency with --set; run dmalab check gpudirect")
	return out
}
