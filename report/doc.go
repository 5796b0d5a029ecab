// Package report turns a run into what people and programs read: a
// result document (JSON with stable field names), a readable table (a
// Table: the same cells as aligned text, as CSV, and in the HTML
// report, with one rule for rates, FormatRate, and one for sizes,
// FormatSize), a sweep's document (Sweep: its definition and a result
// per point), and a
// Chrome trace-event file that opens in Perfetto (ui.perfetto.dev) or
// chrome://tracing.
//
// Models never print; scenarios fill a Result, the front door's tracer
// feeds a Trace, and the CLI chooses the form. A Trace is written as it
// is fed (a buffered writer, events in the order they come), so its
// memory does not grow with the run. Everything written is deterministic: the same Result
// gives byte-identical output.
package report
