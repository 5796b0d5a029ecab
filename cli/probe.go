package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"

	"github.com/dmalab/dmalab/hw/cuda"
	"github.com/dmalab/dmalab/hw/numa"
	"github.com/dmalab/dmalab/hw/probe"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/report"
)

func init() {
	register(&command{name: "probe", summary: "measure every CPU<->GPU data path on this machine's NVIDIA GPUs", run: runProbe})
}

func runProbe(e *env, args []string) int {
	fs := newFlags(e, "probe", "probe [--gpu N] [--sizes LIST] [--families LIST] [--json | --csv | --format table|json|csv|nvbandwidth] [--html FILE] | probe --numa [--numa-buffer SIZE] [--numa-nodes LIST] [--json]",
		`Measures the data paths of each NVIDIA GPU through the CUDA driver (libcuda.so.1,
loaded at run time: no cgo, no CUDA toolkit needed): copy-engine copies from
pinned, pageable, write-combined and registered host memory, device and peer
copies, SM copies over mapped (zero-copy) memory, per-call times of small
synchronous copies, latencies, host memcpy, pinning cost, unified memory
(first touch, prefetch, fault-driven migration, per-fault latency and the
driver's prefetch pattern, CPU fault-back, remote access) and capabilities.
Path and direction names are those of "dmalab run transfers", so the model
and the hardware print side by side.

Method: warm-up, then repetitions timed with CUDA events behind a spin kernel
(nvbandwidth's method) or, for synchronous paths, host timers; at least 3
samples, median, min and max; every buffer verified after the copy.
A bidirectional copy is measured twice: with equal work both ways (the row's
value: both directions' bytes over the whole span) and, per direction, as
nvbandwidth measures it (the other direction given twice the work, so that it
interferes for the whole measured span): per_direction h2d and d2h are
nvbandwidth's, h2d_same_size and d2h_same_size the equal-work ones, where the
slower direction finishes alone and reads higher.
--format nvbandwidth writes the copy-engine and SM results and the
pointer-chase latencies (host_device_latency_sm and, with peers,
device_to_device_latency_sm, ns) in nvbandwidth's JSON layout. --html writes the bandwidth measurements against
size as a page to open in a browser (with --input, those of a saved report).
Without a driver or a GPU it exits 2 at once.

--numa measures the NUMA nodes instead, with no GPU and no driver, in the
manner of Intel's Memory Latency Checker: per pair of a CPU node and a
memory node, the idle load latency (a pointer chase through a random
cycle over a buffer bound to the memory node with mbind) and the read
bandwidth (threads pinned to the CPU node's CPUs); where each buffer's
pages are and where first touch put a thread's pages (move_pages). The
nodes print as numactl -H. A one-node machine gives one row and column;
a call the kernel refuses (EPERM, ENOSYS) is said in the notes, and the
rest is still measured.`)
	gpu := fs.Int("gpu", -1, "probe only GPU `N` (default: every GPU)")
	sizes := fs.String("sizes", "", "copy sizes of the sweep, comma-separated with units, 4KiB..1GiB (default "+joinSizes(probe.DefaultSizes)+")")
	small := fs.String("small-sizes", "", "sizes of the per-call synchronous copies, 1B..64KiB (default "+joinSizes(probe.DefaultSmallSizes)+")")
	families := fs.String("families", "", "measurement families, comma-separated (default all: "+strings.Join(probe.Families, ",")+"; opt-in: "+strings.Join(probe.OptInFamilies, ",")+")")
	samples := fs.Int("samples", 3, "samples per measurement (at least 3)")
	asJSON := fs.Bool("json", false, "print one JSON document (same as --format json)")
	format := fs.String("format", "table", "output format: table, json, csv or nvbandwidth")
	asCSV := fs.Bool("csv", false, "print every measurement as a CSV line (same as --format csv)")
	input := fs.String("input", "", "print the saved report in `FILE` (from --json) instead of measuring")
	htmlPath := fs.String("html", "", htmlFlagHelp)
	numaProbe := fs.Bool("numa", false, "measure the NUMA nodes (latency and bandwidth per node pair, first touch) instead of GPUs")
	numaBuffer := fs.String("numa-buffer", "", "with --numa: the buffer per memory node, well beyond the last-level cache (default "+platform.Bytes(numa.DefaultBuffer).String()+")")
	numaNodes := fs.String("numa-nodes", "", "with --numa: the node IDs to measure, comma-separated (default every node)")
	pos, code, stop := parseArgs(e, fs, args)
	if stop {
		return code
	}
	if len(pos) > 0 {
		return usageError(e, "probe", "takes no arguments, got %q", pos)
	}
	if *asJSON && *asCSV {
		return usageError(e, "probe", "--json and --csv: choose one")
	}
	if *asJSON {
		*format = "json"
	}
	if *asCSV {
		*format = "csv"
	}
	if *numaProbe {
		if *htmlPath != "" {
			return usageError(e, "probe", "--html does not draw --numa reports yet")
		}
		return runNUMAProbe(e, fs, *format, *samples, *numaBuffer, *numaNodes, *input)
	}
	if *numaBuffer != "" || *numaNodes != "" {
		return usageError(e, "probe", "--numa-buffer and --numa-nodes go with --numa")
	}
	if *format != "table" && *format != "json" && *format != "csv" && *format != "nvbandwidth" {
		return usageError(e, "probe", "--format %q: want table, json, csv or nvbandwidth", *format)
	}
	opts := probe.Options{Samples: *samples}
	var err error
	if opts.Sizes, err = parseSizeList(*sizes); err != nil {
		return usageError(e, "probe", "--sizes: %v", err)
	}
	if opts.SmallSizes, err = parseSizeList(*small); err != nil {
		return usageError(e, "probe", "--small-sizes: %v", err)
	}
	if *families != "" {
		opts.Families = strings.Split(*families, ",")
	}
	if *gpu >= 0 {
		opts.GPUs = []int{*gpu}
	} else if *gpu != -1 {
		return usageError(e, "probe", "--gpu %d: want a GPU ordinal (0, 1, ...)", *gpu)
	}
	if e.isTerminal {
		opts.Progress = e.stderr
	}

	if *input != "" {
		f, err := os.Open(*input)
		if err != nil {
			return usageError(e, "probe", "--input: %v", err)
		}
		defer f.Close()
		rep, err := probe.ReadJSON(f)
		if err != nil {
			return usageError(e, "probe", "--input %s: %v", *input, err)
		}
		if code := writeProbeHTML(e, *htmlPath, rep, args); code != exitOK {
			return code
		}
		return writeProbe(e, rep, *format, nil)
	}
	drv, err := probe.OpenCUDA()
	if err != nil {
		return probeUnavailable(e, err)
	}
	defer drv.Close()
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	rep, err := probe.Run(ctx, drv, opts)
	switch {
	case errors.Is(err, probe.ErrBadOptions):
		return usageError(e, "probe", "%v", err)
	case errors.Is(err, cuda.ErrNoDriver), errors.Is(err, cuda.ErrNoDevice):
		return probeUnavailable(e, err)
	}
	if code := writeProbeHTML(e, *htmlPath, rep, args); code != exitOK {
		return code
	}
	return writeProbe(e, rep, *format, err)
}

