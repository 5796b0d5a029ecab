package html

import (
	"bytes"
	"cmp"
	"fmt"
	"image/color"
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/report"
	"github.com/dmalab/dmalab/sim"
)

// palette is Tableau's ten colours (matplotlib's default cycle): told
// apart by most readers, colour-blind ones included for the first few.
var palette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0xff, 0x7f, 0x0e, 0xff}, {0x2c, 0xa0, 0x2c, 0xff}, {0xd6, 0x27, 0x28, 0xff},
	{0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff}, {0xe3, 0x77, 0xc2, 0xff}, {0x7f, 0x7f, 0x7f, 0xff},
	{0xbc, 0xbd, 0x22, 0xff}, {0x17, 0xbe, 0xcf, 0xff},
}

func colour(i int) color.Color { return palette[i%len(palette)] }

// sans is the face of every text: Liberation Sans's metrics, which
// gonum embeds; the browser draws it with its own sans-serif face.
var sans = font.Font{Typeface: "Liberation", Variant: "Sans"}

// newPlot returns a plot with its texts in sans at readable sizes.
func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font = sans
	p.Title.TextStyle.Font.Size = 14
	p.X.Label.Text, p.Y.Label.Text = x, y
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = sans
		a.Label.TextStyle.Font.Size = 12
		a.Tick.Label.Font = sans
		a.Tick.Label.Font.Size = 11
	}
	p.Legend.TextStyle.Font = sans
	p.Legend.TextStyle.Font.Size = 11
	p.X.Tick.Marker, p.Y.Tick.Marker = plainTicks{}, plainTicks{}
	return p
}

// toSVG draws p on a w × h canvas and returns the <svg> element without
// the XML prologue, for inlining. The legend goes to the right of the
// plot, where it hides no data.
func toSVG(p *plot.Plot, w, h vg.Length) (string, error) {
	leg := p.Legend
	r := leg.Rectangle(draw.New(vgsvg.New(w, h)))
	legW := r.Max.X - r.Min.X
	if legW > 0 {
		w += legW // the plot keeps its width
	}
	c := vgsvg.New(w, h)
	dc := draw.New(c)
	right := vg.Points(-10)
	if legW > 0 {
		p.Legend = plot.NewLegend()
		right = -(legW + vg.Points(20))
		leg.Top, leg.Left, leg.XOffs, leg.YOffs = true, true, 0, 0
		top := vg.Points(8)
		if p.Title.Text != "" {
			top += p.Title.TextStyle.Height(p.Title.Text) + p.Title.Padding
		}
		leg.Draw(draw.Crop(dc, w-legW-vg.Points(10), 0, 0, -top))
	}
	// A margin round the plot: gonum lays text out by Liberation Sans's
	// metrics, and a browser that draws it in a wider face (or draws a
	// glyph such as → from a fallback face) must not clip it.
	p.Draw(draw.Crop(dc, vg.Points(14), right, vg.Points(4), vg.Points(-4)))
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return "", fmt.Errorf("draw %q: %w", p.Title.Text, err)
	}
	s := b.String()
	if i := strings.Index(s, "<svg"); i >= 0 {
		s = s[i:]
	}
	return s, nil
}

// Figure is one drawn plot and what it shows.
type figure struct {
	SVG     string
	Caption string
}

// sizeTicks marks a log₂ size axis at powers of two, every second or
// fourth one when there are many, labelled in binary units.
type sizeTicks struct{}

func (sizeTicks) Ticks(lo, hi float64) []plot.Tick {
	a, b := int(math.Floor(math.Log2(lo))), int(math.Ceil(math.Log2(hi)))
	step := 1
	for (b-a)/step > 5 {
		step *= 2
	}
	var ts []plot.Tick
	for e := a; e <= b; e++ {
		v := math.Exp2(float64(e))
		if v < lo || v > hi {
			continue
		}
		t := plot.Tick{Value: v}
		if e%step == 0 {
			t.Label = report.FormatBytes(int64(v))
		}
		ts = append(ts, t)
	}
	return ts
}

// decadeTicks marks a log₁₀ axis at powers of ten (labelled) and their
// multiples (not).
type decadeTicks struct{}

func (decadeTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for e := int(math.Floor(math.Log10(lo))); e <= int(math.Ceil(math.Log10(hi))); e++ {
		for m := 1; m < 10; m++ {
			v := float64(m) * math.Pow(10, float64(e))
			if v < lo*0.999 || v > hi*1.001 {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 {
				t.Label = trimFloat(v)
			}
			ts = append(ts, t)
		}
	}
	return ts
}

func trimFloat(v float64) string { return fmt.Sprintf("%g", v) }

// plainTicks are gonum's default ticks on a linear axis, labelled
// without trailing zeros ("25", not "25.00").
type plainTicks struct{}

func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(math.Round(ts[i].Value*1e9)/1e9, 'f', -1, 64)
		}
	}
	return ts
}

