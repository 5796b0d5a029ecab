// Package calib compares the model with a machine's probe report
// (package hw/probe) and fits the model to it.
//
// Every row of a report (a Measurement of one GPU) has a model
// counterpart that Model.Predict computes by running the model: the
// "transfers" scenario for copies (the same path, direction and size),
// small programs on a booted System for pinning, host copies and the
// unified-memory measurements. Rows whose operation the model has no
// mechanism for (a pointer chase, a null driver call, SM copies within or
// between VRAMs) are ErrNotModelled with the reason, never dropped.
//
// Calibrate changes only the calibration subset of a platform: each
// parameter is solved for by bisection on the model's own output, so
// that the model's prediction of one chosen row equals the measurement
// (the pinned copy's link efficiency, the per-call copy overhead and its
// completion wait, the
// isolated fault latency, the memcpy and streaming-copy rates, the
// pinning costs). The parameter's source names the report, its date, its
// machine and GPU, the row and the measured value; Validate reads those
// sources back to mark the calibration rows and leave them out of the
// per-class medians.
//
// FromTopo turns a dmalab topo --json report into a platform skeleton:
// what topo saw with the topo run as its source, the rest the preset
// default marked assumed.
package calib