// writeProbeHTML writes the --html report of a probe, when asked for.
func writeProbeHTML(e *env, path string, rep *probe.Report, args []string) int {
	if path == "" || rep == nil {
		return exitOK
	}
	res := probeResult(rep)
	note := fmt.Sprintf("Measured on %s (%s, driver %s, CUDA %s) from %s: the median of each measurement's samples, with their range.",
		rep.Machine.Hostname, rep.Machine.CPU, rep.Machine.DriverVersion, rep.Machine.CUDAVersion, rep.Started.UTC().Format("2006-01-02 15:04 MST"))
	if err := WriteHTMLReport(path, "dmalab probe on "+res.Platform, commandLine("probe", args), res, nil, note); err != nil {
		return usageError(e, "probe", "--html: %v", err)
	}
	return exitOK
}

// measurementsTable is every measurement of a probe report as a table
// (--csv): a line per GPU and measurement, its statistics in its unit.
func measurementsTable(rep *probe.Report) *report.Table {
	t := &report.Table{}
	for _, name := range []string{"gpu", "family", "operation", "path", "direction", "size_bytes", "method", "samples", "unit", "median", "min", "max"} {
		t.Columns = append(t.Columns, report.Column{Name: name})
	}
	num := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	for _, g := range rep.GPUs {
		for _, m := range g.Measurements {
			t.AddRow(strconv.Itoa(g.Device.Ordinal), m.Family, m.Operation, m.Path, m.Direction, strconv.FormatInt(m.SizeBytes, 10),
				m.Method, strconv.Itoa(m.Samples), m.Unit, num(m.Median), num(m.Min), num(m.Max))
		}
	}
	return t
}

