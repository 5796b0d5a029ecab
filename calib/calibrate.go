package calib

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/dmalab/dmalab/hw/probe"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// Parameters lists what Calibrate may change, with the row each is
// solved from, for the command's help.
var Parameters = []string{
	"gpus[i].link.efficiency (or link.bandwidth where the link has a fixed rate): ce_copy pinned h2d at the largest size, copy-engine time without the per-call overhead",
	"gpus[i].copy_overhead: sync_call pinned d2h at the smallest size (a write: no read round trip in it)",
	"gpus[i].vram_latency: latency device pointer_chase (one dependent load of VRAM)",
	"gpus[i].hub_latency: latency mapped h2d pointer_chase, less the modelled links and DRAM (host_device_latency_sm)",
	"gpus[i].copy_completion: sync_call pageable h2d at the smallest size (the call returns once staged: the per-call overhead less the host's wait for the DMA's completion)",
	"gpus[i].uvm.fault_latency: unified managed-fault single_thread_read at the largest stride (one isolated fault: the per-batch cost, with one entry, one block and 16 pages)",
	"gpus[i].uvm.fault_page_cost: unified managed-fault single_thread_read at the smallest stride (its median faults move 32 and 64 pages, the isolated one 16)",
	"gpus[i].uvm.fault_entry_cost: unified managed-fault read (many threads, 256 entries a batch, one block a batch)",
	"gpus[i].uvm.cpu_map_cost: unified managed-prefetch d2h at the largest size (no faults: the copy, the per-block cost, and per page the CPU's allocation and page-table insertion)",
	"gpus[i].pin_cost and unpin_cost: pin register and unregister at the largest size (per page)",
	"gpus[i].pin_call_cost and unpin_call_cost: pin register and unregister at the smallest size (per call)",
	"gpus[i].staging_rate: sync_copy pageable h2d at the largest size (the driver's copy into its staging buffers, which bounds it)",
	"nodes[n].memcpy_rate: host_memcpy memcpy (Go's copy where the report has no C memcpy row), on the first GPU's node",
	"nodes[n].stream_rate: host_memcpy stream_out, on the first GPU's node",
}

// Change is one parameter Calibrate set.
type Change struct {
	// Path is the parameter's --set path, "gpus.gpu0.link.efficiency".
	Path     string  `json:"path"`
	Old      string  `json:"old"`
	New      string  `json:"new"`
	Row      string  `json:"row"`
	Measured float64 `json:"measured"`
	Unit     string  `json:"unit"`
	Source   string  `json:"source"`
	// AtBound: the row lies beyond the parameter's bounds and the
	// parameter took the nearer one; the row is not reproduced, so
	// validate does not count it as a calibration row.
	AtBound bool `json:"at_bound,omitempty"`
}

// Calibrate returns base with the calibration subset solved from rep,
// the changes, and notes on what could not be calibrated. probeFile is
// the report's file name, which the sources name. Each parameter is
// found by bisection on the model's prediction of its row, so it is
// what the model's own mechanism needs to reproduce the measurement.
func Calibrate(rep *probe.Report, probeFile string, base *platform.Spec) (*platform.Spec, []Change, []string, error) {
	c := &calibrator{rep: rep, file: filepath.Base(probeFile), spec: base}
	for _, g := range rep.GPUs {
		gi := g.Device.Ordinal
		if gi >= len(base.GPUs) {
			c.notef("gpu%d (%s): the platform has %d GPU(s); its rows calibrate nothing", gi, g.Device.Name, len(base.GPUs))
			continue
		}
		if err := c.gpu(&g, gi); err != nil {
			return nil, nil, nil, err
		}
	}
	if len(rep.GPUs) > 0 && rep.GPUs[0].Device.Ordinal < len(base.GPUs) {
		if err := c.node(&rep.GPUs[0]); err != nil {
			return nil, nil, nil, err
		}
	}
	// The staging copy last: unset, it is the node's memcpy rate.
	for _, g := range rep.GPUs {
		if gi := g.Device.Ordinal; gi < len(base.GPUs) {
			if err := c.staging(&g, gi); err != nil {
				return nil, nil, nil, err
			}
		}
	}
	return c.spec, c.changes, c.notes, nil
}

