package calib

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"

	"github.com/dmalab/dmalab/hw/probe"
	"github.com/dmalab/dmalab/platform"
)

// ValidateSchema names the JSON layout of a Validation.
const ValidateSchema = "dmalab.validate/v1"

// RowResult is one probe row beside the model's value for it.
type RowResult struct {
	// Row is the row's RowID.
	Row       string  `json:"row"`
	GPU       int     `json:"gpu"`
	Family    string  `json:"family"`
	Path      string  `json:"path"`
	Direction string  `json:"direction,omitempty"`
	Operation string  `json:"operation,omitempty"`
	SizeBytes int64   `json:"size_bytes"`
	Unit      string  `json:"unit"`
	Class     Class   `json:"class"`
	Measured  float64 `json:"measured"`
	// Model and ErrorPct are absent when the model cannot compute the
	// row; NotModelled then says why. ErrorPct is (model - measured) /
	// measured in percent: positive when the model is high.
	Model    *float64 `json:"model,omitempty"`
	ErrorPct *float64 `json:"error_pct,omitempty"`
	// Calibration marks a row a parameter of the platform was
	// calibrated from: its error says only that the fit worked, and it
	// is left out of the medians.
	Calibration bool   `json:"calibration"`
	NotModelled string `json:"not_modelled,omitempty"`
}

// ClassSummary is the median absolute error of a class's rows, those
// used for calibration and those not modelled left out.
type ClassSummary struct {
	Class Class `json:"class"`
	// Rows is how many rows the median is over; MedianAbsErrorPct is
	// absent when there are none.
	Rows              int      `json:"rows"`
	MedianAbsErrorPct *float64 `json:"median_abs_error_pct,omitempty"`
	CalibrationRows   int      `json:"calibration_rows"`
	NotModelledRows   int      `json:"not_modelled_rows"`
	// Exceeds is set when a --max-error was given and the median is
	// above it.
	Exceeds bool `json:"exceeds"`
}

// Validation is validate's result: every row, then the classes.
type Validation struct {
	Schema   string `json:"schema"`
	Probe    string `json:"probe"`
	Platform string `json:"platform"`
	// MaxErrorPct is the --max-error bound, absent when none was given.
	MaxErrorPct *float64       `json:"max_error_pct,omitempty"`
	Rows        []RowResult    `json:"rows"`
	Classes     []ClassSummary `json:"classes"`
}

// Exceeded says whether a class's median is above the bound.
func (v *Validation) Exceeded() bool {
	return slices.ContainsFunc(v.Classes, func(c ClassSummary) bool { return c.Exceeds })
}

// Validate runs the model of spec for every row of rep and compares.
// probeFile is the report's file name: rows that spec's sources say were
// calibrated from a file of that base name are marked as calibration
// rows, and so are those named in extra (RowIDs). maxErr, when not nil,
// sets each class's Exceeds.
func Validate(rep *probe.Report, probeFile string, spec *platform.Spec, extra []string, maxErr *float64) (*Validation, error) {
	m, err := NewModel(spec)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	used := CalibrationRows(spec, probeFile)
	for _, id := range extra {
		used[id] = true
	}
	v := &Validation{Schema: ValidateSchema, Probe: filepath.Base(probeFile), Platform: spec.Name, MaxErrorPct: maxErr, Rows: []RowResult{}}
	for _, g := range rep.GPUs {
		for i := range g.Measurements {
			meas := &g.Measurements[i]
			r := RowResult{
				Row: RowID(g.Device.Ordinal, meas), GPU: g.Device.Ordinal,
				Family: meas.Family, Path: meas.Path, Direction: meas.Direction, Operation: meas.Operation,
				SizeBytes: meas.SizeBytes, Unit: meas.Unit, Class: ClassOf(meas), Measured: meas.Median,
			}
			r.Calibration = used[r.Row]
			x, err := m.Predict(g.Device.Ordinal, meas)
			switch {
			case errors.Is(err, ErrNotModelled):
				r.NotModelled = notModelledReason(err)
			case err != nil:
				r.NotModelled = "the model failed: " + err.Error()
			case meas.Median == 0 || math.IsNaN(x) || math.IsInf(x, 0):
				r.NotModelled = fmt.Sprintf("no error against a measured %g", meas.Median)
				r.Model = &x
			default:
				e := (x - meas.Median) / meas.Median * 100
				r.Model, r.ErrorPct = &x, &e
			}
			v.Rows = append(v.Rows, r)
		}
	}
	for _, c := range Classes() {
		s := ClassSummary{Class: c}
		var errs []float64
		for _, r := range v.Rows {
			switch {
			case r.Class != c:
			case r.Calibration:
				s.CalibrationRows++
			case r.ErrorPct == nil:
				s.NotModelledRows++
			default:
				errs = append(errs, math.Abs(*r.ErrorPct))
			}
		}
		s.Rows = len(errs)
		if len(errs) > 0 {
			med := median(errs)
			s.MedianAbsErrorPct = &med
			s.Exceeds = maxErr != nil && med > *maxErr
		}
		v.Classes = append(v.Classes, s)
	}
	return v, nil
}

// notModelledReason is the reason after the sentinel's text.
func notModelledReason(err error) string {
	s := err.Error()
	prefix := ErrNotModelled.Error() + ": "
	if i := len(prefix); len(s) > i && s[:i] == prefix {
		return s[i:]
	}
	return s
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// calibratedRE matches the sources Calibrate writes:
// calibrated from FILE (DATE, HOST, GPU) row [ROW]: VALUE.
var calibratedRE = regexp.MustCompile(`calibrated from (\S+) \(.*?\) row \[([^\]]+)\]`)

// CalibrationRows returns the RowIDs that spec's parameter sources say
// were calibrated from a probe file of probeFile's base name.
func CalibrationRows(spec *platform.Spec, probeFile string) map[string]bool {
	base := filepath.Base(probeFile)
	out := map[string]bool{}
	for _, src := range Sources(spec) {
		for _, m := range calibratedRE.FindAllStringSubmatch(src, -1) {
			if filepath.Base(m[1]) == base {
				out[m[2]] = true
			}
		}
	}
	return out
}

// Sources lists the source of every parameter of spec.
func Sources(spec *platform.Spec) []string {
	var out []string
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Struct:
			if f := v.FieldByName("Source"); f.IsValid() && f.Kind() == reflect.String && v.FieldByName("V").IsValid() {
				if s := f.String(); s != "" {
					out = append(out, s)
				}
				return
			}
			for i := range v.NumField() {
				if v.Type().Field(i).IsExported() {
					walk(v.Field(i))
				}
			}
		case reflect.Slice, reflect.Array:
			for i := range v.Len() {
				walk(v.Index(i))
			}
		}
	}
	walk(reflect.ValueOf(spec))
	return out
}
