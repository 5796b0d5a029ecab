package cuda

import (
	"time"
)

// StreamCreate creates a stream (cuStreamCreate) with Stream* flags.
func (t *Thread) StreamCreate(flags uint32) (Stream, error) {
	var s Stream
	if err := check("cuStreamCreate", t.lib().cuStreamCreate(&s, flags)); err != nil {
		return 0, err
	}
	return s, nil
}

// StreamDestroy destroys a stream (cuStreamDestroy_v2).
func (t *Thread) StreamDestroy(s Stream) error {
	return check("cuStreamDestroy_v2", t.lib().cuStreamDestroy(s))
}

// StreamSynchronize waits for all work queued on s (cuStreamSynchronize).
func (t *Thread) StreamSynchronize(s Stream) error {
	return check("cuStreamSynchronize", t.lib().cuStreamSynchronize(s))
}

// StreamWaitEvent makes later work on s wait for e (cuStreamWaitEvent).
func (t *Thread) StreamWaitEvent(s Stream, e Event) error {
	return check("cuStreamWaitEvent", t.lib().cuStreamWaitEvent(s, e, 0))
}

// EventCreate creates an event (cuEventCreate) with Event* flags.
func (t *Thread) EventCreate(flags uint32) (Event, error) {
	var e Event
	if err := check("cuEventCreate", t.lib().cuEventCreate(&e, flags)); err != nil {
		return 0, err
	}
	return e, nil
}

// EventRecord records e on s (cuEventRecord).
func (t *Thread) EventRecord(e Event, s Stream) error {
	return check("cuEventRecord", t.lib().cuEventRecord(e, s))
}

// EventSynchronize waits for e (cuEventSynchronize).
func (t *Thread) EventSynchronize(e Event) error {
	return check("cuEventSynchronize", t.lib().cuEventSynchronize(e))
}

// EventElapsed returns the time between two completed events
// (cuEventElapsedTime_v2, resolution about 0.5 µs).
func (t *Thread) EventElapsed(start, end Event) (time.Duration, error) {
	var ms float32
	if err := check("cuEventElapsedTime_v2", t.lib().cuEventElapsedTime(&ms, start, end)); err != nil {
		return 0, err
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// EventDestroy destroys an event (cuEventDestroy_v2).
func (t *Thread) EventDestroy(e Event) error {
	return check("cuEventDestroy_v2", t.lib().cuEventDestroy(e))
}
