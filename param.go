package dmalab

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/report"
	"github.com/dmalab/dmalab/sim"
)

// ParamKind is the type of a scenario parameter's value.
type ParamKind uint8

// Parameter kinds.
const (
	// ParamString is any text; Param.Check, when set, validates it.
	ParamString ParamKind = iota
	// ParamInt is a decimal integer from Param.Min to Param.Max (no
	// upper bound when Max is 0).
	ParamInt
	// ParamSize is a positive byte count with units (4KiB, 1.5GB), at
	// most Param.Max bytes when Max is not 0.
	ParamSize
	// ParamSizes is comma-separated sizes, each as ParamSize.
	ParamSizes
	// ParamEnum is one of Param.Values.
	ParamEnum
	// ParamList is comma-separated values, each one of Param.Values, in
	// the order given, duplicates dropped, at least one.
	ParamList
	// ParamFloats is comma-separated numbers above 0, each at most
	// Param.Max when Max is not 0.
	ParamFloats
	// ParamBool is true or false (as strconv.ParseBool).
	ParamBool
	// ParamDuration is a time with units (500ns, 20us, 1.5ms), not
	// negative.
	ParamDuration
)

// Param is one scenario parameter, set with --set name=value. Its value is
// parsed once, before the run; a bad value is a usage error naming the
// parameter and the value.
type Param struct {
	Name    string
	Kind    ParamKind
	Default string
	Help    string
	// Min and Max bound an integer, a size or a number (see the kinds).
	// Counts and sizes that decide how much the model allocates carry an
	// upper bound, so that a typo cannot ask for terabytes.
	Min, Max int64
	// Values are the values an enum or a list accepts.
	Values []string
	// Item names one element of a list in messages ("path", "mode").
	Item string
	// Word is a keyword accepted in place of a value (node=gpu,
	// vram=platform); Values.IsWord tells whether it was given.
	Word string
	// Check, when set, validates the text further.
	Check func(string) error
}

// parse turns text into the parameter's typed value.
func (p *Param) parse(s string) (any, error) {
	if p.Word != "" && s == p.Word {
		return nil, nil
	}
	if p.Check != nil {
		if err := p.Check(s); err != nil {
			return nil, err
		}
	}
	switch p.Kind {
	case ParamString:
		return s, nil
	case ParamInt:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < p.Min || p.Max != 0 && n > p.Max {
			return nil, p.intWant(s)
		}
		return int(n), nil
	case ParamSize:
		return p.size(s)
	case ParamSizes:
		var out []int64
		for _, f := range strings.Split(s, ",") {
			f = strings.TrimSpace(f)
			if f == "" {
				continue
			}
			n, err := p.size(f)
			if err != nil {
				return nil, err
			}
			out = append(out, n)
		}
		if len(out) == 0 {
			return nil, errors.New("no sizes")
		}
		return out, nil
	case ParamEnum:
		if !slices.Contains(p.Values, s) {
			if p.Item != "" {
				return nil, fmt.Errorf("unknown %s %q (%ss: %s)", p.Item, s, p.Item, strings.Join(p.Values, ", "))
			}
			return nil, fmt.Errorf("want one of %s, got %q", strings.Join(p.Values, ", "), s)
		}
		return s, nil
	case ParamList:
		var out []string
		for _, f := range strings.Split(s, ",") {
			f = strings.TrimSpace(f)
			if f == "" {
				continue
			}
			if !slices.Contains(p.Values, f) {
				return nil, fmt.Errorf("unknown %s %q (known: %s)", p.item(), f, strings.Join(p.Values, ", "))
			}
			if !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("no %ss", p.item())
		}
		return out, nil
	case ParamFloats:
		var out []float64
		for _, f := range strings.Split(s, ",") {
			f = strings.TrimSpace(f)
			if f == "" {
				continue
			}
			r, err := strconv.ParseFloat(f, 64)
			if err != nil || !(r > 0) || p.Max != 0 && r > float64(p.Max) {
				if p.Max != 0 {
					return nil, fmt.Errorf("%s %q: want a number above 0, at most %d", p.item(), f, p.Max)
				}
				return nil, fmt.Errorf("%s %q: want a number above 0", p.item(), f)
			}
			out = append(out, r)
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("no %ss", p.item())
		}
		return out, nil
	case ParamBool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return nil, fmt.Errorf("want true or false, got %q", s)
		}
		return b, nil
	case ParamDuration:
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 || d.Nanoseconds() > math.MaxInt64/int64(sim.Nanosecond) {
			// The last: sim.Time counts picoseconds, about 106 days.
			return nil, fmt.Errorf("want a time with units (20us, 1.5ms), at most about 106 days, got %q", s)
		}
		return sim.Time(d.Nanoseconds()) * sim.Nanosecond, nil
	}
	return nil, fmt.Errorf("parameter %s: unknown kind %d", p.Name, p.Kind)
}

