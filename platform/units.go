package platform

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"
)

// sizeUnits are the units ParseBytes accepts: B, the decimal (SI) units
// and the binary (IEC) ones. Case matters only where it must (b is not B).
var sizeUnits = []struct {
	name  string
	bytes int64
}{
	{"B", 1},
	{"KB", 1e3}, {"kB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"PB", 1e15},
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"PiB", 1 << 50},
}

const sizeUnitList = "B, KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB, PiB"

// Both number patterns refuse what strconv would also take (Inf, NaN,
// hex floats, underscores): a platform file holds plain decimals.
var (
	sizeNumber = regexp.MustCompile(`^[+-]?([0-9]+(\.[0-9]+)?|\.[0-9]+)`)
	realNumber = regexp.MustCompile(`^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?`)
	intNumber  = regexp.MustCompile(`^[+-]?[0-9]+$`)
)

// ParseBytes reads a size: "141 GiB", "80 GB", "64KiB", "4096" (bytes).
// Decimals are exact ("1.5 KiB" is 1536) and must come to a whole number
// of bytes.
func ParseBytes(s string) (Bytes, error) {
	t := strings.TrimSpace(s)
	num := sizeNumber.FindString(t)
	if num == "" || len(num) > 40 {
		return 0, fmt.Errorf("bad size %q: want a number and a unit (%s)", s, sizeUnitList)
	}
	unit := strings.TrimSpace(t[len(num):])
	scale := int64(0)
	if unit == "" {
		scale = 1
	}
	for _, u := range sizeUnits {
		if u.name == unit {
			scale = u.bytes
		}
	}
	if scale == 0 {
		return 0, fmt.Errorf("bad size %q: unknown unit %q (want %s)", s, unit, sizeUnitList)
	}
	r, ok := new(big.Rat).SetString(strings.TrimPrefix(num, "+"))
	if !ok {
		return 0, fmt.Errorf("bad size %q: malformed number", s)
	}
	r.Mul(r, new(big.Rat).SetInt64(scale))
	if !r.IsInt() {
		return 0, fmt.Errorf("bad size %q: not a whole number of bytes", s)
	}
	if !r.Num().IsInt64() {
		return 0, fmt.Errorf("bad size %q: too large", s)
	}
	return Bytes(r.Num().Int64()), nil
}

// String writes b exactly, in the unit that needs the fewest digits
// ("143771 MiB", "80 GB", "1 KiB"), binary on a tie, else in bytes ("1000"
// is "1 KB", "1001" is "1001"). ParseBytes reads it back to b.
func (b Bytes) String() string {
	neg, u := b < 0, uint64(b)
	if neg {
		u = -u
	}
	best := strconv.FormatUint(u, 10)
	bestDigits := math.MaxInt
	for _, pass := range []int{1, 0} { // binary units first, so they win ties
		for _, un := range sizeUnits[1:] {
			binary := un.bytes&(un.bytes-1) == 0
			if binary != (pass == 1) || un.name == "kB" || u%uint64(un.bytes) != 0 || u == 0 {
				continue
			}
			n := strconv.FormatUint(u/uint64(un.bytes), 10)
			if len(n) < bestDigits {
				best, bestDigits = n+" "+un.name, len(n)
			}
		}
	}
	if neg {
		return "-" + best
	}
	return best
}

// rateUnits are the units ParseRate accepts: decimal bytes, binary bytes
// and bits per second (a NIC's "400 Gb/s" is 50 GB/s).
var rateUnits = []struct {
	name     string
	exp10    int // decimal scale: value × 10^exp10
	exp2     int // binary scale: value × 2^exp2
	bits     bool
	notation bool // used by Rate.String
}{
	{name: "B/s", notation: true},
	{name: "KB/s", exp10: 3, notation: true}, {name: "kB/s", exp10: 3},
	{name: "MB/s", exp10: 6, notation: true}, {name: "GB/s", exp10: 9, notation: true},
	{name: "TB/s", exp10: 12, notation: true},
	{name: "KiB/s", exp2: 10}, {name: "MiB/s", exp2: 20}, {name: "GiB/s", exp2: 30}, {name: "TiB/s", exp2: 40},
	{name: "b/s", bits: true}, {name: "bps", bits: true},
	{name: "Kb/s", exp10: 3, bits: true}, {name: "kb/s", exp10: 3, bits: true}, {name: "Kbps", exp10: 3, bits: true}, {name: "kbps", exp10: 3, bits: true},
	{name: "Mb/s", exp10: 6, bits: true}, {name: "Mbps", exp10: 6, bits: true},
	{name: "Gb/s", exp10: 9, bits: true}, {name: "Gbps", exp10: 9, bits: true},
	{name: "Tb/s", exp10: 12, bits: true}, {name: "Tbps", exp10: 12, bits: true},
}

