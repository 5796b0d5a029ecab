package platform

import (
	"errors"
	"fmt"
	"strings"
)

// Error is one problem in a platform description, with where it is:
// "h200.yaml:12: gpus[0].vram: bad size "12 GiX": unknown unit "GiX"".
type Error struct {
	// File is the origin: a file name, "presets/h200-pcie.yaml", or, for a
	// spec built in Go, the spec's name. Empty for --set values.
	File string
	// Line is the 1-based line in File, 0 when unknown (specs built in Go,
	// values given with Set).
	Line int
	// Field is the path of the field in YAML names, "gpus[0].link.gen";
	// empty for errors about the document as a whole.
	Field string
	// Reason says what is wrong and, where it helps, what is accepted.
	Reason string
}

func (e *Error) Error() string {
	var b strings.Builder
	switch {
	case e.File != "" && e.Line > 0:
		fmt.Fprintf(&b, "%s:%d: ", e.File, e.Line)
	case e.File != "":
		b.WriteString(e.File + ": ")
	case e.Line > 0:
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Reason)
	return b.String()
}

// ErrorList is several Errors, in the order of the document where they
// come from one. Its last entry says how many more were not kept when
// there were more than MaxErrors.
type ErrorList []*Error

// MaxErrors is how many errors one Parse, Validate or Set reports at most.
const MaxErrors = 20

func (l ErrorList) Error() string {
	s := make([]string, len(l))
	for i, e := range l {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// Unwrap gives the errors to errors.Is and errors.As.
func (l ErrorList) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}

// Sentinel errors, matched with errors.Is.
var (
	// ErrNotFound is wrapped by lookups of names and node IDs that the
	// spec does not have.
	ErrNotFound = errors.New("not found")
	// ErrUnknownPreset is wrapped by Preset and Resolve for an unknown name.
	ErrUnknownPreset = errors.New("unknown platform preset")
	// ErrBadPath is wrapped by Set for a path that names no field.
	ErrBadPath = errors.New("bad field path")
)

// errorList collects Errors, keeping the first MaxErrors.
type errorList struct {
	file    string
	errs    []*Error
	dropped int
}

func (l *errorList) add(line int, field, format string, args ...any) {
	if len(l.errs) == MaxErrors {
		l.dropped++
		return
	}
	l.errs = append(l.errs, &Error{File: l.file, Line: line, Field: field, Reason: fmt.Sprintf(format, args...)})
}

func (l *errorList) empty() bool { return len(l.errs) == 0 }

// err returns nil, the one *Error, or an ErrorList.
func (l *errorList) err() error {
	switch {
	case len(l.errs) == 0:
		return nil
	case len(l.errs) == 1 && l.dropped == 0:
		return l.errs[0]
	}
	list := ErrorList(append([]*Error(nil), l.errs...))
	if l.dropped > 0 {
		list = append(list, &Error{File: l.file, Reason: fmt.Sprintf("too many errors: %d more not shown", l.dropped)})
	}
	return list
}
