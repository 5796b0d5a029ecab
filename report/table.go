package report

import (
	"encoding/csv"
	"io"
	"strings"
	"unicode/utf8"
)

// Align is how a column's cells line up in text.
type Align int

const (
	// AlignLeft is for words: names, paths, directions.
	AlignLeft Align = iota
	// AlignRight is for counts and other integers.
	AlignRight
	// AlignDecimal lines numbers up on their decimal point (or where it
	// would be), so that "0.610" and "55.5" read as magnitudes; a unit
	// after the number follows it.
	AlignDecimal
)

// Column is one column of a Table: its heading and its alignment.
type Column struct {
	Name  string
	Align Align
}

// Table is a table as data, so that the same rows print as aligned
// text, as CSV (RFC 4180) and as HTML: every table the command line
// prints goes through one, and --csv is the same table in another form.
type Table struct {
	Columns []Column
	Rows    [][]string
}

// AddRow appends a row; cells beyond the columns are dropped and missing
// ones are empty.
func (t *Table) AddRow(cells ...string) {
	row := make([]string, len(t.Columns))
	copy(row, cells)
	t.Rows = append(t.Rows, row)
}

// WriteCSV writes the table as CSV with a header line (encoding/csv:
// fields with commas, quotes or line breaks are quoted).
func (t *Table) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	head := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		head[i] = c.Name
	}
	if err := cw.Write(head); err != nil {
		return err
	}
	if err := cw.WriteAll(t.Rows); err != nil {
		return err
	}
	return cw.Error()
}

// WriteText writes the table as aligned text, each line prefixed by
// indent, columns two spaces apart, no trailing spaces.
func (t *Table) WriteText(w io.Writer, indent string) error {
	n := len(t.Columns)
	var werr error
	// For decimal columns, the widths of the integer part, the
	// fraction and the unit, each aligned in its own right.
	intW := make([]int, n)
	fracW := make([]int, n)
	unitW := make([]int, n)
	width := make([]int, n)
	for _, row := range t.Rows {
		for i, cell := range row {
			if t.Columns[i].Align == AlignDecimal {
				in, fr, un := splitDecimal(cell)
				intW[i] = max(intW[i], textWidth(in))
				fracW[i] = max(fracW[i], textWidth(fr))
				unitW[i] = max(unitW[i], textWidth(un))
			} else {
				width[i] = max(width[i], textWidth(cell))
			}
		}
	}
	for i, c := range t.Columns {
		if c.Align == AlignDecimal {
			width[i] = max(width[i], intW[i]+fracW[i]+unitW[i])
		}
		width[i] = max(width[i], textWidth(c.Name))
	}
	var b strings.Builder
	line := func(cells []string, head bool) {
		b.Reset()
		b.WriteString(indent)
		for i, cell := range cells {
			if i > 0 {
				b.WriteString("  ")
			}
			c := t.Columns[i]
			switch {
			case c.Align == AlignLeft:
				b.WriteString(cell)
				pad(&b, width[i]-textWidth(cell))
			case head || c.Align == AlignRight:
				pad(&b, width[i]-textWidth(cell))
				b.WriteString(cell)
			default:
				in, fr, un := splitDecimal(cell)
				// Right-aligned as a block; within it the points line
				// up, and so do the units.
				pad(&b, width[i]-intW[i]-fracW[i]-unitW[i]+intW[i]-textWidth(in))
				b.WriteString(in)
				b.WriteString(fr)
				pad(&b, fracW[i]-textWidth(fr))
				b.WriteString(un)
				pad(&b, unitW[i]-textWidth(un))
			}
		}
		if _, err := io.WriteString(w, strings.TrimRight(b.String(), " ")+"\n"); err != nil && werr == nil {
			werr = err
		}
	}
	head := make([]string, n)
	for i, c := range t.Columns {
		head[i] = c.Name
	}
	line(head, true)
	for _, row := range t.Rows {
		line(row, false)
	}
	return werr
}

// splitDecimal splits a cell into its number's integer part, its
// fraction and what follows: "58.93 ms" is "58", ".93", " ms"; "156 ms"
// is "156", "", " ms". A cell that does not start with a number ("-")
// is all integer part, so that it is right-aligned with the numbers.
func splitDecimal(s string) (in, frac, unit string) {
	i := 0
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		i++
	}
	start := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == start {
		return s, "", ""
	}
	in = s[:i]
	j := i
	if j < len(s) && s[j] == '.' {
		j++
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
	}
	return in, s[i:j], s[j:]
}

func textWidth(s string) int { return utf8.RuneCountInString(s) }

func pad(b *strings.Builder, n int) {
	for ; n > 0; n-- {
		b.WriteByte(' ')
	}
}
