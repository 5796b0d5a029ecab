// Package report turns a run into what people and programs read: a
// result document (JSON with stable field names), a readable table, and a
// Chrome trace-event file that opens in Perfetto (ui.perfetto.dev) or
// chrome://tracing.
//
// Models never print; scenarios fill a Result and a Trace, and the CLI
// chooses the form. Everything written is deterministic: the same Result
// gives byte-identical output.
package report
