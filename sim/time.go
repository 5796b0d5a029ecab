package sim

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Time is virtual time, and durations of it, as an integer count of
// picoseconds. An int64 of picoseconds spans ±106 days, far beyond any run.
type Time int64

// Units of Time.
const (
	Picosecond  Time = 1
	Nanosecond       = 1000 * Picosecond
	Microsecond      = 1000 * Nanosecond
	Millisecond      = 1000 * Microsecond
	Second           = 1000 * Millisecond
)

// Forever is later than any event; RunUntil(Forever) is Run.
const Forever Time = math.MaxInt64

// Seconds returns t in seconds.
func (t Time) Seconds() float64 { return float64(t) / float64(Second) }

// FromSeconds converts seconds to Time, rounding to the nearest picosecond.
func FromSeconds(s float64) Time { return Time(math.Round(s * float64(Second))) }

// TransferTime is how long bytes take at rate bytes per second, rounded up
// to a whole picosecond so that a transfer never finishes early.
func TransferTime(bytes, rate float64) Time {
	if bytes <= 0 {
		return 0
	}
	return Time(math.Ceil(bytes / rate * float64(Second)))
}

var units = []struct {
	name string
	t    Time
}{{"s", Second}, {"ms", Millisecond}, {"us", Microsecond}, {"ns", Nanosecond}, {"ps", Picosecond}}

// String formats t exactly, in the largest unit that keeps it readable:
// "6.6us", "150ns", "1.5s", "3ps". ParseTime reads it back to the same value.
func (t Time) String() string {
	if t == 0 {
		return "0s"
	}
	sign, u := "", uint64(t)
	if t < 0 {
		sign, u = "-", uint64(-t)
	}
	for _, un := range units {
		if u >= uint64(un.t) || un.t == Picosecond {
			whole, frac := u/uint64(un.t), u%uint64(un.t)
			s := strconv.FormatUint(whole, 10)
			if frac != 0 {
				digits := len(strconv.FormatUint(uint64(un.t), 10)) - 1
				f := fmt.Sprintf("%0*d", digits, frac)
				s += "." + strings.TrimRight(f, "0")
			}
			return sign + s + un.name
		}
	}
	panic("unreachable")
}

// ErrBadTime is wrapped by every ParseTime error.
var ErrBadTime = errors.New("bad duration")

// ParseTime reads a duration such as "6.6us", "6.6µs", "150ns", "2 ms" or
// "0". The decimal is converted exactly: "6.6us" is 6600000 picoseconds, and
// a value that is not a whole number of picoseconds is an error.
func ParseTime(s string) (Time, error) {
	in := s
	s = strings.TrimSpace(s)
	if s == "0" {
		return 0, nil
	}
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	i := strings.IndexFunc(s, func(r rune) bool { return !(r >= '0' && r <= '9' || r == '.') })
	if i <= 0 {
		return 0, fmt.Errorf("%w %q: want a number and a unit (ps, ns, us, ms, s)", ErrBadTime, in)
	}
	num, unit := s[:i], strings.TrimSpace(s[i:])
	unit = strings.ReplaceAll(strings.ReplaceAll(unit, "µ", "u"), "μ", "u")
	var scale Time
	for _, un := range units {
		if un.name == unit {
			scale = un.t
		}
	}
	if scale == 0 {
		return 0, fmt.Errorf("%w %q: unknown unit %q (want ps, ns, us, ms or s)", ErrBadTime, in, unit)
	}
	v, err := scaleDecimal(num, int64(scale))
	if err != nil {
		return 0, fmt.Errorf("%w %q: %v", ErrBadTime, in, err)
	}
	if neg {
		v = -v
	}
	return Time(v), nil
}

// scaleDecimal returns the decimal string num times scale, exactly, or an
// error if the result is not an integer or overflows int64.
func scaleDecimal(num string, scale int64) (int64, error) {
	whole, frac, _ := strings.Cut(num, ".")
	if whole == "" && frac == "" || strings.Contains(frac, ".") {
		return 0, errors.New("malformed number")
	}
	var v int64
	mul := func(a, b int64) (int64, bool) {
		if a != 0 && (a*b)/a != b {
			return 0, false
		}
		return a * b, true
	}
	for _, c := range whole {
		var ok bool
		if v, ok = mul(v, 10); !ok {
			return 0, errors.New("too large")
		}
		v += int64(c - '0')
	}
	v, ok := mul(v, scale)
	if !ok || v < 0 {
		return 0, errors.New("too large")
	}
	place := scale
	for _, c := range frac {
		d := int64(c - '0')
		if place < 10 {
			if d != 0 {
				return 0, errors.New("finer than one picosecond")
			}
			continue
		}
		place /= 10
		v += d * place
		if v < 0 {
			return 0, errors.New("too large")
		}
	}
	return v, nil
}