// logRange widens [lo, hi] to whole powers of base, so the log axis has a
// labelled tick at each end.
func logRange(lo, hi, base float64) (float64, float64) {
	l := math.Pow(base, math.Floor(math.Log(lo)/math.Log(base)))
	h := math.Pow(base, math.Ceil(math.Log(hi)/math.Log(base)))
	if h == l {
		h *= base
	}
	return l, h
}

// series is the rows of one path and direction (and mode, platform).
type series struct {
	label string
	rows  []report.Row
}

func rowLabel(r report.Row, withDirection bool) string {
	parts := []string{r.Platform, r.Path}
	if withDirection {
		parts = append(parts, r.Direction)
	}
	parts = append(parts, r.Mode)
	return strings.Join(slices.DeleteFunc(parts, func(s string) bool { return s == "" }), " ")
}

// bandwidthPlots draws, per direction, bandwidth against size: one line
// per path, the model's solid, a measurement's dashed. A direction
// appears when one of its paths has two sizes or more.
func bandwidthPlots(res *report.Result) ([]figure, error) {
	var dirs []string
	byDir := map[string][]*series{}
	find := map[string]*series{}
	for _, r := range res.Results {
		if r.Bytes <= 0 || r.GBps <= 0 && (r.Measured == nil || r.Measured.GBps <= 0) {
			continue
		}
		if _, ok := byDir[r.Direction]; !ok {
			dirs = append(dirs, r.Direction)
			byDir[r.Direction] = nil
		}
		k := r.Direction + "\x00" + rowLabel(r, false)
		s := find[k]
		if s == nil {
			s = &series{label: rowLabel(r, false)}
			find[k] = s
			byDir[r.Direction] = append(byDir[r.Direction], s)
		}
		s.rows = append(s.rows, r)
	}
	var figs []figure
	for _, d := range dirs {
		ss := byDir[d]
		multi := false
		for _, s := range ss {
			sizes := map[int64]bool{}
			for _, r := range s.rows {
				sizes[r.Bytes] = true
			}
			multi = multi || len(sizes) > 1
		}
		if !multi {
			continue
		}
		f, err := bandwidthPlot(res, d, ss)
		if err != nil {
			return nil, err
		}
		figs = append(figs, f)
	}
	return figs, nil
}

func bandwidthPlot(res *report.Result, dir string, ss []*series) (figure, error) {
	title := "Bandwidth against size, " + dirName(dir)
	p := newPlot(title, "size of one copy (log₂ scale)", "GB/s (10⁹ bytes/s, log scale)")
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = sizeTicks{}, decadeTicks{}
	p.Add(plotter.NewGrid())
	loX, hiX, loY, hiY := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	measured, hasModel := false, false
	for i, s := range ss {
		slices.SortStableFunc(s.rows, func(a, b report.Row) int { return cmp.Compare(a.Bytes, b.Bytes) })
		var model, meas plotter.XYs
		for _, r := range s.rows {
			x := float64(r.Bytes)
			if r.GBps > 0 {
				model = append(model, plotter.XY{X: x, Y: r.GBps})
			}
			if r.Measured != nil && r.Measured.GBps > 0 {
				meas = append(meas, plotter.XY{X: x, Y: r.Measured.GBps})
			}
		}
		for _, xy := range append(slices.Clone(model), meas...) {
			loX, hiX, loY, hiY = min(loX, xy.X), max(hiX, xy.X), min(loY, xy.Y), max(hiY, xy.Y)
		}
		c := colour(i)
		if len(model) > 0 {
			hasModel = true
			l, pts, err := plotter.NewLinePoints(model)
			if err != nil {
				return figure{}, fmt.Errorf("%s: %s: %w", title, s.label, err)
			}
			l.Color, l.Width = c, vg.Points(1.5)
			pts.Color, pts.Shape, pts.Radius = c, draw.CircleGlyph{}, vg.Points(2.2)
			p.Add(l, pts)
			p.Legend.Add(s.label, l, pts)
		}
		if len(meas) > 0 {
			measured = true
			label := s.label + " (measured)"
			if len(model) == 0 {
				label = s.label // only measurements: no need to say so
			}
			l, pts, err := plotter.NewLinePoints(meas)
			if err != nil {
				return figure{}, fmt.Errorf("%s: %s measured: %w", title, s.label, err)
			}
			l.Color, l.Width, l.Dashes = c, vg.Points(1.2), []vg.Length{vg.Points(4), vg.Points(2)}
			pts.Color, pts.Shape, pts.Radius = c, draw.TriangleGlyph{}, vg.Points(3.5)
			p.Add(l, pts)
			p.Legend.Add(label, l, pts)
		}
	}
	p.X.Min, p.X.Max = logRange(loX, hiX, 2)
	p.Y.Min, p.Y.Max = logRange(loY, hiY, 10)
	h := 10*vg.Centimeter + vg.Length(max(0, len(ss)-10))*0.5*vg.Centimeter
	svg, err := toSVG(p, 16*vg.Centimeter, h)
	caption := fmt.Sprintf("%s on %s: the time of one copy of each size, per-call overhead included, as GB/s. Small copies are ruled by the call's fixed cost, large ones by the slowest link or memory on the path.", dirName(dir), res.Platform)
	switch {
	case measured && hasModel:
		caption += " Solid lines with dots are the model; dashed lines with triangles the measurement on a real machine."
	case measured:
		caption = fmt.Sprintf("%s on %s, measured: the median of each measurement's samples as GB/s. A path measured at one size only is a single triangle.", dirName(dir), res.Platform)
	}
	return figure{SVG: svg, Caption: caption}, err
}

