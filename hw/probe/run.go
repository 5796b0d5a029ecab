package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/dmalab/dmalab/hw/cuda"
)

// ErrBadOptions is wrapped by every error about Options (bad usage).
var ErrBadOptions = errors.New("probe: bad options")

// ErrSpinTimeout is wrapped when a spin kernel ended by its timeout: the
// host took longer than Options.SpinTimeout to queue a sample's work, so the
// sample would have included enqueue time and is void.
var ErrSpinTimeout = errors.New("probe: spin kernel timed out before release")

// Size limits of Options.Sizes and Options.SmallSizes.
const (
	MinSize      = 4 << 10
	MaxSize      = 1 << 30
	MinSmallSize = 1
	MaxSmallSize = 64 << 10
	// MaxSamples bounds Options.Samples, and MaxSizes the length of each
	// size list: every sample of every size is real GPU time, and a
	// thousand of either is hours of it.
	MaxSamples = 1000
	MaxSizes   = 1000
)

// Defaults.
var (
	// DefaultSizes is the copy-engine size sweep; its largest size is the
	// size of every other bandwidth measurement.
	DefaultSizes = []int64{64 << 10, 1 << 20, 16 << 20, 256 << 20}
	// DefaultSmallSizes are the sizes of the per-call synchronous copies.
	DefaultSmallSizes = []int64{8, 512, 4 << 10, 64 << 10}
)

// Options control Run. The zero value measures everything on every GPU with
// the defaults.
type Options struct {
	// GPUs are the ordinals to probe; nil probes all.
	GPUs []int
	// Sizes is the copy-engine sweep (MinSize..MaxSize); the largest is
	// used for every other bandwidth measurement.
	Sizes []int64
	// SmallSizes are the per-call synchronous copy sizes (1 B..64 KiB).
	SmallSizes []int64
	// Samples per measurement (at least 3), Warmup untimed operations
	// before each sample, Repetitions timed operations per sample of a
	// large copy (small copies repeat more, up to maxReps).
	Samples, Warmup, Repetitions int
	// Families selects measurement families by name (see Families); nil
	// selects all.
	Families []string
	// SpinTimeout bounds how long a spin kernel holds a stream.
	SpinTimeout time.Duration
	// Progress, if not nil, receives one line per measurement.
	Progress io.Writer
}