const rateUnitList = "B/s, KB/s, MB/s, GB/s, TB/s, KiB/s .. TiB/s, or bits: b/s, Kb/s, Mb/s, Gb/s, Tb/s, Mbps, Gbps"

// ParseRate reads a bandwidth: "55.5 GB/s", "4.8 TB/s", "400 Gb/s" (bits,
// so 50 GB/s), "100 Gbps", "12 GiB/s", or a plain number of bytes per
// second. Decimal units are applied exactly: the text is rounded to a
// float64 once.
func ParseRate(s string) (Rate, error) {
	t := strings.TrimSpace(s)
	num := realNumber.FindString(t)
	if num == "" {
		return 0, fmt.Errorf("bad rate %q: want a number and a unit (%s)", s, rateUnitList)
	}
	unit := strings.TrimSpace(t[len(num):])
	for _, u := range rateUnits {
		if u.name != unit && (unit != "" || u.name != "B/s") {
			continue
		}
		v, err := scaleFloat(num, u.exp10)
		if err != nil {
			return 0, fmt.Errorf("bad rate %q: %v", s, err)
		}
		v = math.Ldexp(v, u.exp2)
		if u.bits {
			v /= 8
		}
		if math.IsInf(v, 0) {
			return 0, fmt.Errorf("bad rate %q: out of range", s)
		}
		return Rate(v), nil
	}
	return 0, fmt.Errorf("bad rate %q: unknown unit %q (want %s)", s, unit, rateUnitList)
}

// scaleFloat returns the decimal num times 10^exp10, rounded once.
func scaleFloat(num string, exp10 int) (float64, error) {
	mant, e, hasExp := strings.Cut(strings.ToLower(num), "e")
	exp := 0
	if hasExp {
		var err error
		if exp, err = strconv.Atoi(e); err != nil || exp > 10000 || exp < -10000 {
			return 0, errors.New("exponent out of range")
		}
	}
	exp += exp10
	text := mant
	if exp != 0 {
		text += "e" + strconv.Itoa(exp)
	}
	v, err := strconv.ParseFloat(text, 64)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return 0, errors.New("out of range")
		}
		return 0, errors.New("malformed number")
	}
	return v, nil
}

// String writes r in the largest decimal byte unit it reaches ("55.5
// GB/s", "63.01538461538461 GB/s"), exactly: ParseRate reads it back to
// the identical float64. Values that would need more than 17 digits in a
// unit are written as a plain number of bytes per second.
func (r Rate) String() string {
	v := float64(r)
	if v == 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	if s, ok := rateInUnit(v); ok {
		return s
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// rateInUnit writes v with a unit by moving the decimal point of its
// shortest round-tripping digits, so no rounding happens.
func rateInUnit(v float64) (string, bool) {
	orig, sign := v, ""
	if v < 0 {
		sign, v = "-", -v
	}
	e := strconv.FormatFloat(v, 'e', -1, 64) // d.ddddde±XX
	mant, exps, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(exps)
	digits := strings.Replace(mant, ".", "", 1)
	unit, uexp := "", 0
	for _, u := range rateUnits {
		if u.notation && exp >= u.exp10 && u.exp10 >= uexp {
			unit, uexp = u.name, u.exp10
		}
	}
	if unit == "" {
		return "", false
	}
	// The value is 0.digits × 10^(exp+1); in the unit, the point sits
	// after exp-uexp+1 digits.
	point := exp - uexp + 1
	if point > 17 {
		return "", false
	}
	for len(digits) < point {
		digits += "0"
	}
	s := digits[:point]
	if frac := digits[point:]; frac != "" {
		s += "." + frac
	}
	s = sign + s + " " + unit
	if back, err := ParseRate(s); err != nil || float64(back) != orig {
		return "", false
	}
	return s, true
}

// parseInt reads a plain decimal integer.
func parseInt(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if !intNumber.MatchString(t) {
		return 0, fmt.Errorf("bad integer %q", s)
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bad integer %q: out of range", s)
	}
	return v, nil
}

// parseFloat reads a plain decimal number, with an optional exponent.
func parseFloat(s string) (float64, error) {
	t := strings.TrimSpace(s)
	if realNumber.FindString(t) != t {
		return 0, fmt.Errorf("bad number %q", s)
	}
	v, err := scaleFloat(t, 0)
	if err != nil {
		return 0, fmt.Errorf("bad number %q: %v", s, err)
	}
	return v, nil
}

// parseBool reads a YAML 1.2 boolean; YAML 1.1's yes, no, on and off
// are refused rather than guessed at.
func parseBool(s string) (bool, error) {
	switch strings.TrimSpace(s) {
	case "true", "True", "TRUE":
		return true, nil
	case "false", "False", "FALSE":
		return false, nil
	}
	return false, fmt.Errorf("bad boolean %q: want true or false", s)
}

// formatFloat writes v so that parseFloat reads back the same float64.
func formatFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