// dirName says a direction's name in words where it is one of the
// copies' (xfer's names), else gives it as it is.
func dirName(d string) string {
	switch d {
	case "h2d":
		return "host to device (h2d)"
	case "d2h":
		return "device to host (d2h)"
	case "bidir":
		return "both directions at once (bidir, per direction)"
	case "d2d":
		return "device to device (d2d)"
	case "h2h":
		return "host to host (h2h)"
	case "":
		return "no direction (one operation)"
	}
	return d
}

// comparisonPlot draws the model's GB/s against the measurement's for
// every row that has both, with the line where they agree.
func comparisonPlot(res *report.Result) (*figure, error) {
	var dirs []string
	pts := map[string]plotter.XYs{}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range res.Results {
		if r.GBps <= 0 || r.Measured == nil || r.Measured.GBps <= 0 {
			continue
		}
		if _, ok := pts[r.Direction]; !ok {
			dirs = append(dirs, r.Direction)
		}
		pts[r.Direction] = append(pts[r.Direction], plotter.XY{X: r.Measured.GBps, Y: r.GBps})
		lo, hi = min(lo, r.GBps, r.Measured.GBps), max(hi, r.GBps, r.Measured.GBps)
	}
	if len(dirs) == 0 {
		return nil, nil
	}
	p := newPlot("Model against measurement", "measured GB/s (log scale)", "modelled GB/s (log scale)")
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = decadeTicks{}, decadeTicks{}
	lo, hi = logRange(lo, hi, 10)
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = lo, hi, lo, hi
	p.Add(plotter.NewGrid())
	diag, err := plotter.NewLine(plotter.XYs{{X: lo, Y: lo}, {X: hi, Y: hi}})
	if err != nil {
		return nil, err
	}
	diag.Color, diag.Dashes = color.Gray{0x80}, []vg.Length{vg.Points(3), vg.Points(3)}
	p.Add(diag)
	p.Legend.Add("model = measurement", diag)
	for i, d := range dirs {
		sc, err := plotter.NewScatter(pts[d])
		if err != nil {
			return nil, fmt.Errorf("model against measurement, %s: %w", d, err)
		}
		sc.Color, sc.Shape, sc.Radius = colour(i), draw.CircleGlyph{}, vg.Points(2.5)
		p.Add(sc)
		p.Legend.Add(dirName(d), sc)
	}
	svg, err := toSVG(p, 12*vg.Centimeter, 11*vg.Centimeter)
	return &figure{SVG: svg, Caption: "Each dot is one path, direction and size: above the dashed line the model is faster than the machine, below it slower."}, err
}

