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
	// Wrap, when positive, wraps a left-aligned column's text at word
	// boundaries to this many characters in text output, continuing on
	// lines of their own (a line break in a cell starts one too), so
	// that a table of sentences stays within a terminal's width.
	Wrap int
}

// Table is a table as data, so that the same rows print as aligned
// text, as CSV (RFC 4180) and as HTML: every table the command line
// prints goes through one, and --csv is the same table in another form.
type Table struct {
	Columns []Column
	Rows    [][]string
	// NoHeader leaves the header line out of the text (a list of
	// name and count pairs says what it is by its title); CSV keeps it.
	NoHeader bool
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
	rows := t.wrapped()
	// For decimal columns, the widths of the integer part, the
	// fraction and the unit, each aligned in its own right.
	intW := make([]int, n)
	fracW := make([]int, n)
	unitW := make([]int, n)
	width := make([]int, n)
	for _, row := range rows {
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
		if !t.NoHeader {
			width[i] = max(width[i], textWidth(c.Name))
		}
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
				pad(&b, width[i]-fracW[i]-unitW[i]-textWidth(in))
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
	if !t.NoHeader {
		line(head, true)
	}
	for _, row := range rows {
		line(row, false)
	}
	return werr
}

// wrapped is the rows as text prints them: a row whose wrapped cells
// take several lines becomes several rows, the other cells blank on all
// but the first.
func (t *Table) wrapped() [][]string {
	wraps := false
	for _, c := range t.Columns {
		wraps = wraps || c.Wrap > 0
	}
	if !wraps {
		return t.Rows
	}
	var out [][]string
	for _, row := range t.Rows {
		lines := [][]string{}
		for i, cell := range row {
			var ls []string
			if t.Columns[i].Wrap > 0 {
				for _, para := range strings.Split(cell, "\n") {
					ls = append(ls, wrapText(para, t.Columns[i].Wrap)...)
				}
			} else {
				ls = []string{cell}
			}
			for j, l := range ls {
				if j >= len(lines) {
					lines = append(lines, make([]string, len(t.Columns)))
				}
				lines[j][i] = l
			}
		}
		out = append(out, lines...)
	}
	return out
}

// wrapText breaks s at spaces into lines of at most width characters (a
// longer word has a line of its own).
func wrapText(s string, width int) []string {
	var lines []string
	cur := ""
	for _, word := range strings.Fields(s) {
		switch {
		case cur == "":
			cur = word
		case textWidth(cur)+1+textWidth(word) <= width:
			cur += " " + word
		default:
			lines = append(lines, cur)
			cur = word
		}
	}
	return append(lines, cur)
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