// staging calibrates the driver's copy into its staging buffers from the
// largest synchronous pageable copy to the device, which that copy
// bounds (the chunks' DMA overlaps it at several times its rate); the
// small pageable calls to the device are then predicted with it.
func (c *calibrator) staging(g *probe.GPUReport, gi int) error {
	if c.spec.GPUs[gi].Integrated {
		return nil
	}
	row := pick(g, true, size, is(probe.FamilySync, "pageable", probe.H2D, ""))
	if row == nil {
		c.notef("gpu%d: no sync_copy pageable h2d row: staging_rate keeps its value", gi)
		return nil
	}
	return c.solve(gi, row, "gpus."+c.spec.GPUs[gi].Name+".staging_rate", row.Median*1e9/4, row.Median*1e9*4, rateText)
}

type calibrator struct {
	rep     *probe.Report
	file    string
	spec    *platform.Spec
	changes []Change
	notes   []string
}

func (c *calibrator) notef(format string, a ...any) {
	c.notes = append(c.notes, fmt.Sprintf(format, a...))
}

// pick returns the row of g matching the filter with the largest
// (largest true) or smallest size or stride, or nil.
func pick(g *probe.GPUReport, largest bool, key func(*probe.Measurement) int64, match func(*probe.Measurement) bool) *probe.Measurement {
	var best *probe.Measurement
	for i := range g.Measurements {
		m := &g.Measurements[i]
		if !match(m) || m.Median <= 0 {
			continue
		}
		if best == nil || (largest && key(m) > key(best)) || (!largest && key(m) < key(best)) {
			best = m
		}
	}
	return best
}

func size(m *probe.Measurement) int64   { return m.SizeBytes }
func stride(m *probe.Measurement) int64 { return m.StrideBytes }

func is(family, path, dir, op string) func(*probe.Measurement) bool {
	return func(m *probe.Measurement) bool {
		return m.Family == family && m.Path == path && m.Direction == dir && m.Operation == op
	}
}

func (c *calibrator) gpu(g *probe.GPUReport, gi int) error {
	spec := c.spec.GPUs[gi]
	at := "gpus." + spec.Name + "."
	// The link first: the overhead's row is a small copy, which the
	// link's rate hardly touches, while the efficiency's row is timed
	// without the overhead.
	if row := pick(g, true, size, is(probe.FamilyCE, "pinned", probe.H2D, "")); row == nil {
		c.notef("gpu%d: no ce_copy pinned h2d row: the link keeps its value", gi)
	} else if spec.Integrated {
		c.notef("gpu%d: integrated, no PCIe link: its copies run at its node's DRAM, which is not calibrated", gi)
	} else if spec.Link.Bandwidth.V != 0 {
		cur := float64(spec.Link.Bandwidth.V)
		if err := c.solve(gi, row, at+"link.bandwidth", cur/20, cur*20, rateText); err != nil {
			return err
		}
	} else if err := c.solve(gi, row, at+"link.efficiency", 0.01, 1, floatText); err != nil {
		return err
	}
	// The latencies before the overhead: an h2d copy waits for its read
	// round trip, a d2h copy (posted writes) does not, so the d2h row
	// identifies the overhead alone.
	if row := pick(g, false, size, is(probe.FamilyLatency, "device", "", "pointer_chase")); row == nil || spec.Integrated {
		c.notef("gpu%d: no latency device pointer_chase row (or an integrated GPU): vram_latency keeps its value", gi)
	} else if err := c.solve(gi, row, at+"vram_latency", 0, row.Median*1e-9, timeText); err != nil {
		return err
	}
	if row := pick(g, false, size, is(probe.FamilyLatency, "mapped", probe.H2D, "pointer_chase")); row == nil || spec.Integrated {
		c.notef("gpu%d: no latency mapped h2d pointer_chase row (or an integrated GPU): hub_latency keeps its value", gi)
	} else if err := c.solve(gi, row, at+"hub_latency", 0, row.Median*1e-9, timeText); err != nil {
		return err
	}
	if row := pick(g, false, size, is(probe.FamilyCallTime, "pinned", probe.D2H, "")); row == nil {
		c.notef("gpu%d: no sync_call pinned d2h row: copy_overhead keeps its value", gi)
	} else if err := c.solve(gi, row, at+"copy_overhead", spec.CopyCompletion.V.Seconds(), row.Median*1e-6, timeText); err != nil {
		return err
	}
	// After the overhead, which bounds it: a pageable h2d call returns
	// once its data is staged, so it lacks exactly the completion wait.
	if row := pick(g, false, size, is(probe.FamilyCallTime, "pageable", probe.H2D, "")); row == nil || spec.Integrated {
		c.notef("gpu%d: no sync_call pageable h2d row (or an integrated GPU): copy_completion keeps its value", gi)
	} else if err := c.solve(gi, row, at+"copy_completion", 0, c.spec.GPUs[gi].CopyOverhead.V.Seconds(), timeText); err != nil {
		return err
	}
	if row := pick(g, true, stride, is(probe.FamilyUnified, probe.PathManagedFault, probe.H2D, "single_thread_read")); row == nil {
		c.notef("gpu%d: no unified managed-fault single_thread_read row: uvm.fault_latency keeps its value", gi)
	} else if err := c.solve(gi, row, at+"uvm.fault_latency", row.Median*1e-6/2, row.Median*1e-6*4, timeText); err != nil {
		return err
	}
	if err := c.faults(g, gi, at); err != nil {
		return err
	}
	for _, op := range []struct{ op, param, call string }{{"register", "pin_cost", "pin_call_cost"}, {"unregister", "unpin_cost", "unpin_call_cost"}} {
		if err := c.pin(g, gi, at, op.op, op.param, op.call); err != nil {
			return err
		}
	}
	return nil
}