// writeProbe prints what was measured, then reports runErr: failed
// families (a verification failure among them) are findings.
func writeProbe(e *env, rep *probe.Report, format string, runErr error) int {
	if rep != nil {
		var err error
		switch format {
		case "json":
			err = rep.WriteJSON(e.stdout)
		case "nvbandwidth":
			err = rep.WriteNVBandwidth(e.stdout)
		case "csv":
			err = measurementsTable(rep).WriteCSV(e.stdout)
		default:
			err = rep.WriteTable(e.stdout)
		}
		if err != nil {
			fmt.Fprintf(e.stderr, "dmalab probe: %v\n", err)
			return exitFindings
		}
	}
	if runErr != nil {
		fmt.Fprintf(e.stderr, "dmalab probe: %v\n", runErr)
		return exitFindings
	}
	return exitOK
}

// probeUnavailable explains a missing driver or GPU and returns exitUsage.
func probeUnavailable(e *env, err error) int {
	switch {
	case errors.Is(err, cuda.ErrNoDriver):
		return usageError(e, "probe", "no NVIDIA driver: %v (libcuda.so.1 is installed with the NVIDIA driver; \"dmalab run\" models GPUs without one)", err)
	case errors.Is(err, cuda.ErrNoDevice):
		return usageError(e, "probe", "the NVIDIA driver sees no GPU: %v", err)
	}
	fmt.Fprintf(e.stderr, "dmalab probe: %v\n", err)
	return exitFindings
}

func parseSizeList(s string) ([]int64, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []int64
	for _, f := range strings.Split(s, ",") {
		n, err := platform.ParseBytes(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, int64(n))
	}
	return out, nil
}

func joinSizes(ns []int64) string {
	var s []string
	for _, n := range ns {
		s = append(s, platform.Bytes(n).String())
	}
	return strings.Join(s, ",")
}

// runNUMAProbe is probe --numa: the NUMA nodes of this machine, no GPU.
func runNUMAProbe(e *env, fs *flag.FlagSet, format string, samples int, buffer, nodes, input string) int {
	var gpuFlags []string
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "gpu", "sizes", "small-sizes", "families":
			gpuFlags = append(gpuFlags, "--"+f.Name)
		}
	})
	if len(gpuFlags) > 0 {
		return usageError(e, "probe", "--numa measures no GPU: %s do not apply", strings.Join(gpuFlags, ", "))
	}
	if format != "table" && format != "json" {
		return usageError(e, "probe", "--numa --format %q: want table or json", format)
	}
	if input != "" {
		f, err := os.Open(input)
		if err != nil {
			return usageError(e, "probe", "--input: %v", err)
		}
		defer f.Close()
		rep, err := numa.ReadJSON(f)
		if err != nil {
			return usageError(e, "probe", "--input %s: %v", input, err)
		}
		return writeNUMA(e, rep, format, nil)
	}
	opts := numa.Options{Samples: samples}
	if buffer != "" {
		n, err := platform.ParseBytes(buffer)
		if err != nil {
			return usageError(e, "probe", "--numa-buffer: %v", err)
		}
		opts.BufferBytes = int64(n)
	}
	if nodes != "" {
		opts.Nodes = []int{}
		for _, f := range strings.Split(nodes, ",") {
			id, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || id < 0 {
				return usageError(e, "probe", "--numa-nodes: %q is not a node ID", f)
			}
			opts.Nodes = append(opts.Nodes, id)
		}
	}
	if e.isTerminal {
		opts.Progress = e.stderr
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	rep, err := numa.Run(ctx, opts)
	if errors.Is(err, numa.ErrBadOptions) {
		return usageError(e, "probe", "%v", err)
	}
	if rep == nil {
		return usageError(e, "probe", "%v", err)
	}
	return writeNUMA(e, rep, format, err)
}

// writeNUMA prints a NUMA report, then runErr (an interrupted run).
func writeNUMA(e *env, rep *numa.Report, format string, runErr error) int {
	var err error
	if format == "json" {
		err = rep.WriteJSON(e.stdout)
	} else {
		err = rep.WriteTable(e.stdout)
	}
	if err == nil {
		err = runErr
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "dmalab probe: %v\n", err)
		return exitFindings
	}
	return exitOK
}
