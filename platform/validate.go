package platform

import (
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dmalab/dmalab/sim"
)

// archs are the GPU generations the model knows. Unified-memory rules
// (pre-Pascal migration at launch, Pascal+ demand paging) key on them;
// an integrated Tegra GPU (TX2: pascal, Xavier: volta, Orin: ampere)
// names its generation too and says integrated.
var archs = []string{"kepler", "maxwell", "pascal", "volta", "turing", "ampere", "ada", "hopper", "blackwell"}

// Archs returns the GPU architectures a GPU's Arch may name, oldest first.
func Archs() []string { return slices.Clone(archs) }

// Device kinds.
const (
	DeviceNIC  = "nic"
	DeviceNVMe = "nvme"
	// DeviceDMA is a generic DMA engine (Xilinx AXI DMA, a PL330): it
	// moves data between memory and a stream or another memory.
	DeviceDMA = "dma"
	// DeviceCamera is a capture device that writes frames into memory:
	// an SoC's CSI receiver and video input unit (Tegra's NVCSI and VI),
	// or a PCIe capture card. Its line_rate is its input link (the CSI
	// lanes, the card's SDI or HDMI inputs), which bounds how fast a
	// frame's bytes can arrive.
	DeviceCamera = "camera"
	// DeviceISP is an image signal processor: a memory-to-memory device
	// that reads raw sensor frames and writes processed ones, at its
	// pixel_rate.
	DeviceISP = "isp"
	// DeviceDisplay is a display controller that scans framebuffers out
	// of memory, at most pixel_rate pixels a second.
	DeviceDisplay = "display"
)

var deviceKinds = []string{DeviceNIC, DeviceNVMe, DeviceDMA, DeviceCamera, DeviceISP, DeviceDisplay}

// pixelKinds are the device kinds that have a pixel_rate.
var pixelKinds = []string{DeviceISP, DeviceDisplay}

// pcieWidths are the lane counts PCIe defines.
var pcieWidths = []int{1, 2, 4, 8, 16, 32}

