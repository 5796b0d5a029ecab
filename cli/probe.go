package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/dmalab/dmalab/hw/cuda"
	"github.com/dmalab/dmalab/hw/probe"
	"github.com/dmalab/dmalab/platform"
)

func init() {
	register(&command{name: "probe", summary: "measure every CPU<->GPU data path on this machine's NVIDIA GPUs", run: runProbe})
}

func runProbe(e *env, args []string) int {
	fs := newFlags(e, "probe", "probe [--gpu N] [--sizes LIST] [--families LIST] [--json | --format table|json|nvbandwidth]",
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
--format nvbandwidth writes the copy-engine and SM results in nvbandwidth's
JSON layout. Without a driver or a GPU it exits 2 at once.`)
	gpu := fs.Int("gpu", -1, "probe only GPU `N` (default: every GPU)")
	sizes := fs.String("sizes", "", "copy sizes of the sweep, comma-separated with units, 4KiB..1GiB (default "+joinSizes(probe.DefaultSizes)+")")
	small := fs.String("small-sizes", "", "sizes of the per-call synchronous copies, 1B..64KiB (default "+joinSizes(probe.DefaultSmallSizes)+")")
	families := fs.String("families", "", "measurement families, comma-separated (default all: "+strings.Join(probe.Families, ",")+"; opt-in: "+strings.Join(probe.OptInFamilies, ",")+")")
	samples := fs.Int("samples", 3, "samples per measurement (at least 3)")
	asJSON := fs.Bool("json", false, "print one JSON document (same as --format json)")
	format := fs.String("format", "table", "output format: table, json or nvbandwidth")
	input := fs.String("input", "", "print the saved report in `FILE` (from --json) instead of measuring")
	pos, code, stop := parseArgs(e, fs, args)
	if stop {
		return code
	}
	if len(pos) > 0 {
		return usageError(e, "probe", "takes no arguments, got %q", pos)
	}
	if *asJSON {
		*format = "json"
	}
	if *format != "table" && *format != "json" && *format != "nvbandwidth" {
		return usageError(e, "probe", "--format %q: want table, json or nvbandwidth", *format)
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
	return writeProbe(e, rep, *format, err)
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
