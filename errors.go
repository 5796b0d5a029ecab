package dmalab

import (
	"errors"
	"fmt"
	"strings"
)

// ErrUsage is wrapped by errors caused by bad input (unknown scenario,
// parameter or platform, a bad value): the CLI exits 2 on them.
var ErrUsage = errors.New("usage")

// Usagef returns an error wrapping ErrUsage with a formatted message.
func Usagef(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, a...))
}

// UsageMessage strips the ErrUsage marker from an error's text.
func UsageMessage(err error) string {
	return strings.TrimPrefix(err.Error(), ErrUsage.Error()+": ")
}