// pin calibrates a registration's cost per page from the largest size
// and its cost per call from the smallest: each row is mostly one of the
// two (1 GiB is 262,144 pages; 2 MiB is mostly the call), so solving
// each in turn twice, the other held, settles both.
func (c *calibrator) pin(g *probe.GPUReport, gi int, at, op, perPage, perCall string) error {
	large := pick(g, true, size, is(probe.FamilyPin, "pageable", "", op))
	if large == nil {
		c.notef("gpu%d: no pin %s row: %s and %s keep their values", gi, op, perPage, perCall)
		return nil
	}
	small := pick(g, false, size, is(probe.FamilyPin, "pageable", "", op))
	if small.SizeBytes == large.SizeBytes {
		c.notef("gpu%d: one size of pin %s: %s keeps its value", gi, op, perCall)
		small = nil
	}
	page := large.Median * 1e-6 / (float64(large.SizeBytes) / float64(platform.HostPage))
	first := len(c.changes)
	for range 2 {
		if err := c.solve(gi, large, at+perPage, page/16, page*16, timeText); err != nil {
			return err
		}
		if small == nil {
			break
		}
		// A call cheaper than the model's pages alone says the per-page
		// cost is off, not that calls are free: the bound, with a note.
		if err := c.solveClamped(gi, small, at+perCall, 1e-9, small.Median*1e-6, timeText, true); err != nil {
			return err
		}
	}
	c.merge(first)
	return nil
}

// merge keeps one change per parameter among those made since first:
// the last value, the first old value.
func (c *calibrator) merge(first int) {
	at := map[string]int{}
	kept := c.changes[:first]
	for _, ch := range c.changes[first:] {
		if i, ok := at[ch.Path]; ok {
			ch.Old = kept[i].Old
			kept[i] = ch
			continue
		}
		at[ch.Path] = len(kept)
		kept = append(kept, ch)
	}
	c.changes = kept
}

// faults calibrates the fault service's per-page and per-entry costs
// after its per-batch cost (uvm.fault_latency, which the platform turns
// into the batch overhead net of the other costs, so that the isolated
// fault stays as measured while they change). Each needs one row: the
// single thread at the smallest stride differs from the isolated fault
// only by the pages its median faults move, and the many-thread read
// only by its entries (256 a batch) and pages once both are known.
func (c *calibrator) faults(g *probe.GPUReport, gi int, at string) error {
	if c.spec.GPUs[gi].Integrated {
		return nil
	}
	if row := pick(g, false, stride, is(probe.FamilyUnified, probe.PathManagedFault, probe.H2D, "single_thread_read")); row == nil || row.StrideBytes >= 2<<20 {
		c.notef("gpu%d: no single_thread_read row below 2 MiB stride: uvm.fault_page_cost keeps its value", gi)
	} else if err := c.solve(gi, row, at+"uvm.fault_page_cost", 1e-9, 2e-6, timeText); err != nil {
		return err
	}
	if row := pick(g, true, size, is(probe.FamilyUnified, probe.PathManagedFault, probe.H2D, "read")); row == nil {
		c.notef("gpu%d: no unified managed-fault read row: uvm.fault_entry_cost keeps its value", gi)
	} else if err := c.solveClamped(gi, row, at+"uvm.fault_entry_cost", 1e-9, 2e-6, timeText, true); err != nil {
		return err
	}
	// A prefetch to the CPU faults nothing: beyond its copy and per-block
	// work, its time is the pages made resident in system memory.
	if row := pick(g, true, size, is(probe.FamilyUnified, probe.PathManagedPrefetch, probe.D2H, "")); row == nil {
		c.notef("gpu%d: no unified managed-prefetch d2h row: uvm.cpu_map_cost keeps its value", gi)
	} else if err := c.solveClamped(gi, row, at+"uvm.cpu_map_cost", 1e-9, 20e-6, timeText, true); err != nil {
		return err
	}
	return nil
}