// stagesPlot draws each row's stages as one stacked bar: where a frame's
// time goes, stage by stage.
func stagesPlot(res *report.Result) (*figure, error) {
	var rows []report.Row
	var names []string
	for _, r := range res.Results {
		if len(r.Stages) == 0 {
			continue
		}
		rows = append(rows, r)
		for _, s := range r.Stages {
			if !slices.Contains(names, s.Name) {
				names = append(names, s.Name)
			}
		}
	}
	if len(rows) == 0 {
		return nil, nil
	}
	// The first row at the top.
	slices.Reverse(rows)
	labels := make([]string, len(rows))
	longest := 0.0
	for i, r := range rows {
		labels[i] = rowLabel(r, false)
		t := 0.0
		for _, s := range r.Stages {
			t += s.Seconds
		}
		longest = max(longest, t*1e3)
	}
	p := newPlot("Latency of a frame, by stage (mean)", "milliseconds", "")
	p.Add(plotter.NewGrid())
	var below *plotter.BarChart
	barW := vg.Points(14)
	for i, n := range names {
		vals := make(plotter.Values, len(rows))
		for j, r := range rows {
			for _, s := range r.Stages {
				if s.Name == n {
					vals[j] += s.Seconds * 1e3
				}
			}
		}
		bc, err := plotter.NewBarChart(vals, barW)
		if err != nil {
			return nil, fmt.Errorf("stages %s: %w", n, err)
		}
		bc.Horizontal = true
		bc.Color = colour(i)
		bc.LineStyle.Width = 0
		if below != nil {
			bc.StackOn(below)
		}
		below = bc
		p.Add(bc)
		p.Legend.Add(n, bc)
	}
	p.NominalY(labels...)
	p.X.Min = 0
	p.X.Max = longest * 1.05
	h := vg.Length(len(rows))*0.75*vg.Centimeter + 3*vg.Centimeter
	svg, err := toSVG(p, 16*vg.Centimeter, h)
	return &figure{SVG: svg, Caption: "Each bar is one platform and mode; its segments are the mean time a frame spends in each stage, from the start of its readout to the end of the last stage."}, err
}

// timeUnit picks the unit of a time axis spanning s seconds.
func timeUnit(s float64) (string, float64) {
	switch {
	case s < 1e-3:
		return "µs", 1e6
	case s < 1:
		return "ms", 1e3
	}
	return "s", 1
}

// spans draws a timeline's busy spans, track i at y = i.
type spans struct {
	tracks []report.TimelineTrack
	scale  float64
}

func (s spans) Plot(c draw.Canvas, plt *plot.Plot) {
	tx, ty := plt.Transforms(&c)
	for i, tr := range s.tracks {
		fill := colour(0)
		if tr.Kind == "engine" {
			fill = colour(1)
		}
		c.SetColor(fill)
		y0, y1 := ty(float64(i)-0.35), ty(float64(i)+0.35)
		for _, b := range tr.Busy {
			x0, x1 := tx(b[0]*s.scale), tx(b[1]*s.scale)
			if x1-x0 < 0.6 {
				x1 = x0 + 0.6 // a span shorter than a pixel still shows
			}
			var path vg.Path
			path.Move(vg.Point{X: x0, Y: y0})
			path.Line(vg.Point{X: x1, Y: y0})
			path.Line(vg.Point{X: x1, Y: y1})
			path.Line(vg.Point{X: x0, Y: y1})
			path.Close()
			c.Fill(path)
		}
	}
}

func (s spans) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmax = 0
	for _, tr := range s.tracks {
		for _, b := range tr.Busy {
			xmax = max(xmax, b[1]*s.scale)
		}
	}
	return 0, xmax, -0.5, float64(len(s.tracks)) - 0.5
}

