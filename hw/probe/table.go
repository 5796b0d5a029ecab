package probe

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
)

// familyTitles describe each family's table.
var familyTitles = map[string]string{
	FamilyCE:           "copy engines: cuMemcpyAsync queued behind the spin kernel, CUDA events",
	FamilySM:           "SM copy kernel (zero-copy over mapped host memory), spin kernel, CUDA events",
	FamilySync:         "synchronous cuMemcpy, host clock",
	FamilyCallTime:     "synchronous small copies, time per call, host clock",
	FamilyCallOverhead: "one trivial driver call through the binding, host clock",
	FamilyHostMemcpy:   "one CPU thread, wall clock: memcpy (libc) and go_copy pageable to pinned; stream_out from a 2 MiB pinned ring",
	FamilyPin:          "cuMemHostRegister / cuMemHostUnregister of resident pageable memory, per call",
	FamilyLatency:      "one GPU thread chasing pointers (dependent loads), timed in the kernel",
	FamilyUnified:      "managed memory: first touch, prefetch, GPU faults, CPU fault-back, remote access",
	FamilyRegcache:     "regcache over cuMemHostRegister, per Get: miss, hit, merge, invalidate, Get after munmap+mmap",
}

// WriteTable writes the report for people: the machine, then per GPU its
// identity, capabilities and one table per measurement family.
func (r *Report) WriteTable(w io.Writer) error {
	var b strings.Builder
	m := r.Machine
	fmt.Fprintf(&b, "host %s: %s, %d CPUs, %d NUMA node(s), kernel %s\n", m.Hostname, m.CPU, m.CPUs, m.NUMANodes, m.Kernel)
	fmt.Fprintf(&b, "driver %s, CUDA %s, %d GPU(s)\n", m.DriverVersion, m.CUDAVersion, m.GPUCount)
	if io := m.IOMMU; io != nil {
		fmt.Fprintf(&b, "IOMMU %s", io.Mode)
		if len(io.Units) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(io.Units, ", "))
		}
		if io.DefaultDomain != "" {
			fmt.Fprintf(&b, ", default domain %s", io.DefaultDomain)
		}
		if len(io.Cmdline) > 0 {
			fmt.Fprintf(&b, ", command line %s", strings.Join(io.Cmdline, " "))
		}
		b.WriteString("\n")
	}
	if pm := m.PeerMemory; pm != nil {
		loaded := "none"
		if len(pm.Loaded) > 0 {
			loaded = strings.Join(pm.Loaded, ", ")
		}
		fmt.Fprintf(&b, "peer-memory modules: %s\n", loaded)
	}
	for _, g := range r.GPUs {
		writeGPU(&b, &g)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeGPU(b *strings.Builder, g *GPUReport) {
	d := g.Device
	fmt.Fprintf(b, "\nGPU %d: %s at %s, %d MiB (%d MiB free), compute %s, %d SMs\n",
		d.Ordinal, d.Name, d.PCIBusID, d.TotalMemory>>20, g.MemFreeBytes>>20, d.ComputeCapability, d.Multiprocessors)
	if d.PCIe != nil {
		fmt.Fprintf(b, "  PCIe gen %d x%d (max gen %d x%d)", d.PCIe.CurrentGen, d.PCIe.CurrentWidth, d.PCIe.MaxGen, d.PCIe.MaxWidth)
	}
	if d.BAR1 != nil {
		fmt.Fprintf(b, "  BAR1 %s, %s used", formatSize(int64(d.BAR1.TotalBytes)), formatSize(int64(d.BAR1.UsedBytes)))
	}
	if d.NVMLError != "" {
		fmt.Fprintf(b, "  (NVML: %s)", d.NVMLError)
	}
	b.WriteString("\n")
	if len(d.Attributes) > 0 {
		b.WriteString("  attributes:")
		for i, k := range slices.Sorted(maps.Keys(d.Attributes)) {
			if i%4 == 0 {
				b.WriteString("\n   ")
			}
			fmt.Fprintf(b, " %s=%d", k, d.Attributes[k])
		}
		b.WriteString("\n")
	}
	if c := g.Capabilities; c != nil {
		export := "yes"
		if !c.DMABufExport {
			export = "no: " + c.DMABufError
		}
		fmt.Fprintf(b, "  dma-buf export: %s; buffer id %d, after free and re-allocation %d (changes: %v)\n",
			export, c.BufferIDFirst, c.BufferIDReallocate, c.BufferIDChanges)
		if i := c.DMABufFDInfo; i != nil {
			fmt.Fprintf(b, "  dma-buf fdinfo: exp_name %s, size %d, count %d, flags %s, ino %d\n", i.ExpName, i.Size, i.Count, i.Flags, i.Ino)
		} else if c.DMABufFDInfoError != "" {
			fmt.Fprintf(b, "  dma-buf fdinfo: %s\n", c.DMABufFDInfoError)
		}
		if st := c.DMABufExportMicros; st != nil {
			fmt.Fprintf(b, "  dma-buf export: %.1f us median (min %.1f, max %.1f, %d samples)\n", st.Median, st.Min, st.Max, len(c.DMABufExportValues))
		}
		if gd := c.GPUDirect; gd != nil {
			fmt.Fprintf(b, "  gpudirect rdma: supported %v, with cuda vmm %v, flush options [%s], writes ordering %s\n",
				gd.RDMASupported, gd.RDMAWithVMM, strings.Join(gd.FlushWritesOptions, " "), gd.WritesOrdering)
		}
	}
	for _, fam := range slices.Concat(Families, OptInFamilies) {
		ms := g.Find(fam, "", "")
		if len(ms) == 0 {
			continue
		}
		fmt.Fprintf(b, "\n  %s: %s\n", fam, familyTitles[fam])
		tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "\tpath\tdir/op\tsize\tstride\tmedian\tmin\tmax\tunit\treps\tsamples\tverified\t")
		for _, m := range ms {
			op := m.Direction
			if m.Operation != "" {
				op = strings.TrimPrefix(op+" "+m.Operation, " ")
			}
			if m.PeerGPU != nil {
				op += fmt.Sprintf(" gpu%d", *m.PeerGPU)
			}
			verified := "no"
			if m.Verified {
				verified = "yes"
			}
			stride := ""
			if m.StrideBytes > 0 {
				stride = formatSize(m.StrideBytes)
			}
			fmt.Fprintf(tw, "\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t", m.Path, op, formatSize(m.SizeBytes), stride,
				num(m.Median), num(m.Min), num(m.Max), m.Unit, m.Repetitions, m.Samples, verified)
			for _, k := range slices.Sorted(maps.Keys(m.PerDirection)) {
				fmt.Fprintf(tw, " %s %s", k, num(m.PerDirection[k].Median))
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
		for _, m := range ms {
			writeBlocks(b, &m)
			writeRegcache(b, &m)
		}
	}
	for _, e := range g.Errors {
		fmt.Fprintf(b, "  error: %s\n", e)
	}
}

// num prints a value with 4 significant digits, or more integer digits.
func num(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.0f", v)
	case v >= 100:
		return fmt.Sprintf("%.1f", v)
	case v >= 10:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3f", v)
}

// writeBlocks prints, for a fault-latency measurement, which touches of the
// first 2 MiB blocks were slow.
func writeBlocks(b *strings.Builder, m *Measurement) {
	if len(m.Blocks) == 0 {
		return
	}
	fmt.Fprintf(b, "    slow touches per 2MiB block, %s stride (index within block):", formatSize(m.StrideBytes))
	for i, blk := range m.Blocks {
		if i == 4 {
			fmt.Fprintf(b, " ... (%d blocks)", len(m.Blocks))
			break
		}
		if len(blk.SlowTouches) > 12 {
			fmt.Fprintf(b, " [%d: %v ... %d slow]", blk.Block, blk.SlowTouches[:12], len(blk.SlowTouches))
			continue
		}
		fmt.Fprintf(b, " [%d: %v]", blk.Block, blk.SlowTouches)
	}
	b.WriteString("\n")
}

// writeRegcache prints what the regcache family's invalidation path found.
func writeRegcache(b *strings.Builder, m *Measurement) {
	r := m.Regcache
	if r == nil {
		return
	}
	fmt.Fprintf(b, "    %s after munmap+mmap: same address %v, registered again %v; cache: %d hits, %d misses, %d pins, %d unpins, %d invalidations\n",
		formatSize(m.SizeBytes), r.SameAddress, r.Reregistered, r.Hits, r.Misses, r.Pins, r.Unpins, r.Invalidations)
}