// node calibrates the CPU copy rates of the first GPU's node.
func (c *calibrator) node(g *probe.GPUReport) error {
	gi := g.Device.Ordinal
	node, err := c.spec.NodeOf(c.spec.GPUs[gi].Name)
	if err != nil {
		c.notef("gpu%d: %v: the node's copy rates keep their values", gi, err)
		return nil
	}
	at := fmt.Sprintf("nodes.%d.", node)
	row := pick(g, true, size, is(probe.FamilyHostMemcpy, "pageable", "h2h", "memcpy"))
	if row == nil {
		if row = pick(g, true, size, func(m *probe.Measurement) bool {
			return m.Family == probe.FamilyHostMemcpy && (m.Operation == "" || m.Operation == "go_copy")
		}); row != nil {
			c.notef("node%d: memcpy_rate from Go's copy: the report has no C library memcpy row", node)
		}
	}
	if row == nil {
		c.notef("node%d: no host_memcpy row: memcpy_rate keeps its value", node)
	} else if err := c.solve(gi, row, at+"memcpy_rate", row.Median*1e9/20, row.Median*1e9*20, rateText); err != nil {
		return err
	}
	if row := pick(g, true, size, is(probe.FamilyHostMemcpy, "pageable", "h2h", "stream_out")); row == nil {
		c.notef("node%d: no host_memcpy stream_out row: stream_rate keeps its value", node)
	} else if err := c.solve(gi, row, at+"stream_rate", row.Median*1e9/20, row.Median*1e9*20, rateText); err != nil {
		return err
	}
	return nil
}

// text turns a bisection point into the parameter's value text.
type text func(x float64) string

func floatText(x float64) string { return strconv.FormatFloat(round(x, 6), 'g', -1, 64) }
func rateText(x float64) string  { return strconv.FormatFloat(round(x/1e9, 5), 'g', -1, 64) + " GB/s" }
func timeText(x float64) string  { return sim.Time(math.Round(x * 1e12)).String() }

// round keeps digits significant digits of x.
func round(x float64, digits int) float64 {
	if x == 0 {
		return 0
	}
	p := math.Pow(10, float64(digits)-math.Ceil(math.Log10(math.Abs(x))))
	return math.Round(x*p) / p
}

// solve finds the value of the parameter at path, in [lo, hi], that
// makes the model's prediction of row equal its median, by bisection:
// every parameter solved here makes its row's value grow (rates,
// efficiencies) or shrink (costs) monotonically, which the ends tell.
// A row the model cannot reach inside the bounds leaves the parameter
// as it is, with a note.
func (c *calibrator) solve(gi int, row *probe.Measurement, path string, lo, hi float64, format text) error {
	return c.solveClamped(gi, row, path, lo, hi, format, false)
}

