// Package html writes a run's report as one self-contained HTML page:
// the result's plots as inline SVG drawn with gonum.org/v1/plot
// (bandwidth against size per path and direction, model against
// measurement, the timeline of engines and links and their throughput,
// a pipeline's stages), its tables (results, diagnostics with the call
// that made the mapping concerned, parameters, factors and every
// platform parameter with its source), and inline CSS. The page loads
// nothing: no script, font or style from the network, so it opens from
// a mail attachment or an air-gapped machine as it does anywhere.
//
// The page is a function of its inputs: the same Page gives the same
// bytes.
package html