// componentName is what a component's name may be: short enough to type
// in --set paths, never only digits (those address list elements by
// index), no spaces or '=' (the CLI splits --set at '=').
var componentName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.:-]*$`)

// Validate checks that s describes a machine the model can build: names
// unique and well formed, every reference resolving, the PCIe tree a
// tree, every parameter in range. Errors name the spec (s.Name) as their
// file; Parse runs the same checks with line numbers.
func (s *Spec) Validate() error {
	file := s.Name
	if file == "" {
		file = "spec"
	}
	errs := &errorList{file: file}
	validate(s, errs, nil)
	return errs.err()
}

// validator checks one Spec. lines, when not nil, maps field paths present
// in the YAML document to their lines.
type validator struct {
	s     *Spec
	errs  *errorList
	lines map[string]int
	kinds map[string]Kind   // component name → kind
	where map[string]string // component name → path of its name field
}

func validate(s *Spec, errs *errorList, lines map[string]int) {
	v := &validator{s: s, errs: errs, lines: lines, kinds: map[string]Kind{}, where: map[string]string{}}
	v.bounds()
	v.strings(reflect.ValueOf(s).Elem(), "")
	if s.Name == "" {
		v.add("name", "missing: every platform has a name")
	} else if strings.IndexFunc(s.Name, unicode.IsControl) >= 0 || len(s.Name) > 256 {
		v.add("name", "bad name %q: one line of at most 256 bytes", s.Name)
	}
	v.names()
	v.nodes()
	v.distances()
	for i, l := range s.SocketLinks {
		p := fmt.Sprintf("socket_links[%d]", i)
		v.node(p+".a", l.A)
		v.node(p+".b", l.B)
		if l.A == l.B {
			v.add(p+".b", "links node %d to itself", l.A)
		}
		v.socketLinkRate(p, l)
		nonNegative(v, p+".latency", l.Latency)
	}
	for i, rc := range s.RootComplexes {
		p := fmt.Sprintf("root_complexes[%d]", i)
		v.node(p+".node", rc.Node)
		nonNegative(v, p+".bandwidth", rc.Bandwidth)
		nonNegative(v, p+".latency", rc.Latency)
		if rc.P2PEfficiency != (Param[float64]{}) {
			v.share(p+".p2p_efficiency", rc.P2PEfficiency)
		}
	}
	for i, sw := range s.Switches {
		p := fmt.Sprintf("switches[%d]", i)
		v.parent(p+".parent", sw.Parent)
		v.link(p+".link", sw.Link)
		nonNegative(v, p+".latency", sw.Latency)
	}
	v.cycles()
	for i, g := range s.GPUs {
		v.gpu(fmt.Sprintf("gpus[%d]", i), g)
	}
	for i, d := range s.Devices {
		p := fmt.Sprintf("devices[%d]", i)
		if !slices.Contains(deviceKinds, d.Kind) {
			v.missingOr(p+".kind", d.Kind == "", "unknown kind %q (known: %s)", d.Kind, strings.Join(deviceKinds, ", "))
		}
		v.parent(p+".parent", d.Parent)
		v.link(p+".link", d.Link)
		nonNegative(v, p+".line_rate", d.LineRate)
		positive(v, p+".dma_engines", d.DMAEngines)
		nonNegative(v, p+".outstanding_reads", d.OutstandingReads)
		v.pixels(p, d)
		v.dmaLimits(p, d)
	}
	for i, sw := range s.NVSwitches {
		nonNegative(v, fmt.Sprintf("nvswitches[%d].latency", i), sw.Latency)
	}
	v.nvlinks()
	v.fabric()
	if given(v, "swiotlb", s.SWIOTLB) && (s.SWIOTLB.V <= 0 || s.SWIOTLB.V%IOTLBSlot != 0) {
		v.add("swiotlb", "want a positive multiple of %s, swiotlb's slot size IO_TLB_SIZE (leave it out for the default %s), got %s",
			bytesText(IOTLBSlot), bytesText(DefaultSWIOTLB), bytesText(s.SWIOTLB.V))
	}
	if s.NUMABalancing.V != 0 && s.NUMABalancing.V != 1 {
		v.add("numa_balancing", "want 0 (off) or 1 (NUMA_BALANCING_NORMAL; memory tiering, 2, is not modelled), got %d", s.NUMABalancing.V)
	}
	v.coherency()
	v.iommu()
	v.functions()
}

// MaxFunctions is the number of functions a PCI device (a slot) has
// without ARI: a 3-bit function number (PCI_FUNC).
const MaxFunctions = 8

// functions checks the multifunction fields: function, acs and
// dma_aliases only with a slot; a slot's functions below one parent,
// numbered 0..7 without repeats, function 0 among them; aliases naming
// other functions of the slot.
func (v *validator) functions() {
	type first struct {
		i      int
		parent string
		fns    map[int]int // function number → device index
	}
	slots := map[string]*first{}
	var order []string
	for i, d := range v.s.Devices {
		p := fmt.Sprintf("devices[%d]", i)
		if d.Slot == "" {
			switch {
			case d.Function != 0 || (v.lines != nil && v.present(p+".function")):
				v.add(p+".function", "a function number needs slot, the physical device it is a function of")
			case d.ACS:
				v.add(p+".acs", "acs here is a function's own, among the functions of a multifunction device: set slot (a switch's ports have their own acs)")
			case len(d.DMAAliases) > 0:
				v.add(p+".dma_aliases", "DMA aliases name other functions of the device's slot: set slot")
			}
			continue
		}
		if !componentName.MatchString(d.Slot) || len(d.Slot) > 128 {
			v.add(p+".slot", "bad slot %q: want letters, digits, _ - . : (at most 128)", d.Slot)
		}
		if d.Function < 0 || d.Function >= MaxFunctions {
			v.add(p+".function", "want 0..%d (PCI_FUNC: 3 bits), got %d", MaxFunctions-1, d.Function)
		}
		sl, ok := slots[d.Slot]
		if !ok {
			sl = &first{i: i, parent: d.Parent, fns: map[int]int{}}
			slots[d.Slot] = sl
			order = append(order, d.Slot)
		}
		if d.Parent != sl.parent {
			v.add(p+".parent", "%q: slot %q is below %q (%s): the functions of one device share its parent",
				d.Parent, d.Slot, sl.parent, v.ref(fmt.Sprintf("devices[%d].parent", sl.i)))
		}
		if j, dup := sl.fns[d.Function]; dup {
			v.add(p+".function", "function %d of slot %q is already %s (%s)", d.Function, d.Slot, v.s.Devices[j].Name, v.ref(fmt.Sprintf("devices[%d].name", j)))
		} else {
			sl.fns[d.Function] = i
		}
		if len(d.DMAAliases) > MaxFunctions-1 {
			v.add(p+".dma_aliases", "%d entries: a slot has %d other functions at most", len(d.DMAAliases), MaxFunctions-1)
			continue
		}
		for k, a := range d.DMAAliases {
			ap := fmt.Sprintf("%s.dma_aliases[%d]", p, k)
			switch {
			case a < 0 || a >= MaxFunctions:
				v.add(ap, "want a function number 0..%d, got %d", MaxFunctions-1, a)
			case a == d.Function:
				v.add(ap, "function %d is the device itself", a)
			case slices.Contains(d.DMAAliases[:k], a):
				v.add(ap, "function %d listed twice", a)
			}
		}
	}
	for _, name := range order {
		sl := slots[name]
		if _, ok := sl.fns[0]; !ok {
			v.add(fmt.Sprintf("devices[%d].slot", sl.i), "slot %q has no function 0: Linux finds a device's other functions only through function 0 (pci_scan_slot)", name)
		}
	}
}

// iommu checks the IOMMU section: a known profile and mode, and a
// profile wherever the mode translates or passes through.
func (v *validator) iommu() {
	io := v.s.IOMMU
	if io.Profile != "" && !slices.Contains(iommuProfiles, io.Profile) {
		v.add("iommu.profile", "unknown profile %q (known: %s)", io.Profile, strings.Join(iommuProfiles, ", "))
	}
	if io.Mode != "" && !slices.Contains(iommuModes, io.Mode) {
		v.add("iommu.mode", "unknown mode %q (known: %s)", io.Mode, strings.Join(iommuModes, ", "))
		return
	}
	if io.Enabled() && io.Profile == "" {
		v.add("iommu.profile", "missing: mode %s needs the hardware's profile (%s)", io.Mode, strings.Join(iommuProfiles, ", "))
	}
}

// line returns the line of path or of its nearest ancestor in the
// document, 0 for specs built in Go.
func (v *validator) line(path string) int {
	if v.lines == nil {
		return 0
	}
	for {
		if l, ok := v.lines[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			return v.lines[""]
		}
		path = path[:i]
	}
}

// present reports whether path was written in the document; everything
// is present in a spec built in Go.
func (v *validator) present(path string) bool {
	if v.lines == nil {
		return true
	}
	_, ok := v.lines[path]
	return ok
}

func (v *validator) add(path, format string, args ...any) {
	v.errs.add(v.line(path), path, format, args...)
}

// missingOr reports "missing" for a field left out of the document (or
// zero in Go), else the given reason.
func (v *validator) missingOr(path string, zero bool, format string, args ...any) {
	if zero && (v.lines == nil || !v.present(path)) {
		v.add(path, "missing")
		return
	}
	v.add(path, format, args...)
}

// ref names another field for a message: "gpus[0].name, line 14".
func (v *validator) ref(path string) string {
	if l := v.line(path); l > 0 {
		return fmt.Sprintf("%s, line %d", path, l)
	}
	return path
}

func positive[T Number](v *validator, path string, p Param[T]) {
	if p.V > 0 && !math.IsInf(float64(p.V), 0) {
		return
	}
	if p.V == 0 && p.Source == "" && (v.lines == nil || !v.present(path)) {
		v.add(path, "missing: want %s", what(reflect.TypeFor[T]()))
		return
	}
	v.add(path, "must be positive, got %v", p.V)
}

// given reports whether an optional parameter was set: non-zero, with a
// source, or written in the document. Zero means "the default" for such
// a parameter, so writing 0 is an error rather than a silent default.
func given[T Number](v *validator, path string, p Param[T]) bool {
	return p.V != 0 || p.Source != "" || v.lines != nil && v.present(path)
}

// bytesText writes a size for a message, always with a unit: "48 B",
// "1 KiB".
func bytesText(b Bytes) string {
	s := b.String()
	if !strings.Contains(s, " ") {
		s += " B"
	}
	return s
}

func nonNegative[T Number](v *validator, path string, p Param[T]) {
	if !(p.V >= 0) || math.IsInf(float64(p.V), 0) {
		v.add(path, "must not be negative, got %v", p.V)
	}
}

// share checks a fraction in (0, 1].
func (v *validator) share(path string, p Param[float64]) {
	if p.V > 0 && p.V <= 1 {
		return
	}
	if p.V == 0 && p.Source == "" && (v.lines == nil || !v.present(path)) {
		v.add(path, "missing: want a number in (0, 1]")
		return
	}
	v.add(path, "want a number in (0, 1], got %v", p.V)
}

// strings checks that every string in the spec, sources included, is
// valid UTF-8: Marshal must be able to write it.
func (v *validator) strings(x reflect.Value, path string) {
	switch x.Kind() {
	case reflect.String:
		if !utf8.ValidString(x.String()) {
			v.add(path, "not valid UTF-8: %q", x.String())
		}
	case reflect.Struct:
		if x.Type().Implements(paramType) {
			v.strings(x.Field(1), join(path, "source"))
			return
		}
		for _, f := range schema[x.Type()] {
			v.strings(x.Field(f.index), join(path, f.name))
		}
	case reflect.Slice:
		for i := range x.Len() {
			v.strings(x.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
	}
}

// names registers the name of every component, checking each.
func (v *validator) names() {
	add := func(path, name string, k Kind) {
		switch {
		case name == "":
			v.add(path, "missing: every %s has a name", k)
		case !componentName.MatchString(name) || strings.Trim(name, "0123456789") == "" || len(name) > 128:
			v.add(path, "bad name %q: want letters, digits, _ - . : (not only digits, at most 128)", name)
		default:
			if first, dup := v.where[name]; dup {
				v.add(path, "duplicate name %q (first at %s)", name, v.ref(first))
				return
			}
			v.where[name], v.kinds[name] = path, k
		}
	}
	s := v.s
	for i, x := range s.SocketLinks {
		add(fmt.Sprintf("socket_links[%d].name", i), x.Name, KindSocketLink)
	}
	for i, x := range s.RootComplexes {
		add(fmt.Sprintf("root_complexes[%d].name", i), x.Name, KindRootComplex)
	}
	for i, x := range s.Switches {
		add(fmt.Sprintf("switches[%d].name", i), x.Name, KindSwitch)
	}
	for i, x := range s.GPUs {
		add(fmt.Sprintf("gpus[%d].name", i), x.Name, KindGPU)
	}
	for i, x := range s.Devices {
		add(fmt.Sprintf("devices[%d].name", i), x.Name, KindDevice)
	}
	for i, x := range s.NVSwitches {
		add(fmt.Sprintf("nvswitches[%d].name", i), x.Name, KindNVSwitch)
	}
}

func (v *validator) nodes() {
	if len(v.s.Nodes) == 0 {
		v.add("nodes", "missing: want at least one NUMA node")
	}
	for i, n := range v.s.Nodes {
		p := fmt.Sprintf("nodes[%d]", i)
		if n.ID != i {
			v.add(p+".id", "want %d: nodes are listed in id order 0..%d", i, len(v.s.Nodes)-1)
		}
		positive(v, p+".cores", n.Cores)
		positive(v, p+".dram", n.DRAM)
		positive(v, p+".dram_bandwidth", n.DRAMBandwidth)
		nonNegative(v, p+".dram_latency", n.DRAMLatency)
		if given(v, p+".copy_efficiency", n.CopyEfficiency) {
			v.share(p+".copy_efficiency", n.CopyEfficiency)
		}
		positive(v, p+".memcpy_rate", n.MemcpyRate)
		if given(v, p+".stream_rate", n.StreamRate) {
			positive(v, p+".stream_rate", n.StreamRate)
		}
		v.cache(p+".cache", n.Cache)
	}
}

// cache checks a node's CPU cache. Every field is optional here;
// coherency requires the costs where non-coherent DMA makes the CPU pay
// them.
func (v *validator) cache(p string, c CPUCache) {
	line := c.Line()
	if given(v, p+".line_size", c.LineSize) && (line < 16 || line > 256 || line&(line-1) != 0) {
		v.add(p+".line_size", "want a power of two from 16 B to 256 B (leave it out for the default %s), got %s",
			bytesText(DefaultLineSize), bytesText(line))
		line = DefaultLineSize
	}
	if given(v, p+".size", c.Size) && c.Size.V < line {
		v.add(p+".size", "want at least one line (%s), got %s", bytesText(line), bytesText(c.Size.V))
	}
	if c.Prefetch.V < 0 || c.Prefetch.V > 64 {
		v.add(p+".prefetch", "want 0..64 lines, got %d", c.Prefetch.V)
	}
	nonNegative(v, p+".writeback_cost", c.WritebackCost)
	nonNegative(v, p+".invalidate_cost", c.InvalidateCost)
	if given(v, p+".uncached_rate", c.UncachedRate) {
		positive(v, p+".uncached_rate", c.UncachedRate)
	}
}

// gpu checks a GPU: a discrete one is placed in the PCIe tree and has
// VRAM and a BAR1; an integrated one has none of them, only the node
// whose DRAM it shares.
func (v *validator) gpu(p string, g GPU) {
	if !slices.Contains(archs, g.Arch) {
		v.missingOr(p+".arch", g.Arch == "", "unknown arch %q (known: %s)", g.Arch, strings.Join(archs, ", "))
	}
	if g.Integrated {
		if v.lines != nil && !v.present(p+".node") {
			v.add(p+".node", "missing: want the NUMA node whose DRAM the integrated GPU shares")
		} else {
			v.node(p+".node", g.Node)
		}
		shares := fmt.Sprintf("an integrated GPU is not on PCIe: it shares node %d's DRAM", g.Node)
		if g.Parent != "" || v.lines != nil && v.present(p+".parent") {
			v.add(p+".parent", "want it left out: %s", shares)
		}
		if g.Link != (PCIeLink{}) || v.lines != nil && v.present(p+".link") {
			v.add(p+".link", "want it left out: %s", shares)
		}
		if given(v, p+".vram", g.VRAM) {
			v.add(p+".vram", "want it left out: an integrated GPU has no memory of its own; it allocates from node %d's DRAM", g.Node)
		}
		if given(v, p+".bar1", g.BAR1) {
			v.add(p+".bar1", "want it left out: %s, so it has no BAR", shares)
		}
		if given(v, p+".vram_bandwidth", g.VRAMBandwidth) {
			positive(v, p+".vram_bandwidth", g.VRAMBandwidth)
			if g.Node >= 0 && g.Node < len(v.s.Nodes) {
				if dram := v.s.Nodes[g.Node].DRAMBandwidth.V; dram > 0 && g.VRAMBandwidth.V > dram {
					v.add(p+".vram_bandwidth", "want at most node %d's dram_bandwidth (%v), which an integrated GPU shares, got %v",
						g.Node, dram, g.VRAMBandwidth.V)
				}
			}
		}
	} else {
		if g.Node != 0 || v.lines != nil && v.present(p+".node") {
			v.add(p+".node", "want it left out: a discrete GPU is on the node of its root complex (node is for an integrated GPU)")
		}
		v.parent(p+".parent", g.Parent)
		v.link(p+".link", g.Link)
		positive(v, p+".vram", g.VRAM)
		positive(v, p+".vram_bandwidth", g.VRAMBandwidth)
		positive(v, p+".bar1", g.BAR1)
	}
	positive(v, p+".copy_engines", g.CopyEngines)
	nonNegative(v, p+".copy_overhead", g.CopyOverhead)
	nonNegative(v, p+".copy_completion", g.CopyCompletion)
	if g.CopyCompletion.V > g.CopyOverhead.V {
		v.add(p+".copy_completion", "want at most copy_overhead (%v), got %v", g.CopyOverhead.V, g.CopyCompletion.V)
	}
	for _, c := range []struct {
		name string
		p    Param[sim.Time]
		def  sim.Time
	}{
		{"kernel_launch", g.KernelLaunch, DefaultKernelLaunch},
		{"alloc_cost", g.AllocCost, DefaultAllocCost},
		{"pin_cost", g.PinCost, DefaultPinCost},
		{"unpin_cost", g.UnpinCost, DefaultUnpinCost},
		{"pin_call_cost", g.PinCallCost, DefaultPinCallCost},
		{"unpin_call_cost", g.UnpinCallCost, DefaultUnpinCallCost},
	} {
		v.optionalTime(p+"."+c.name, c.p, c.def)
	}
	if given(v, p+".staging_rate", g.StagingRate) {
		positive(v, p+".staging_rate", g.StagingRate)
	}
	nonNegative(v, p+".vram_latency", g.VRAMLatency)
	nonNegative(v, p+".hub_latency", g.HubLatency)
	nonNegative(v, p+".outstanding_reads", g.OutstandingReads)
	if r := g.SMRequest.V; given(v, p+".sm_request", g.SMRequest) && (r < 32 || r > 4096 || r&(r-1) != 0) {
		v.add(p+".sm_request", "want a power of two from 32 B (one L2 sector) to 4 KiB, got %s", bytesText(r))
	}
	if c := g.PageableChunk.V; given(v, p+".pageable_chunk", g.PageableChunk) && (c <= 0 || c%HostPage != 0) {
		v.add(p+".pageable_chunk", "want a positive multiple of %s, a host page (leave it out for the default %s), got %s",
			bytesText(HostPage), bytesText(DefaultPageableChunk), bytesText(c))
	}
	v.uvm(p+".uvm", g.UVM)
}

// optionalTime checks an optional cost: left out (zero) for its default,
// else positive, since a given zero would silently mean the default.
func (v *validator) optionalTime(path string, p Param[sim.Time], def sim.Time) {
	if given(v, path, p) && !(p.V > 0) {
		v.add(path, "must be positive (leave it out for the default %v), got %v", def, p.V)
	}
}

// uvm checks the unified-memory driver's parameters against the ranges
// nvidia_uvm itself accepts: a value it would refuse (and replace by its
// default, with a warning in the kernel log) is an error here. The
// prefetch threshold takes 1..100 as uvm_perf_prefetch.c documents it
// ("Valid values 1-100"), though its check lets 0 through.
func (v *validator) uvm(p string, u UVM) {
	for _, c := range []struct {
		name, param, unit string
		x                 Param[int]
		lo, hi, def       int
	}{
		{"fault_batch", "uvm_perf_fault_batch_count", "faults", u.FaultBatch, 1, maxUint, DefaultFaultBatch},
		{"max_batches", "uvm_perf_fault_max_batches_per_service", "batches", u.MaxBatches, 1, maxUint, DefaultMaxBatches},
		{"prefetch_threshold", "uvm_perf_prefetch_threshold", "percent", u.PrefetchThreshold, 1, 100, DefaultPrefetchThreshold},
		{"thrashing_threshold", "uvm_perf_thrashing_threshold, a 3-bit count", "migrations", u.ThrashingThreshold, 1, MaxThrashingThreshold, DefaultThrashingThreshold},
		// The driver's 0, pinned for ever, is not modelled: zero is the
		// default here.
		{"thrashing_pin_lapses", "uvm_perf_thrashing_pin", "lapses", u.ThrashingPinLapses, 1, maxUint, DefaultThrashingPinLapses},
		{"thrashing_epoch_lapses", "uvm_perf_thrashing_epoch", "lapses", u.ThrashingEpochLapses, 1, maxUint, DefaultThrashingEpochLapses},
	} {
		path := p + "." + c.name
		if given(v, path, c.x) && (c.x.V < c.lo || c.x.V > c.hi) {
			v.add(path, "want %d..%d %s (%s; leave it out for the driver's default %d), got %d", c.lo, c.hi, c.unit, c.param, c.def, c.x.V)
		}
	}
	if l := u.ThrashingLapse.V; given(v, p+".thrashing_lapse", u.ThrashingLapse) &&
		(l < sim.Microsecond || l > maxUint*sim.Microsecond || l%sim.Microsecond != 0) {
		v.add(p+".thrashing_lapse", "want a whole number of microseconds, 1us..%dus (uvm_perf_thrashing_lapse_usec; leave it out for the driver's default %v), got %v",
			maxUint, DefaultThrashingLapse, l)
	}
	v.optionalTime(p+".fault_latency", u.FaultLatency, DefaultFaultLatency)
	v.optionalTime(p+".fault_entry_cost", u.FaultEntryCost, DefaultFaultEntryCost)
	v.optionalTime(p+".fault_page_cost", u.FaultPageCost, DefaultFaultPageCost)
	v.optionalTime(p+".cpu_map_cost", u.CPUMapCost, DefaultCPUMapCost)
}

// pixels checks the fields of the video devices: a camera needs its
// input link's rate (line_rate), since a frame cannot arrive faster
// than its lanes carry it; an ISP and a display controller need a
// pixel_rate, which no other kind has.
func (v *validator) pixels(p string, d Device) {
	if d.Kind == DeviceCamera && d.LineRate.V == 0 {
		v.missingOr(p+".line_rate", true, "a camera needs its input link's rate")
	}
	if slices.Contains(pixelKinds, d.Kind) {
		positive(v, p+".pixel_rate", d.PixelRate)
		return
	}
	if given(v, p+".pixel_rate", d.PixelRate) {
		v.add(p+".pixel_rate", "only a device of kind %s has one, not %q", strings.Join(pixelKinds, " or "), d.Kind)
	}
}

// dmaLimits checks what a device's driver would tell the DMA API about
// it. The narrowest mask in use is ISA DMA's 24 bits; a segment shorter
// than a 512-byte sector, or a boundary below a 4 KiB page, is no
// device's.
func (v *validator) dmaLimits(p string, d Device) {
	if given(v, p+".dma_mask_bits", d.DMAMaskBits) && (d.DMAMaskBits.V < 24 || d.DMAMaskBits.V > 64) {
		v.add(p+".dma_mask_bits", "want 24..64 address bits (leave it out for the default %d), got %d", DefaultDMAMaskBits, d.DMAMaskBits.V)
	}
	if given(v, p+".max_segment", d.MaxSegment) && d.MaxSegment.V < 512 {
		v.add(p+".max_segment", "want at least 512 B (leave it out for the default %s), got %s",
			bytesText(DefaultMaxSegment), bytesText(d.MaxSegment.V))
	}
	if b := d.SegmentBoundary.V; given(v, p+".segment_boundary", d.SegmentBoundary) && (b < 4<<10 || b&(b-1) != 0) {
		v.add(p+".segment_boundary", "want a power of two of at least 4 KiB (leave it out for the default %s), got %s",
			bytesText(DefaultSegmentBoundary), bytesText(b))
	}
}

// coherency requires the cache parameters of every node where a device
// or GPU does non-coherent DMA (itself, or through its root complex): the
// model then charges cache maintenance and uncached access to the CPUs.
// One error per node, naming the first such device.
func (v *validator) coherency() {
	root := v.rootComplexes()
	done := map[int]bool{}
	check := func(kind Kind, name, parent string, own bool) {
		rc, ok := root(parent)
		if !ok || !own && !rc.NonCoherentDMA {
			return
		}
		why := "it has noncoherent_dma"
		if !own {
			why = fmt.Sprintf("root complex %q has noncoherent_dma", rc.Name)
		}
		v.needCache(kind, name, rc.Node, why, done)
	}
	for _, d := range v.s.Devices {
		check(KindDevice, d.Name, d.Parent, d.NonCoherentDMA)
	}
	for _, g := range v.s.GPUs {
		if g.Integrated {
			if g.NonCoherentDMA {
				v.needCache(KindGPU, g.Name, g.Node, "it has noncoherent_dma", done)
			}
			continue
		}
		check(KindGPU, g.Name, g.Parent, g.NonCoherentDMA)
	}
}

// needCache reports the cache parameters node lacks, once per node.
func (v *validator) needCache(kind Kind, name string, node int, why string, done map[int]bool) {
	if node < 0 || node >= len(v.s.Nodes) || done[node] {
		return
	}
	c := v.s.Nodes[node].Cache
	var missing []string
	for _, f := range []struct {
		name string
		zero bool
	}{
		{"size", c.Size.V == 0}, {"writeback_cost", c.WritebackCost.V == 0},
		{"invalidate_cost", c.InvalidateCost.V == 0}, {"uncached_rate", c.UncachedRate.V == 0},
	} {
		if f.zero {
			missing = append(missing, f.name)
		}
	}
	if len(missing) == 0 {
		return
	}
	done[node] = true
	v.add(fmt.Sprintf("nodes[%d].cache", node), "missing %s: %s %q on node %d does non-coherent DMA (%s), so the cost of cache maintenance and uncached access must be given",
		strings.Join(missing, ", "), kind, name, node, why)
}

// rootComplexes returns a function that finds the root complex above an
// upstream name (a root complex or a switch), as PathToRoot does, in time
// linear in the spec however long the chains of switches: a spec being
// validated may be large, hostile, and cyclic. A broken or cyclic chain
// (reported elsewhere) has no root complex.
func (v *validator) rootComplexes() func(name string) (RootComplex, bool) {
	rcs := map[string]RootComplex{}
	for _, rc := range v.s.RootComplexes {
		if _, dup := rcs[rc.Name]; !dup {
			rcs[rc.Name] = rc
		}
	}
	up := map[string]string{}
	for _, sw := range v.s.Switches {
		if _, dup := up[sw.Name]; !dup {
			up[sw.Name] = sw.Parent
		}
	}
	memo := map[string]string{} // switch → root complex name, "" for none
	return func(name string) (RootComplex, bool) {
		var chain []string
		seen := map[string]bool{}
		r := ""
		for at := name; ; {
			if _, ok := rcs[at]; ok {
				r = at
				break
			}
			if m, ok := memo[at]; ok {
				r = m
				break
			}
			p, ok := up[at]
			if !ok || seen[at] {
				break
			}
			seen[at] = true
			chain = append(chain, at)
			at = p
		}
		for _, c := range chain {
			memo[c] = r
		}
		rc, ok := rcs[r]
		return rc, ok
	}
}

// node checks a reference to a NUMA node.
func (v *validator) node(path string, id int) {
	if id < 0 || id >= len(v.s.Nodes) {
		v.add(path, "no node %d (nodes are 0..%d)", id, len(v.s.Nodes)-1)
	}
}

// distances checks the SLIT matrix: empty, or n×n with 10 on the
// diagonal, 10..255 elsewhere (ACPI's one-byte entries), symmetric.
func (v *validator) distances() {
	d, n := v.s.Distances, len(v.s.Nodes)
	if len(d) == 0 {
		return
	}
	if len(d) != n {
		v.add("distances", "want %d rows, one per node, got %d", n, len(d))
		return
	}
	for i, row := range d {
		if len(row) != n {
			v.add(fmt.Sprintf("distances[%d]", i), "want %d entries, one per node, got %d", n, len(row))
			return
		}
	}
	for i, row := range d {
		for j, x := range row {
			p := fmt.Sprintf("distances[%d][%d]", i, j)
			switch {
			case i == j && x != 10:
				v.add(p, "want 10 on the diagonal (local), got %d", x)
			case x < 10 || x > 255:
				v.add(p, "want 10..255, got %d", x)
			case j < i && x != d[j][i]:
				v.add(p, "not symmetric: %d here, %d at distances[%d][%d]", x, d[j][i], j, i)
			}
		}
	}
}

// parent checks an upstream reference: a root complex or a switch.
func (v *validator) parent(path, parent string) {
	k, ok := v.kinds[parent]
	switch {
	case parent == "":
		v.add(path, "missing: want the name of a root complex or switch")
	case !ok:
		v.add(path, "unknown parent %q (root complexes and switches: %s)", parent, v.upstreams())
	case k != KindRootComplex && k != KindSwitch:
		v.add(path, "parent %q is a %s; want a root complex or a switch", parent, k)
	}
}

func (v *validator) upstreams() string {
	var names []string
	for _, rc := range v.s.RootComplexes {
		names = append(names, rc.Name)
	}
	for _, sw := range v.s.Switches {
		names = append(names, sw.Name)
	}
	return shortList(names)
}

// shortList joins names, eliding the middle of a long list.
func shortList(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	if len(names) > 12 {
		return strings.Join(names[:10], ", ") + fmt.Sprintf(", ... (%d more)", len(names)-10)
	}
	return strings.Join(names, ", ")
}

// cycles reports each cycle among switches once, at the first switch of
// the cycle in the list.
func (v *validator) cycles() {
	index := map[string]int{}
	for i, sw := range v.s.Switches {
		if _, dup := index[sw.Name]; !dup {
			index[sw.Name] = i
		}
	}
	done := make([]bool, len(v.s.Switches))
	for start := range v.s.Switches {
		var chain []int
		at := map[int]int{} // switch index → position in chain
		for i := start; ; {
			if done[i] {
				break
			}
			if pos, seen := at[i]; seen {
				cyc := chain[pos:]
				first := slices.Min(cyc)
				names := make([]string, 0, len(cyc)+1)
				k := slices.Index(cyc, first)
				for j := range cyc {
					names = append(names, v.s.Switches[cyc[(k+j)%len(cyc)]].Name)
				}
				names = append(names, v.s.Switches[first].Name)
				v.add(fmt.Sprintf("switches[%d].parent", first), "cycle among switches: %s", strings.Join(names, " -> "))
				break
			}
			at[i] = len(chain)
			chain = append(chain, i)
			next, ok := index[v.s.Switches[i].Parent]
			if !ok {
				break
			}
			i = next
		}
		for _, i := range chain {
			done[i] = true
		}
	}
}

func (v *validator) link(path string, l PCIeLink) {
	if given(v, path+".bandwidth", l.Bandwidth) {
		positive(v, path+".bandwidth", l.Bandwidth)
		for _, f := range []struct {
			name string
			set  bool
		}{{"gen", l.Gen != 0}, {"width", l.Width != 0}, {"efficiency", given(v, path+".efficiency", l.Efficiency)}} {
			if f.set {
				v.add(path+"."+f.name, "want it left out: the link's bandwidth replaces gen x width x efficiency")
			}
		}
		nonNegative(v, path+".latency", l.Latency)
		return
	}
	if l.Gen < 1 || l.Gen > 6 {
		v.missingOr(path+".gen", l.Gen == 0, "want 1..6, got %d", l.Gen)
	}
	if !slices.Contains(pcieWidths, l.Width) {
		v.missingOr(path+".width", l.Width == 0, "want 1, 2, 4, 8, 16 or 32 lanes, got %d", l.Width)
	}
	v.share(path+".efficiency", l.Efficiency)
	nonNegative(v, path+".latency", l.Latency)
	for _, f := range []struct {
		name string
		p    Param[Bytes]
	}{{"max_payload", l.MaxPayload}, {"max_read_request", l.MaxReadRequest}} {
		if !given(v, path+"."+f.name, f.p) {
			continue
		}
		if b := f.p.V; b < 128 || b > 4096 || b&(b-1) != 0 {
			v.add(path+"."+f.name, "want a power of two from 128 B to 4 KiB (PCIe Base Specification), got %s", bytesText(b))
		}
	}
	if given(v, path+".ack_overhead", l.AckOverhead) {
		if b := l.AckOverhead.V; b < 0 || b > 64 {
			v.add(path+".ack_overhead", "want 0 B to 64 B (one DLLP per TLP), got %s", bytesText(b))
		}
	}
	if given(v, path+".tlp_overhead", l.TLPOverhead) {
		if b := l.TLPOverhead.V; b < 12 || b > 64 {
			v.add(path+".tlp_overhead", "want 12 B to 64 B (header, framing and CRC of one TLP), got %s", bytesText(b))
		}
	}
}

func (v *validator) nvlinks() {
	pairs := map[[2]string]int{}
	for i, l := range v.s.NVLinks {
		p := fmt.Sprintf("nvlinks[%d]", i)
		v.nvlinkEnd(p+".a", l.A)
		v.nvlinkEnd(p+".b", l.B)
		if l.A == l.B && l.A != "" {
			v.add(p+".b", "links %q to itself", l.A)
		}
		key := [2]string{min(l.A, l.B), max(l.A, l.B)}
		if first, dup := pairs[key]; dup {
			v.add(p, "second bundle between %s and %s (first nvlinks[%d]): put all their links in one", l.A, l.B, first)
		} else {
			pairs[key] = i
		}
		positive(v, p+".links", l.Links)
		positive(v, p+".link_rate", l.LinkRate)
		if given(v, p+".efficiency", l.Efficiency) {
			// Left out, the packets decide it (NVLink.Share).
			v.share(p+".efficiency", l.Efficiency)
		}
		nonNegative(v, p+".payload", l.Payload)
		nonNegative(v, p+".header", l.Header)
		nonNegative(v, p+".latency", l.Latency)
	}
}

func (v *validator) nvlinkEnd(path, name string) {
	k, ok := v.kinds[name]
	switch {
	case name == "":
		v.add(path, "missing: want the name of a GPU or NVSwitch")
	case !ok:
		var names []string
		for _, g := range v.s.GPUs {
			names = append(names, g.Name)
		}
		for _, sw := range v.s.NVSwitches {
			names = append(names, sw.Name)
		}
		v.add(path, "unknown %q (GPUs and NVSwitches: %s)", name, shortList(names))
	case k != KindGPU && k != KindNVSwitch:
		v.add(path, "%q is a %s; NVLink joins GPUs and NVSwitches", name, k)
	}
}

// fabric checks the global factors. Zero means "default" for the two
// multiplicative factors, so writing 0 (or giving 0 a source) is an error
// rather than a silent 1.
func (v *validator) fabric() {
	f := v.s.Fabric
	for _, x := range []struct {
		path string
		p    Param[float64]
	}{{"fabric.bandwidth_factor", f.BandwidthFactor}, {"fabric.latency_factor", f.LatencyFactor}} {
		if given(v, x.path, x.p) && !(x.p.V > 0 && !math.IsInf(x.p.V, 0)) {
			v.add(x.path, "must be positive (leave it out for the default 1), got %v", x.p.V)
		}
	}
	if c := f.CrossTraffic.V; !(c >= 0 && c < 1) {
		v.add("fabric.cross_traffic", "want a number in [0, 1), got %v", c)
	}
	switch f.Sharing {
	case "", "max-min", "lv08":
	default:
		v.add("fabric.sharing", "unknown sharing %q: want max-min or lv08 (or leave it out for max-min)", f.Sharing)
	}
	if given(v, "fabric.weight_s", f.WeightS) {
		switch w := f.WeightS.V; {
		case f.Sharing != "lv08":
			v.add("fabric.weight_s", "applies to lv08 sharing only (set fabric.sharing: lv08)")
		case !(w > 0 && !math.IsInf(w, 0)):
			v.add("fabric.weight_s", "must be positive (leave it out for SimGrid's 20537), got %v", w)
		}
	}
}

// socketLinkRate checks a socket link's capacity: its structure (links,
// link_rate, efficiency, all three) or a fixed bandwidth; a bandwidth
// given beside the structure replaces it (a measured rate, or a what-if
// `--set platform.socket_links.upi.bandwidth=...`, as before the link
// had a structure); and a protocol dmalab knows, if any.
func (v *validator) socketLinkRate(p string, l SocketLink) {
	switch l.Protocol {
	case "", "upi", "xgmi":
	default:
		v.add(p+".protocol", "unknown protocol %q: want upi or xgmi (or leave it out)", l.Protocol)
	}
	structured := given(v, p+".links", l.Links) || given(v, p+".link_rate", l.LinkRate) || given(v, p+".efficiency", l.Efficiency)
	if !structured {
		positive(v, p+".bandwidth", l.Bandwidth)
		return
	}
	if given(v, p+".bandwidth", l.Bandwidth) {
		positive(v, p+".bandwidth", l.Bandwidth)
	}
	positive(v, p+".links", l.Links)
	positive(v, p+".link_rate", l.LinkRate)
	v.share(p+".efficiency", l.Efficiency)
}