// solveClamped is solve; with clamp, a row beyond the bounds takes the
// nearer bound (with a note) instead of leaving the parameter as it is:
// for a cost the row says is below the model's resolution.
func (c *calibrator) solveClamped(gi int, row *probe.Measurement, path string, lo, hi float64, format text, clamp bool) error {
	id := RowID(gi, row)
	eval := func(x float64) (float64, error) {
		s, err := platform.Set(c.spec, path+".value", format(x))
		if err != nil {
			return 0, err
		}
		m, err := NewModel(s)
		if err != nil {
			return 0, err
		}
		defer m.Close()
		return m.Predict(gi, row)
	}
	target := row.Median
	atBound := false
	fLo, errLo := eval(lo)
	fHi, errHi := eval(hi)
	if err := errors.Join(errLo, errHi); err != nil {
		c.notef("%s: not calibrated: the model cannot compute row [%s]: %v", path, id, err)
		return nil
	}
	rising := fHi > fLo
	if (target-fLo)*(target-fHi) > 0 && clamp {
		bound := lo
		if math.Abs(target-fHi) < math.Abs(target-fLo) {
			bound = hi
		}
		c.notef("%s: at its bound %s: row [%s] measured %.4g %s, the model gives %.4g to %.4g over %s..%s",
			path, format(bound), id, target, row.Unit, fLo, fHi, format(lo), format(hi))
		lo, hi = bound, bound
		atBound = true
	} else if (target-fLo)*(target-fHi) > 0 {
		c.notef("%s: not calibrated: row [%s] measured %.4g %s, the model gives %.4g to %.4g over %s..%s: something else bounds it",
			path, id, target, row.Unit, fLo, fHi, format(lo), format(hi))
		return nil
	}
	for range 60 {
		mid := (lo + hi) / 2
		if format(mid) == format(lo) || format(mid) == format(hi) {
			break
		}
		f, err := eval(mid)
		if err != nil {
			return fmt.Errorf("calibrate %s: %w", path, err)
		}
		if (f < target) == rising {
			lo = mid
		} else {
			hi = mid
		}
	}
	x := (lo + hi) / 2
	old, err := current(c.spec, path)
	if err != nil {
		return err
	}
	src := c.source(gi, id, row)
	if atBound {
		// Not "calibrated from": the row is not reproduced, and
		// validate must not count it as a calibration row.
		src = fmt.Sprintf("bound of the bisection: %s (%s) measured %.6g %s for %s, beyond what the model reaches with this value",
			c.file, c.rep.Machine.Hostname, row.Median, row.Unit, id)
	}
	s, err := platform.Set(c.spec, path+".value", format(x))
	if err == nil {
		s, err = platform.Set(s, path+".source", src)
	}
	if err != nil {
		return fmt.Errorf("calibrate %s: %w", path, err)
	}
	c.spec = s
	c.changes = append(c.changes, Change{Path: path, Old: old, New: format(x), Row: id, Measured: row.Median, Unit: row.Unit, Source: src, AtBound: atBound})
	return nil
}

// source is a calibrated parameter's source: the report, its date, its
// machine and GPU, the row and what it measured.
func (c *calibrator) source(gi int, id string, row *probe.Measurement) string {
	gpuName := ""
	for _, g := range c.rep.GPUs {
		if g.Device.Ordinal == gi {
			gpuName = g.Device.Name
		}
	}
	date := "undated"
	if !c.rep.Started.IsZero() {
		date = c.rep.Started.UTC().Format("2006-01-02")
	}
	what := "median"
	if strings.HasPrefix(row.Method, "spin") {
		what = "median, copy-engine time without the per-call overhead"
	}
	return fmt.Sprintf("calibrated from %s (%s, %s, %s, driver %s) row [%s]: %.6g %s (%s), solved by bisection on the model's prediction of that row",
		c.file, date, c.rep.Machine.Hostname, gpuName, c.rep.Machine.DriverVersion, id, row.Median, row.Unit, what)
}

// current is a parameter's value as a platform file writes it, or
// "unset" when it is left to its default.
func current(s *platform.Spec, path string) (string, error) {
	v, err := platform.Get(s, path)
	if err != nil {
		return "", err
	}
	if v == "" {
		return "unset", nil
	}
	return v, nil
}

// DefaultBase is the preset a report is calibrated on when no platform
// is given, and why: the preset of the report's GPU where there is one.
func DefaultBase(rep *probe.Report) (preset, why string) {
	name := ""
	if len(rep.GPUs) > 0 {
		name = rep.GPUs[0].Device.Name
	}
	multi := max(len(rep.GPUs), rep.Machine.GPUCount) > 1
	switch {
	case strings.Contains(name, "H200"):
		return "h200-pcie", "the report's GPU is an H200: h200-pcie, the preset of the H200 machine"
	case strings.Contains(name, "H100") && multi:
		return "dgx-h100", "the report has several H100s: dgx-h100, the multi-H100 preset (eight SXM GPUs on NVSwitch; a platform from platform from-topo fits other layouts better)"
	case strings.Contains(name, "H100"):
		return "h200-pcie", "the report's GPU is one H100: h200-pcie, the one-GPU Hopper preset on PCIe Gen5 x16, is the closest (dgx-h100 is eight SXM GPUs on NVSwitch); its VRAM size and bandwidth are the H200's and are not calibrated: edit them, or start from platform from-topo"
	case strings.Contains(name, "Orin"):
		return "jetson-orin", "the report's GPU is an Orin: jetson-orin"
	case strings.Contains(name, "TX2"), strings.Contains(name, "Tegra X2"):
		return "jetson-tx2", "the report's GPU is a TX2: jetson-tx2"
	}
	return "h200-pcie", fmt.Sprintf("no preset for %q: h200-pcie, the measured machine's preset, as a discrete GPU on PCIe; check its structure against the machine (platform from-topo)", name)
}