func (o Options) withDefaults() (Options, error) {
	if o.Sizes == nil {
		o.Sizes = DefaultSizes
	}
	if o.SmallSizes == nil {
		o.SmallSizes = DefaultSmallSizes
	}
	if o.Samples == 0 {
		o.Samples = 3
	}
	if o.Warmup == 0 {
		o.Warmup = 4
	}
	if o.Repetitions == 0 {
		o.Repetitions = 16
	}
	if o.SpinTimeout == 0 {
		o.SpinTimeout = 5 * time.Second
	}
	if o.Families == nil {
		o.Families = Families
	}
	var errs []error
	if len(o.Sizes) == 0 {
		errs = append(errs, errors.New("no sizes"))
	}
	if len(o.Sizes) > MaxSizes || len(o.SmallSizes) > MaxSizes {
		errs = append(errs, fmt.Errorf("%d sizes and %d small sizes: at most %d of each", len(o.Sizes), len(o.SmallSizes), MaxSizes))
	}
	for _, s := range o.Sizes {
		if s < MinSize || s > MaxSize {
			errs = append(errs, fmt.Errorf("size %d outside %d..%d", s, MinSize, MaxSize))
		}
	}
	for _, s := range o.SmallSizes {
		if s < MinSmallSize || s > MaxSmallSize {
			errs = append(errs, fmt.Errorf("small size %d outside %d..%d", s, MinSmallSize, MaxSmallSize))
		}
	}
	if o.Samples < 3 || o.Samples > MaxSamples {
		errs = append(errs, fmt.Errorf("samples %d: want 3..%d", o.Samples, MaxSamples))
	}
	if o.Warmup < 0 || o.Repetitions < 1 {
		errs = append(errs, fmt.Errorf("warmup %d, repetitions %d", o.Warmup, o.Repetitions))
	}
	for _, f := range o.Families {
		if !slices.Contains(Families, f) && !slices.Contains(OptInFamilies, f) {
			errs = append(errs, fmt.Errorf("unknown family %q (have %v, opt-in %v)", f, Families, OptInFamilies))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return o, fmt.Errorf("%w: %w", ErrBadOptions, err)
	}
	o.Sizes = slices.Clone(o.Sizes)
	slices.Sort(o.Sizes)
	o.Sizes = slices.Compact(o.Sizes)
	return o, nil
}

func (o Options) selected(family string) bool { return slices.Contains(o.Families, family) }

// headline is the size of every bandwidth measurement outside the sweep.
func (o Options) headline() int64 { return o.Sizes[len(o.Sizes)-1] }

// Run probes the GPUs of drv and returns the report. Without a driver it
// fails at once with an error matching cuda.ErrNoDriver; without a GPU, one
// matching cuda.ErrNoDevice. A family that fails is recorded in its GPU's
// Errors and the others still run; the returned error then joins every
// failure (data-verification failures match ErrVerify) and the report holds
// what was measured.
func Run(ctx context.Context, drv Driver, opts Options) (*Report, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	started := time.Now().UTC()
	machine, err := drv.Machine()
	if err != nil {
		return nil, fmt.Errorf("probe: %w", err)
	}
	n, err := drv.DeviceCount()
	if err != nil {
		return nil, fmt.Errorf("probe: %w", err)
	}
	if n == 0 {
		return nil, fmt.Errorf("probe: the driver sees no GPU: %w", cuda.ErrNoDevice)
	}
	machine.GPUCount = n
	gpus := opts.GPUs
	if gpus == nil {
		for i := range n {
			gpus = append(gpus, i)
		}
	}
	for _, g := range gpus {
		if g < 0 || g >= n {
			return nil, fmt.Errorf("%w: GPU %d: the machine has %d (%w)", ErrBadOptions, g, n, cuda.ErrNoDevice)
		}
	}
	rep := &Report{
		Schema: Schema, Started: started, Machine: machine,
		Options: ReportOpts{Sizes: opts.Sizes, SmallSizes: opts.SmallSizes, Samples: opts.Samples,
			Warmup: opts.Warmup, Repetitions: opts.Repetitions},
	}
	var errs []error
	for _, g := range gpus {
		var gr GPUReport
		err := drv.WithDevice(g, func(d Device) error {
			var err error
			gr, err = runGPU(ctx, d, opts)
			return err
		})
		if gr.Device.Name != "" {
			rep.GPUs = append(rep.GPUs, gr)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("GPU %d: %w", g, err))
		}
		if ctx.Err() != nil {
			break
		}
	}
	return rep, errors.Join(errs...)
}

// runGPU runs the selected families on one GPU.
func runGPU(ctx context.Context, d Device, opts Options) (GPUReport, error) {
	m := &meter{ctx: ctx, d: d, o: opts, src: newPattern(0xBAADF00D), dst: newPattern(0xCAFEBABE)}
	info := d.Info()
	m.gpu = info.Ordinal
	g := GPUReport{Device: info}
	free, _, err := d.MemInfo()
	if err != nil {
		return g, err
	}
	g.MemFreeBytes = free
	families := []struct {
		name string
		run  func(*GPUReport) error
	}{
		{FamilyCapabilities, m.capabilities},
		{FamilyCallOverhead, m.callOverhead},
		{FamilyLatency, m.latencyFamily},
		{FamilyCE, m.ceFamily},
		{FamilySM, m.smFamily},
		{FamilySync, m.syncFamily},
		{FamilyCallTime, m.callTimeFamily},
		{FamilyHostMemcpy, m.hostMemcpyFamily},
		{FamilyPin, m.pinFamily},
		{FamilyUnified, m.unifiedFamily},
		{FamilyRegcache, m.regcacheFamily},
	}
	var errs []error
	for _, f := range families {
		if !opts.selected(f.name) {
			continue
		}
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		if err := f.run(&g); err != nil {
			g.Errors = append(g.Errors, fmt.Sprintf("%s: %v", f.name, err))
			errs = append(errs, fmt.Errorf("%s: %w", f.name, err))
		}
	}
	return g, errors.Join(errs...)
}