func (p *Param) item() string {
	if p.Item != "" {
		return p.Item
	}
	return "value"
}

func (p *Param) intWant(s string) error {
	switch {
	case p.Max != 0:
		return fmt.Errorf("want an integer from %d to %d, got %q", p.Min, p.Max, s)
	case p.Min == 0:
		return fmt.Errorf("want a non-negative integer, got %q", s)
	case p.Min == 1:
		return fmt.Errorf("want a positive integer, got %q", s)
	}
	return fmt.Errorf("want an integer of at least %d, got %q", p.Min, s)
}

func (p *Param) size(s string) (int64, error) {
	n, err := platform.ParseBytes(s)
	if err != nil {
		return 0, err
	}
	if n <= 0 {
		return 0, fmt.Errorf("size %q: must be positive", s)
	}
	if p.Max != 0 && int64(n) > p.Max {
		return 0, fmt.Errorf("size %q: at most %s", s, report.FormatBytes(p.Max))
	}
	return int64(n), nil
}

// Values are a run's parameters, parsed: the text of each (defaults
// filled in), its typed value, and which ones the user set.
type Values struct {
	text     map[string]string
	val      map[string]any
	kind     map[string]ParamKind
	explicit map[string]bool
}

// setting is a parameter the user set: its text and its parsed value.
type setting struct {
	text  string
	value any
}

// parseParams gives every parameter of params its value: the one the
// user set, parsed already, else its default, parsed here. A bad default
// is the scenario's bug, not the user's.
func parseParams(scenario string, params []Param, set map[string]setting) (*Values, error) {
	v := &Values{text: map[string]string{}, val: map[string]any{}, kind: map[string]ParamKind{}, explicit: map[string]bool{}}
	for i := range params {
		p := &params[i]
		st, ok := set[p.Name]
		if !ok {
			x, err := p.parse(p.Default)
			if err != nil {
				return nil, fmt.Errorf("scenario %s: parameter %s: default %q: %w", scenario, p.Name, p.Default, err)
			}
			st = setting{p.Default, x}
		}
		v.text[p.Name], v.val[p.Name], v.kind[p.Name], v.explicit[p.Name] = st.text, st.value, p.Kind, ok
	}
	return v, nil
}

// get returns the value of parameter name, which must be of kind k: a
// scenario asking for a parameter it did not declare, or as another
// kind, is a programming error.
func (v *Values) get(name string, k ParamKind) any {
	got, ok := v.kind[name]
	if !ok {
		panic(fmt.Sprintf("dmalab: no parameter %q", name))
	}
	if got != k {
		panic(fmt.Sprintf("dmalab: parameter %q is of kind %d, read as %d", name, got, k))
	}
	x := v.val[name]
	if x == nil {
		panic(fmt.Sprintf("dmalab: parameter %q holds its keyword %q (check IsWord first)", name, v.text[name]))
	}
	return x
}

// Text is a parameter's text, as given or defaulted.
func (v *Values) Text(name string) string {
	if _, ok := v.kind[name]; !ok {
		panic(fmt.Sprintf("dmalab: no parameter %q", name))
	}
	return v.text[name]
}

// Explicit says whether the user set the parameter.
func (v *Values) Explicit(name string) bool { return v.explicit[name] }

// IsWord says whether the parameter holds its keyword (Param.Word)
// instead of a value.
func (v *Values) IsWord(name string) bool {
	return v.val[name] == nil && v.kind[name] != ParamString
}

// Value is a string or enum parameter's value.
func (v *Values) Value(name string) string {
	if v.kind[name] == ParamEnum {
		return v.get(name, ParamEnum).(string)
	}
	return v.get(name, ParamString).(string)
}

// Int is an integer parameter's value.
func (v *Values) Int(name string) int { return v.get(name, ParamInt).(int) }

// Size is a size parameter's value in bytes.
func (v *Values) Size(name string) int64 { return v.get(name, ParamSize).(int64) }

// Sizes is a size-list parameter's value in bytes.
func (v *Values) Sizes(name string) []int64 {
	return slices.Clone(v.get(name, ParamSizes).([]int64))
}

// List is a list parameter's values.
func (v *Values) List(name string) []string {
	return slices.Clone(v.get(name, ParamList).([]string))
}

// Floats is a number-list parameter's values.
func (v *Values) Floats(name string) []float64 {
	return slices.Clone(v.get(name, ParamFloats).([]float64))
}

// Bool is a boolean parameter's value.
func (v *Values) Bool(name string) bool { return v.get(name, ParamBool).(bool) }

// Duration is a duration parameter's value.
func (v *Values) Duration(name string) sim.Time { return v.get(name, ParamDuration).(sim.Time) }