// timelinePlots draws when each engine and link was busy, and the
// busiest links' throughput over time.
func timelinePlots(tl *report.Timeline) ([]figure, error) {
	if tl == nil || len(tl.Tracks) == 0 {
		return nil, nil
	}
	unit, scale := timeUnit(tl.Seconds)
	tracks := slices.Clone(tl.Tracks)
	slices.Reverse(tracks) // the first track at the top
	names := make([]string, len(tracks))
	for i, t := range tracks {
		names[i] = t.Name
	}
	p := newPlot("Timeline: when each copy engine and link was busy", "virtual time ("+unit+")", "")
	p.Add(plotter.NewGrid())
	p.Add(spans{tracks: tracks, scale: scale})
	p.NominalY(names...)
	p.X.Min, p.X.Max = 0, tl.Seconds*scale
	var eng, link draw.GlyphStyle
	eng.Color, eng.Shape, eng.Radius = colour(1), draw.BoxGlyph{}, vg.Points(4)
	link.Color, link.Shape, link.Radius = colour(0), draw.BoxGlyph{}, vg.Points(4)
	p.Legend.Add("copy engine busy", glyph(eng))
	p.Legend.Add("link or memory carrying data", glyph(link))
	h := vg.Length(len(tracks))*0.55*vg.Centimeter + 3.5*vg.Centimeter
	svg, err := toSVG(p, 17*vg.Centimeter, h)
	if err != nil {
		return nil, err
	}
	figs := []figure{{SVG: svg, Caption: fmt.Sprintf("One row per copy engine (orange) and per link direction or memory (blue): filled where at least one transfer or flow was active. Spans closer than %s apart are drawn as one.", fmtSeconds(tl.Seconds/600))}}

	// Throughput: the links that carried the most, at most eight.
	var links []report.TimelineTrack
	for _, t := range tl.Tracks {
		if t.Kind == "link" && t.Bytes > 0 {
			links = append(links, t)
		}
	}
	if len(links) == 0 {
		return figs, nil
	}
	slices.SortStableFunc(links, func(a, b report.TimelineTrack) int { return cmp.Compare(b.Bytes, a.Bytes) })
	links = links[:min(len(links), 8)]
	q := newPlot("Link utilisation: throughput over time", "virtual time ("+unit+")", "GB/s (mean over each bin)")
	q.Add(plotter.NewGrid())
	for i, t := range links {
		xy := make(plotter.XYs, len(t.GBps))
		for j, v := range t.GBps {
			xy[j] = plotter.XY{X: (float64(j) + 0.5) * tl.BinSeconds * scale, Y: v}
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return nil, fmt.Errorf("throughput of %s: %w", t.Name, err)
		}
		l.Color, l.Width = colour(i), vg.Points(1.3)
		q.Add(l)
		q.Legend.Add(fmt.Sprintf("%s (%s)", t.Name, report.FormatSize(t.Bytes)), l)
	}
	q.X.Min, q.Y.Min = 0, 0
	svg, err = toSVG(q, 17*vg.Centimeter, 9*vg.Centimeter)
	if err != nil {
		return nil, err
	}
	figs = append(figs, figure{SVG: svg, Caption: fmt.Sprintf("The bytes each link carried in each %s bin, spread evenly over each flow's duration, for the %d links that carried the most (in the legend: their total). Compare with the link's capacity in the platform parameters below.", fmtSeconds(tl.BinSeconds), len(links))})
	return figs, nil
}

// glyph is a legend thumbnail of one glyph style.
type glyph draw.GlyphStyle

func (g glyph) Thumbnail(c *draw.Canvas) {
	c.DrawGlyph(draw.GlyphStyle(g), c.Center())
}

func fmtSeconds(s float64) string { return report.FormatSeconds(s) }

// diagnosticsPlot draws each diagnostic at its virtual time on its
// class's row: when the misuse happened, and which come together.
func diagnosticsPlot(rep *check.Report) (*figure, error) {
	if rep == nil || len(rep.Diagnostics) == 0 {
		return nil, nil
	}
	var classes []string
	end := 0.0
	for _, d := range rep.Diagnostics {
		if !slices.Contains(classes, d.Class) {
			classes = append(classes, d.Class)
		}
		end = max(end, float64(d.Time)/float64(sim.Second))
	}
	unit, scale := timeUnit(end)
	row := func(class string) float64 { return float64(len(classes) - 1 - slices.Index(classes, class)) }
	bySeverity := map[string]plotter.XYs{}
	var severities []string
	for _, d := range rep.Diagnostics {
		if _, ok := bySeverity[d.Severity]; !ok {
			severities = append(severities, d.Severity)
		}
		bySeverity[d.Severity] = append(bySeverity[d.Severity], plotter.XY{X: float64(d.Time) / float64(sim.Second) * scale, Y: row(d.Class)})
	}
	p := newPlot("Diagnostics over virtual time, by class", "virtual time ("+unit+")", "")
	p.Add(plotter.NewGrid())
	for _, sev := range severities {
		sc, err := plotter.NewScatter(bySeverity[sev])
		if err != nil {
			return nil, fmt.Errorf("diagnostics %s: %w", sev, err)
		}
		sc.Color = colour(7)
		switch sev {
		case "error":
			sc.Color = colour(3)
		case "warning":
			sc.Color = colour(1)
		}
		sc.Shape, sc.Radius = draw.CircleGlyph{}, vg.Points(3)
		p.Add(sc)
		p.Legend.Add(sev, sc)
	}
	rev := slices.Clone(classes)
	slices.Reverse(rev)
	p.NominalY(rev...)
	p.Y.Min, p.Y.Max = -0.5, float64(len(classes))-0.5
	p.X.Min, p.X.Max = 0, end*scale*1.02
	h := vg.Length(len(classes))*0.5*vg.Centimeter + 3.5*vg.Centimeter
	svg, err := toSVG(p, 17*vg.Centimeter, h)
	return &figure{SVG: svg, Caption: "One dot per diagnostic, at the virtual time of the call or access that revealed it, on its class's row (the first class found at the top)."}, err
}
